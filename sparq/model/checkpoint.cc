#include "sparq/model/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sparq/core/error.h"

namespace sparq {

namespace {
constexpr char kMagic[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '1'};

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
  void floats(std::span<float> v, const char* what) {
    const std::uint64_t n = u64();
    SPARQ_CHECK_AS(InputError, n == v.size(), "'{}': {} has {} values, this model has {} (different configuration?)",
                   path, what, n, v.size());
    bytes(v.data(), n * sizeof(float));
  }
};
}  // namespace

void save_checkpoint(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt,
                     const std::string& meta) {
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
    SPARQ_CHECK_AS(InputError, std::fflush(f.get()) == 0, "write error on '{}'", tmp);
  }
  SPARQ_CHECK_AS(InputError, std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}", tmp, path,
                 std::strerror(errno));
}

namespace {
std::unique_ptr<std::FILE, Closer> open_checkpoint(const std::string& path) {
  std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "rb"));
  SPARQ_CHECK_AS(InputError, f != nullptr, "cannot open '{}': {}", path, std::strerror(errno));
  return f;
}

std::string read_meta(In& in) {
  char magic[8];
  in.bytes(magic, 8);
  SPARQ_CHECK_AS(InputError, std::memcmp(magic, kMagic, 8) == 0, "'{}' is not a sparq checkpoint", in.path);
  const std::uint64_t mlen = in.u64();
  SPARQ_CHECK_AS(InputError, mlen < (1u << 26), "'{}': corrupt checkpoint (metadata {} bytes)", in.path, mlen);
  std::string meta(mlen, '\0');
  in.bytes(meta.data(), mlen);
  return meta;
}
}  // namespace

std::string read_checkpoint_meta(const std::string& path) {
  const auto f = open_checkpoint(path);
  In in{f.get(), path};
  return read_meta(in);
}

std::string load_checkpoint(const std::string& path, Dlrm<float>& model, Optimizer<float>& opt) {
  const auto f = open_checkpoint(path);
  In in{f.get(), path};
  std::string meta = read_meta(in);
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
  const std::uint64_t ns = in.u64();
  SPARQ_CHECK_AS(InputError, ns == opt.state().size(),
                 "'{}': {} optimizer state vectors, this optimizer has {} (different --embedding-optimizer or --optimizer?)", path, ns,
                 opt.state().size());
  for (auto& s : opt.state()) in.floats(s, "optimizer state");
  return meta;
}

}  // namespace sparq
