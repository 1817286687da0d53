#include "sparq/model/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "sparq/core/error.h"

namespace sparq {

namespace {
// '4', not '3': one flipped bit must not turn a checksummed file into an
// older, unchecked layout ('3' is one bit away from '2' and '1', '4' two).
constexpr char kMagic[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '4'};
constexpr char kMagicV2[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '2'};  // no CRC
constexpr char kMagicV1[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '1'};  // no CRC, no codec section
constexpr std::size_t kCrcBytes = 4;

struct Closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

struct Out {
  std::FILE* f;
  const std::string& path;
  std::uint32_t crc = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0));
  void bytes(const void* p, std::size_t n) {
    SPARQ_CHECK_AS(InputError, n == 0 || std::fwrite(p, 1, n, f) == n, "write error on '{}': {}", path,
                   std::strerror(errno));
    // Not with n == 0: crc32_z(crc, nullptr, 0) restarts at the initial value.
    if (n > 0) crc = static_cast<std::uint32_t>(crc32_z(crc, static_cast<const Bytef*>(p), n));
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
  std::uint64_t end;  // where the data ends (before the CRC)
  int version;        // 1, 2 or 4
  void bytes(void* p, std::size_t n) {
    SPARQ_CHECK_AS(InputError, n == 0 || std::fread(p, 1, n, f) == n, "'{}': truncated checkpoint", path);
  }
  std::uint64_t u64() {
    std::uint64_t v;
    bytes(&v, 8);
    return v;
  }
  std::uint64_t left() const {
    const long at = std::ftell(f);
    SPARQ_CHECK_AS(InputError, at >= 0 && static_cast<std::uint64_t>(at) <= end, "'{}': cannot seek", path);
    return end - static_cast<std::uint64_t>(at);
  }
  // A byte count read from the file, no more than what is left of it, so a
  // corrupt value is an error, not a huge allocation.
  std::uint64_t length(const char* what) {
    const std::uint64_t n = u64();
    SPARQ_CHECK_AS(InputError, n <= left(), "'{}': truncated checkpoint ({} of {} bytes)", path, what, n);
    return n;
  }
  void floats(std::span<float> v, const char* what) {
    const std::uint64_t n = u64();
    SPARQ_CHECK_AS(InputError, n == v.size(), "'{}': {} has {} values, this model has {} (different configuration?)",
                   path, what, n, v.size());
    bytes(v.data(), n * sizeof(float));
  }
  // Past `expected` values this model has no storage for.
  void skip_floats(std::uint64_t expected, const char* what) {
    const std::uint64_t n = u64();
    SPARQ_CHECK_AS(InputError, n == expected, "'{}': {} has {} values, this model has {} (different configuration?)",
                   path, what, n, expected);
    SPARQ_CHECK_AS(InputError,
                   n * sizeof(float) <= left() && std::fseek(f, static_cast<long>(n * sizeof(float)), SEEK_CUR) == 0,
                   "'{}': truncated checkpoint ({})", path, what);
  }
};

// Makes what was written to `f` durable before the rename publishes it.
void sync_file(std::FILE* f, const std::string& path) {
  SPARQ_CHECK_AS(InputError, std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0, "write error on '{}': {}", path,
                 std::strerror(errno));
}

// Makes the rename durable (the directory entry lives in the directory).
// Filesystems that cannot sync a directory (EINVAL) have nothing to sync.
void sync_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  // Built, not assigned: g++ 12 warns falsely (-Wrestrict) on `dir = "."`.
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  SPARQ_CHECK_AS(InputError, fd >= 0, "cannot open directory '{}': {}", dir, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  SPARQ_CHECK_AS(InputError, rc == 0 || err == EINVAL, "cannot sync directory '{}': {}", dir, std::strerror(err));
}

// What a checkpoint holds, whichever model wrote it.
struct Parts {
  std::span<const float> dense;
  std::vector<const EmbeddingBag<float>*> tables;
  std::vector<std::span<const float>> states;
  std::span<const std::vector<std::byte>> rank_states;
};

void write_checkpoint(const std::string& tmp, const Parts& parts, const std::string& meta) {
  std::FILE* raw = std::fopen(tmp.c_str(), "wb");
  SPARQ_CHECK_AS(InputError, raw != nullptr, "cannot create '{}': {}", tmp, std::strerror(errno));
  std::unique_ptr<std::FILE, Closer> f(raw);
  Out o{f.get(), tmp};
  o.bytes(kMagic, 8);
  o.u64(meta.size());
  o.bytes(meta.data(), meta.size());
  o.floats(parts.dense);
  o.u64(parts.tables.size());
  for (const auto* t : parts.tables) {
    o.u64(t->rows());
    o.u64(t->dim());
    o.floats(t->weights());
  }
  o.u64(parts.states.size());
  for (const auto& s : parts.states) o.floats(s);
  o.u64(parts.rank_states.size());
  for (const auto& b : parts.rank_states) {
    o.u64(b.size());
    o.bytes(b.data(), b.size());
  }
  const std::uint32_t crc = o.crc;
  o.bytes(&crc, kCrcBytes);
  sync_file(f.get(), tmp);
  // fclose can still report a failed write-back (ENOSPC, EIO, NFS).
  SPARQ_CHECK_AS(InputError, std::fclose(f.release()) == 0, "write error on '{}': {}", tmp, std::strerror(errno));
}

void save_parts(const std::string& path, const Parts& parts, const std::string& meta) {
  const std::string tmp = path + ".tmp";
  try {
    write_checkpoint(tmp, parts, meta);
  } catch (const Error&) {
    std::remove(tmp.c_str());  // half a file would take the space a full disk needs for the next save
    throw;
  }
  SPARQ_CHECK_AS(InputError, std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}", tmp, path,
                 std::strerror(errno));
  sync_dir(path);
}
}  // namespace

