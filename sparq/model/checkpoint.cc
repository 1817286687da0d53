#include "sparq/model/checkpoint.h"

#include "sparq/core/error.h"
#include "sparq/model/checkpoint_delta.h"
#include "sparq/model/checkpoint_io.h"

namespace sparq {

using namespace ckpt;

namespace {
struct TableView {
  std::uint64_t rows, dim;
  std::span<const float> weights;
};

// What a whole checkpoint holds, whichever model or snapshot it comes from.
struct Parts {
  std::span<const float> dense;
  std::vector<TableView> tables;
  std::vector<std::span<const float>> states;
  std::span<const std::vector<std::byte>> rank_states;
};

void put_whole(Out& o, const Parts& parts, const std::string& meta) {
  put_header(o, kMagic, {.prev = "", .prev_crc = 0, .meta = meta});
  o.floats(parts.dense);
  o.u64(parts.tables.size());
  for (const auto& t : parts.tables) {
    o.u64(t.rows);
    o.u64(t.dim);
    o.floats(t.weights);
  }
  o.u64(parts.states.size());
  for (const auto& s : parts.states) o.floats(s);
  put_rank_states(o, parts.rank_states);
  o.trailer();
}
}  // namespace

void save_checkpoint(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
                     std::span<const std::vector<std::byte>> rank_states) {
  Parts parts{model.dense().params(), {}, {}, rank_states};
  for (const auto& t : model.tables()) {
    SPARQ_CHECK(t.held(), "a checkpoint needs every table: gather them first");
    parts.tables.push_back({t.rows(), t.dim(), t.weights()});
  }
  for (const auto& st : opt.state()) parts.states.push_back(st);
  write_atomic(path, [&](Out& o) { put_whole(o, parts, meta); });
}

Written save_checkpoint(const std::string& path, const CheckpointSnapshot& s) {
  Parts parts{s.dense, {}, {}, s.rank_states};
  for (const auto& t : s.tables) parts.tables.push_back({t.rows, t.dim, t.weights()});
  for (const auto& st : s.states) parts.states.push_back(st);
  return write_atomic(path, [&](Out& o) { put_whole(o, parts, s.meta); });
}

void save_weights_checkpoint(const std::string& path, std::span<const float> weights, const std::string& meta) {
  write_atomic(path, [&](Out& o) { put_whole(o, Parts{weights, {}, {}, {}}, meta); });
}

namespace {
// A whole checkpoint's sections after the metadata, into `model` (the tables
// it holds) and `opt` (unless null).
void load_whole(In& in, Dlrm<float>& model, Optimizer<float>* opt, std::vector<std::vector<std::byte>>* rank_states) {
  const std::string& path = in.path;
  in.floats(model.dense().params(), "the dense buffer");
  const std::uint64_t nt = in.u64();
  SPARQ_CHECK_AS(InputError, nt == model.tables().size(), "'{}': {} tables, this model has {}", path, nt,
                 model.tables().size());
  for (auto& t : model.tables()) {
    const std::uint64_t rows = in.u64(), dim = in.u64();
    SPARQ_CHECK_AS(InputError, rows == t.rows() && dim == t.dim(), "'{}': table of {} x {}, this model has {} x {}",
                   path, rows, dim, t.rows(), t.dim());
    if (t.held())
      in.floats(t.weights(), "a table");
    else
      in.skip_floats(rows * dim, "a table");
  }
  if (opt == nullptr) return;
  const std::uint64_t ns = in.u64();
  SPARQ_CHECK_AS(InputError, ns == opt->state().size(),
                 "'{}': {} optimizer state vectors, this optimizer has {} (different --embedding-optimizer or --optimizer?)", path, ns,
                 opt->state().size());
  for (std::size_t i = 0; i < ns; ++i) {
    const bool table_state = i < opt->table_state().size();
    if (table_state && !model.tables()[i].held())
      in.skip_floats(model.tables()[i].rows(), "optimizer state");
    else
      in.floats(opt->state()[i], "optimizer state");
  }
  if (in.layout != Layout::V1)
    read_rank_states(in, rank_states);
  else if (rank_states)
    rank_states->clear();
  SPARQ_CHECK_AS(InputError, in.left() == 0, "'{}': {} bytes after the end of the checkpoint", path, in.left());
}
}  // namespace

std::string load_checkpoint(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
                            std::vector<std::vector<std::byte>>* rank_states) {
  const std::vector<std::string> chain = checkpoint_chain(path);
  In in(chain.back());
  const File f = open_read(in);
  std::string meta = read_header(in).meta;
  load_whole(in, model, opt, rank_states);
  for (auto link = chain.rbegin() + 1; link != chain.rend(); ++link) meta = load_delta(*link, model, opt, rank_states);
  return meta;
}

std::string load_weights_checkpoint(const std::string& path, std::vector<float>& weights) {
  In in(path);
  const File f = open_read(in);
  SPARQ_CHECK_AS(InputError, in.layout != Layout::Delta, "'{}' is a DLRM checkpoint's delta, not a linear model", path);
  std::string meta = read_header(in).meta;
  const std::uint64_t n = in.u64();
  SPARQ_CHECK_AS(InputError, n <= in.left() / sizeof(float), "'{}': truncated checkpoint ({} weights)", path, n);
  weights.resize(n);
  in.bytes(weights.data(), n * sizeof(float));
  SPARQ_CHECK_AS(InputError,
                 in.layout == Layout::V4 && in.u64() == 0 && in.u64() == 0 && in.u64() == 0 && in.left() == 0,
                 "'{}' holds more than one weight vector (a DLRM checkpoint?)", path);
  return meta;
}

std::string read_checkpoint_meta(const std::string& path) {
  In in(path);
  const File f = open_read(in);
  return read_header(in).meta;
}

nlohmann::json checkpoint_config_json(const DlrmConfig& cfg) {
  return {{"arch_sparse_feature_size", cfg.emb_dim},
          {"arch_mlp_bot", join_dash_list(cfg.bot_mlp)},
          {"arch_mlp_top", join_dash_list(cfg.top_mlp)},
          {"arch_embedding_size", join_dash_list(cfg.table_rows)}};
}

DlrmConfig checkpoint_config(const std::string& meta, const std::string& path) {
  const auto j = nlohmann::json::parse(meta, nullptr, false);
  SPARQ_CHECK_AS(InputError, !j.is_discarded() && j.is_object() && j.contains("config") && j["config"].is_object(),
                 "'{}': checkpoint without a model configuration (saved by an older sparq?)", path);
  const auto& c = j["config"];
  for (const char* k : {"arch_sparse_feature_size", "arch_mlp_bot", "arch_mlp_top", "arch_embedding_size"})
    SPARQ_CHECK_AS(InputError, c.contains(k), "'{}': checkpoint configuration without {}", path, k);
  SPARQ_CHECK_AS(InputError, c["arch_sparse_feature_size"].is_number_unsigned() && c["arch_mlp_bot"].is_string() &&
                                 c["arch_mlp_top"].is_string() && c["arch_embedding_size"].is_string(),
                 "'{}': malformed checkpoint configuration", path);
  DlrmConfig cfg;
  cfg.emb_dim = c["arch_sparse_feature_size"];
  cfg.bot_mlp = parse_dash_list(c["arch_mlp_bot"]);
  cfg.top_mlp = parse_dash_list(c["arch_mlp_top"]);
  cfg.table_rows = parse_dash_list(c["arch_embedding_size"]);
  cfg.validate();
  return cfg;
}

}  // namespace sparq
