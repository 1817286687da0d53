// `sparq predict`: a checkpoint's click probabilities for a data file (TSV,
// sparq binary or the reference's .npz), one per line in data order, and the
// test metrics against the file's labels (every format holds them).
//
// A model trained with a cut codec that changes the forward pass (DCT-MP's
// per-sample top-k, the sketch) learned to work through it: it runs as the
// trainer's own test runs it, its stages as in-process ranks with the codec
// at every cut. Without the top-k a DCT-MP model scores worse (1.4-2.7 %
// test loss at 95 %, docs/results.md).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sparq/core/error.h"
#include "sparq/data/dataset.h"
#include "sparq/model/blas.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/loss.h"
#include "sparq/model/parallel.h"
#include "sparq/train/hybrid.h"
#include "sparq/train/pipeline.h"
#include "sparq/transport/launch.h"
#include "tools/commands.h"
#include "tools/linear.h"
#include "sparq/train/evaluate.h"

namespace sparq::cli {

namespace {

struct PredictArgs {
  std::string load, data_path, out;
  std::size_t batch = 16384;
  int threads = 2;
};

}  // namespace

void write_scores(const std::string& path, std::span<const float> scores) {
  // Written beside the target and renamed: a failure leaves no partial file.
  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "w"), std::fclose);
  SPARQ_CHECK_AS(InputError, f != nullptr, "cannot create '{}': {}", tmp, std::strerror(errno));
  for (float s : scores) fmt::print(f.get(), "{}\n", s);
  const bool ok = std::ferror(f.get()) == 0 && std::fclose(f.release()) == 0;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    SPARQ_THROW(InputError, "cannot write '{}': {}", path, std::strerror(errno));
  }
}

std::optional<TrainedCuts> forward_cuts(const std::string& meta, const std::string& path) {
  const auto j = nlohmann::json::parse(meta, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("mp_splits")) return std::nullopt;
  SPARQ_CHECK_AS(InputError, j["mp_splits"].is_string() && j.contains("mp_codec") && j["mp_codec"].is_string(),
                 "'{}': malformed model-parallel cuts in the checkpoint's metadata", path);
  TrainedCuts c{j["mp_splits"], parse_mp_codec(j["mp_codec"].get<std::string>())};
  if (c.codec.kind != MpCodec::Kind::Dct && c.codec.kind != MpCodec::Kind::Sketch) return std::nullopt;
  return c;
}

namespace {

void run_predict(const PredictArgs& a) {
  SPARQ_CHECK_AS(InputError, a.batch >= 1, "--test-mini-batch-size must be >= 1");
  SPARQ_CHECK_AS(InputError, a.threads >= 1, "--threads must be >= 1");
  set_blas_threads(a.threads);
  set_compute_threads(a.threads);
  const std::string meta = read_checkpoint_meta(a.load);
  if (is_linear_model(meta)) return predict_linear(a.load, a.data_path, a.out);
  const DlrmConfig cfg = checkpoint_config(meta, a.load);
  Dlrm<float> model(cfg, 0);
  load_checkpoint(a.load, model, nullptr);
  const RecordSet data = RecordSet::load(a.data_path);
  std::vector<float> scores;
  scores.reserve(data.size());
  auto score = [&](std::vector<float> z) {
    for (float x : z) scores.push_back(sigmoid(x));
    return z;
  };
  std::optional<EvalResult> r;
  const auto cuts = forward_cuts(meta, a.load);
  if (cuts) {
    const std::vector<DlrmStage> stages = plan_stages(cfg, cuts->splits);
    LaunchOptions lo;
    lo.ranks = static_cast<int>(stages.size());
    launch(lo, [&](Transport& t) {
      Dlrm<float> stage(cfg, 0, stages[static_cast<std::size_t>(t.rank())]);
      Optimizer<float> whole_opt({}, model), stage_opt({}, stage);  // SGD: no state; the pipeline wants one
      copy_stage(model, whole_opt, stage, stage_opt);
      Pipeline pipe(t, stage, stage_opt, 1, cuts->codec);
      auto rr = evaluate([&](const Batch& b) { return score(pipe.predict(b)); }, data, cfg, a.batch);
      if (rr) r = rr;  // the last stage's
    });
  } else {
    r = evaluate(
        [&](const Batch& b) {
          const auto z = model.forward(b);
          return score({z.begin(), z.end()});
        },
        data, cfg, a.batch);
  }
  write_scores(a.out, scores);
  fmt::print("model: {}{}\n", cfg.describe(),
             cuts ? fmt::format(", run as trained: --mp-codec {} at --mp-splits {}", cuts->codec.text, cuts->splits)
                  : "");
  if (r)
    fmt::print("{} samples of {}: loss {:.6f}, accuracy {:.3f} %, auc {:.6f}\n", scores.size(), a.data_path, r->loss,
               100 * r->accuracy, r->auc);
  fmt::print("scores: {}\n", a.out);
}

}  // namespace

void add_predict(CLI::App& app, Run& run) {
  auto a = std::make_shared<PredictArgs>();
  auto* c = app.add_subcommand("predict", "Click probabilities of a checkpoint's model for a data file");
  c->add_option("--load", a->load, "Checkpoint (sparq train --save, or sparq linear --save)")->required();
  c->add_option("--data-path", a->data_path, "Data file: TSV, sparq binary or the reference's .npz (libsvm for a linear model)")->required();
  c->add_option("--out", a->out, "Scores, one per line in data order")->required();
  c->add_option("--test-mini-batch-size,--test-batch", a->batch, "Samples per forward pass")->capture_default_str();
  c->add_option("--threads", a->threads, "Threads of the forward pass")->capture_default_str();
  c->callback([a, &run] { run = [a] { run_predict(*a); }; });
}

}  // namespace sparq::cli
