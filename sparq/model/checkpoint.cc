#include "sparq/model/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sparq/core/error.h"

namespace sparq {

namespace {
constexpr char kMagic[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '2'};
constexpr char kMagicV1[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '1'};  // no codec section

struct Closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

struct Out {
  std::FILE* f;
  const std::string& path;
  void bytes(const void* p, std::size_t n) {
    SPARQ_CHECK_AS(InputError, n == 0 || std::fwrite(p, 1, n, f) == n, "write error on '{}'", path);
  }
  void u64(std::uint64_t v) { bytes(&v, 8); }
  void floats(std::span<const float> v) {
    u64(v.size());
    bytes(v.data(), v.size() * sizeof(float));
  }
};

struct In {
  std::FILE* f;
  const std::string& path;
  void bytes(void* p, std::size_t n) {
    SPARQ_CHECK_AS(InputError, n == 0 || std::fread(p, 1, n, f) == n, "'{}': truncated checkpoint", path);
  }
  std::uint64_t u64() {
    std::uint64_t v;
    bytes(&v, 8);
    return v;
  }
  // A byte count read from the file, no more than what is left of it, so a
  // corrupt value is an error, not a huge allocation.
  std::uint64_t length(const char* what) {
    const std::uint64_t n = u64();
    const long at = std::ftell(f);
    SPARQ_CHECK_AS(InputError, std::fseek(f, 0, SEEK_END) == 0, "'{}': cannot seek", path);
    const long end = std::ftell(f);
    SPARQ_CHECK_AS(InputError, at >= 0 && end >= at && std::fseek(f, at, SEEK_SET) == 0, "'{}': cannot seek", path);
    SPARQ_CHECK_AS(InputError, n <= static_cast<std::uint64_t>(end - at), "'{}': truncated checkpoint ({} of {} bytes)",
                   path, what, n);
    return n;
  }
  void floats(std::span<float> v, const char* what) {
    const std::uint64_t n = u64();
    SPARQ_CHECK_AS(InputError, n == v.size(), "'{}': {} has {} values, this model has {} (different configuration?)",
                   path, what, n, v.size());
    bytes(v.data(), n * sizeof(float));
  }
};
}  // namespace

void save_checkpoint(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
                     std::span<const std::vector<std::byte>> rank_states) {
  const std::string tmp = path + ".tmp";
  {
    std::unique_ptr<std::FILE, Closer> f(std::fopen(tmp.c_str(), "wb"));
    SPARQ_CHECK_AS(InputError, f != nullptr, "cannot create '{}': {}", tmp, std::strerror(errno));
    Out o{f.get(), tmp};
    o.bytes(kMagic, 8);
    o.u64(meta.size());
    o.bytes(meta.data(), meta.size());
    o.floats(model.dense().params());
    o.u64(model.tables().size());
    for (const auto& t : model.tables()) {
      o.u64(t.rows());
      o.u64(t.dim());
      o.floats(t.weights());
    }
    o.u64(opt.state().size());
    for (const auto& s : opt.state()) o.floats(s);
    o.u64(rank_states.size());
    for (const auto& b : rank_states) {
      o.u64(b.size());
      o.bytes(b.data(), b.size());
    }
    SPARQ_CHECK_AS(InputError, std::fflush(f.get()) == 0, "write error on '{}'", tmp);
  }
  SPARQ_CHECK_AS(InputError, std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}", tmp, path,
                 std::strerror(errno));
}

namespace {
// Opens `path` and reads the magic and the metadata; `v1` tells the format.
std::string read_head(In& in, bool& v1) {
  char magic[8];
  in.bytes(magic, 8);
  v1 = std::memcmp(magic, kMagicV1, 8) == 0;
  SPARQ_CHECK_AS(InputError, v1 || std::memcmp(magic, kMagic, 8) == 0, "'{}' is not a sparq checkpoint", in.path);
  std::string meta(in.length("metadata"), '\0');
  in.bytes(meta.data(), meta.size());
  return meta;
}

std::unique_ptr<std::FILE, Closer> open_read(const std::string& path) {
  std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "rb"));
  SPARQ_CHECK_AS(InputError, f != nullptr, "cannot open '{}': {}", path, std::strerror(errno));
  return f;
}
}  // namespace

std::string load_checkpoint(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
                            std::vector<std::vector<std::byte>>* rank_states) {
  const auto f = open_read(path);
  In in{f.get(), path};
  bool v1 = false;
  std::string meta = read_head(in, v1);
  in.floats(model.dense().params(), "the dense buffer");
  const std::uint64_t nt = in.u64();
  SPARQ_CHECK_AS(InputError, nt == model.tables().size(), "'{}': {} tables, this model has {}", path, nt,
                 model.tables().size());
  for (auto& t : model.tables()) {
    const std::uint64_t rows = in.u64(), dim = in.u64();
    SPARQ_CHECK_AS(InputError, rows == t.rows() && dim == t.dim(), "'{}': table of {} x {}, this model has {} x {}",
                   path, rows, dim, t.rows(), t.dim());
    in.floats(t.weights(), "a table");
  }
  if (opt == nullptr) return meta;
  const std::uint64_t ns = in.u64();
  SPARQ_CHECK_AS(InputError, ns == opt->state().size(),
                 "'{}': {} optimizer state vectors, this optimizer has {} (different --embedding-optimizer?)", path, ns,
                 opt->state().size());
  for (auto& s : opt->state()) in.floats(s, "optimizer state");
  if (rank_states) rank_states->clear();
  if (v1) return meta;
  const std::uint64_t nr = in.u64();
  for (std::uint64_t r = 0; r < nr; ++r) {
    std::vector<std::byte> b(in.length("a rank's codec state"));
    in.bytes(b.data(), b.size());
    if (rank_states) rank_states->push_back(std::move(b));
  }
  return meta;
}

std::string read_checkpoint_meta(const std::string& path) {
  const auto f = open_read(path);
  In in{f.get(), path};
  bool v1 = false;
  return read_head(in, v1);
}

nlohmann::json checkpoint_config_json(const DlrmConfig& cfg) {
  auto join = [](const std::vector<std::size_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "-" : "") + std::to_string(v[i]);
    return s;
  };
  return {{"arch_sparse_feature_size", cfg.emb_dim},
          {"arch_mlp_bot", join(cfg.bot_mlp)},
          {"arch_mlp_top", join(cfg.top_mlp)},
          {"arch_embedding_size", join(cfg.table_rows)}};
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
