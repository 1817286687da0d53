// `sparq export`: a checkpoint's model as a NumPy .npz whose arrays carry the
// DLRM reference's PyTorch state_dict names (DLRM_Net in dlrm_s_pytorch.py),
// so `net.load_state_dict({k: torch.from_numpy(v) ...})` takes it as is
// (scripts/load_sparq_export.py):
//
//   emb_l.{k}.weight   [rows x dim]   nn.EmbeddingBag k
//   bot_l.{2i}.weight  [out x in]     nn.Linear i of the bottom Sequential (a
//   bot_l.{2i}.bias    [out]          ReLU sits at index 2i+1)
//   top_l.{2i}.weight, top_l.{2i}.bias  the same for the top MLP (its last
//                                       activation is the reference's Sigmoid)
//
// sparq stores a layer's weight as [out x in] row-major, torch's Linear
// layout. The interaction needs no permutation: sparq's pairs come in the
// reference's order (li, lj: i outer, j < i; interaction.h), so the first top
// layer's columns mean the same in both.
//
// A model trained with DCT-MP (or the sketch) at its cuts expects them in its
// forward pass, which DLRM_Net does not have: exporting it needs
// --dense-cuts, saying that the export is meant to run without them.
#include <fmt/format.h>

#include "sparq/core/error.h"
#include "sparq/data/npz.h"
#include "sparq/model/checkpoint.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

struct ExportArgs {
  std::string load, out;
  bool dense_cuts = false;
};

void add_mlp(NpzWriter& w, const DenseParams<float>& dense, const MlpSpec& spec, const std::string& from,
             const std::string& to) {
  for (std::size_t l = 0; l < spec.num_layers(); ++l) {
    const auto name = [&](const std::string& prefix, const char* what) {
      return fmt::format("{}.{}.{}", prefix, prefix == from ? l : 2 * l, what);
    };
    w.add(name(to, "weight"), {spec.dims[l + 1], spec.dims[l]}, dense.param(dense.find(name(from, "weight"))));
    w.add(name(to, "bias"), {spec.dims[l + 1]}, dense.param(dense.find(name(from, "bias"))));
  }
}

void run_export(const ExportArgs& a) {
  const std::string meta = read_checkpoint_meta(a.load);
  const DlrmConfig cfg = checkpoint_config(meta, a.load);
  if (const auto cuts = forward_cuts(meta, a.load))
    SPARQ_CHECK_AS(InputError, a.dense_cuts,
                   "'{}' was trained with --mp-codec {} at --mp-splits {}: its forward pass keeps that codec at the "
                   "cuts, which the reference's DLRM_Net has not (sparq predict keeps it); --dense-cuts exports it "
                   "for a forward pass without it",
                   a.load, cuts->codec.text, cuts->splits);
  Dlrm<float> model(cfg, 0);
  load_checkpoint(a.load, model, nullptr);
  NpzWriter w(a.out);
  for (std::size_t k = 0; k < model.tables().size(); ++k) {
    const auto& t = model.tables()[k];
    w.add(fmt::format("emb_l.{}.weight", k), {t.rows(), t.dim()}, t.weights());
  }
  add_mlp(w, model.dense(), cfg.bot_spec(), "bot", "bot_l");
  add_mlp(w, model.dense(), cfg.top_spec(), "top", "top_l");
  w.finish();
  fmt::print("model: {}\nexported: {} ({} tables, {} + {} layers)\n", cfg.describe(), a.out, cfg.num_tables(),
             cfg.bot_spec().num_layers(), cfg.top_spec().num_layers());
}

}  // namespace

void add_export(CLI::App& app, Run& run) {
  auto a = std::make_shared<ExportArgs>();
  auto* c = app.add_subcommand("export", "Write a checkpoint's model as .npz with the DLRM reference's PyTorch names");
  c->add_option("--load", a->load, "Checkpoint (sparq train --save)")->required();
  c->add_option("--out", a->out, "The .npz to write")->required();
  c->add_flag("--dense-cuts", a->dense_cuts,
              "Export a model trained with DCT-MP (or the sketch) for a forward pass without the codec at its cuts");
  c->callback([a, &run] { run = [a] { run_export(*a); }; });
}

}  // namespace sparq::cli