void save_checkpoint(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
                     std::span<const std::vector<std::byte>> rank_states) {
  Parts parts{model.dense().params(), {}, {}, rank_states};
  for (const auto& t : model.tables()) {
    SPARQ_CHECK(t.held(), "a checkpoint needs every table: gather them first");
    parts.tables.push_back(&t);
  }
  for (const auto& st : opt.state()) parts.states.push_back(st);
  save_parts(path, parts, meta);
}

void save_weights_checkpoint(const std::string& path, std::span<const float> weights, const std::string& meta) {
  save_parts(path, Parts{weights, {}, {}, {}}, meta);
}

namespace {
// Opens `path`, tells the layout from the magic and, for the checksummed
// one, checks the CRC of the whole file first (one sequential read).
std::unique_ptr<std::FILE, Closer> open_read(const std::string& path, In& in) {
  std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "rb"));
  SPARQ_CHECK_AS(InputError, f != nullptr, "cannot open '{}': {}", path, std::strerror(errno));
  char magic[8];
  SPARQ_CHECK_AS(InputError, std::fread(magic, 1, 8, f.get()) == 8, "'{}' is not a sparq checkpoint (too short)", path);
  in.version = std::memcmp(magic, kMagic, 8) == 0     ? 4
               : std::memcmp(magic, kMagicV2, 8) == 0 ? 2
               : std::memcmp(magic, kMagicV1, 8) == 0 ? 1
                                                      : 0;
  SPARQ_CHECK_AS(InputError, in.version != 0, "'{}' is not a sparq checkpoint", path);
  SPARQ_CHECK_AS(InputError, std::fseek(f.get(), 0, SEEK_END) == 0, "'{}': cannot seek", path);
  const long size = std::ftell(f.get());
  SPARQ_CHECK_AS(InputError, size >= 8, "'{}': cannot seek", path);
  in.end = static_cast<std::uint64_t>(size);
  if (in.version == 4) {
    SPARQ_CHECK_AS(InputError, in.end >= 8 + kCrcBytes, "'{}': truncated checkpoint", path);
    in.end -= kCrcBytes;
    std::rewind(f.get());
    std::uint32_t crc = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0)), stored = 0;
    std::vector<Bytef> buf(static_cast<std::size_t>(std::min<std::uint64_t>(in.end, std::uint64_t{1} << 20)));
    for (std::uint64_t left = in.end; left > 0;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
      SPARQ_CHECK_AS(InputError, std::fread(buf.data(), 1, n, f.get()) == n, "'{}': read error", path);
      crc = static_cast<std::uint32_t>(crc32_z(crc, buf.data(), n));
      left -= n;
    }
    SPARQ_CHECK_AS(InputError, std::fread(&stored, 1, kCrcBytes, f.get()) == kCrcBytes && stored == crc,
                   "'{}': checksum mismatch: the checkpoint is corrupt or truncated", path);
  }
  SPARQ_CHECK_AS(InputError, std::fseek(f.get(), 8, SEEK_SET) == 0, "'{}': cannot seek", path);
  return f;
}

std::string read_meta(In& in) {
  std::string meta(in.length("metadata"), '\0');
  in.bytes(meta.data(), meta.size());
  return meta;
}
}  // namespace

std::string load_checkpoint(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
                            std::vector<std::vector<std::byte>>* rank_states) {
  In in{nullptr, path, 0, 0};
  const auto f = open_read(path, in);
  in.f = f.get();
  std::string meta = read_meta(in);
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
  if (opt == nullptr) return meta;
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
  if (rank_states) rank_states->clear();
  if (in.version > 1) {
    const std::uint64_t nr = in.u64();
    for (std::uint64_t r = 0; r < nr; ++r) {
      std::vector<std::byte> b(in.length("a rank's codec state"));
      in.bytes(b.data(), b.size());
      if (rank_states) rank_states->push_back(std::move(b));
    }
  }
  SPARQ_CHECK_AS(InputError, in.left() == 0, "'{}': {} bytes after the end of the checkpoint", path, in.left());
  return meta;
}

std::string load_weights_checkpoint(const std::string& path, std::vector<float>& weights) {
  In in{nullptr, path, 0, 0};
  const auto f = open_read(path, in);
  in.f = f.get();
  std::string meta = read_meta(in);
  const std::uint64_t n = in.u64();
  SPARQ_CHECK_AS(InputError, n <= in.left() / sizeof(float), "'{}': truncated checkpoint ({} weights)", path, n);
  weights.resize(n);
  in.bytes(weights.data(), n * sizeof(float));
  SPARQ_CHECK_AS(InputError, in.version == 4 && in.u64() == 0 && in.u64() == 0 && in.u64() == 0 && in.left() == 0,
                 "'{}' holds more than one weight vector (a DLRM checkpoint?)", path);
  return meta;
}

std::string read_checkpoint_meta(const std::string& path) {
  In in{nullptr, path, 0, 0};
  const auto f = open_read(path, in);
  in.f = f.get();
  return read_meta(in);
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
