#include "sparq/data/criteo_npz.h"

#include "sparq/core/error.h"
#include "sparq/data/npz.h"

namespace sparq {

namespace {
// The array `name`, integer-typed, of shape (n, width) or (n,) when width is 0.
const NpyArray& get(const std::map<std::string, NpyArray>& arrays, const std::string& path, const char* name,
                    std::size_t width) {
  const auto it = arrays.find(name);
  SPARQ_CHECK_AS(InputError, it != arrays.end(),
                 "'{}': no array '{}' (the DLRM reference's layout has X_int [N x 13], X_cat [N x 26], y [N])", path,
                 name);
  const NpyArray& a = it->second;
  SPARQ_CHECK_AS(InputError, npy_is_integer(a.type()), "'{}', array '{}': {} values, integers expected", path, name,
                 npy_descr(a.type()));
  const auto& s = a.shape();
  const bool ok = width ? s.size() == 2 && s[1] == width : s.size() == 1;
  SPARQ_CHECK_AS(InputError, ok, "'{}', array '{}': shape {}, expected {}", path, name, npy_shape_text(s),
                 width ? fmt::format("(N, {})", width) : "(N,)");
  return a;
}
}  // namespace

std::vector<CriteoRecord> read_criteo_npz(const std::string& path) {
  const auto arrays = read_npz(path);
  const NpyArray& xi = get(arrays, path, "X_int", kCriteoDense);
  const NpyArray& xc = get(arrays, path, "X_cat", kCriteoSparse);
  const NpyArray& y = get(arrays, path, "y", 0);
  const std::uint64_t n = y.shape()[0];
  SPARQ_CHECK_AS(InputError, xi.shape()[0] == n && xc.shape()[0] == n,
                 "'{}': arrays of different lengths (X_int {}, X_cat {}, y {})", path, xi.shape()[0], xc.shape()[0], n);
  std::vector<CriteoRecord> recs(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    CriteoRecord& r = recs[i];
    const std::int64_t label = y.int_at(i);
    SPARQ_CHECK_AS(InputError, label == 0 || label == 1, "'{}', array 'y': label {} at row {} (0 or 1 expected)", path,
                   label, i);
    r.label = static_cast<float>(label);
    for (std::size_t f = 0; f < kCriteoDense; ++f) r.dense[f] = criteo_dense_transform(xi.int_at(i * kCriteoDense + f));
    for (std::size_t t = 0; t < kCriteoSparse; ++t) {
      const std::int64_t v = xc.int_at(i * kCriteoSparse + t);
      SPARQ_CHECK_AS(InputError, v >= 0 && v <= 0xFFFFFFFF,
                     "'{}', array 'X_cat': value {} at row {}, feature {} (dictionary indices are 0..2^32-1)", path,
                     xc.type() == NpyType::U64 ? fmt::format("{}", static_cast<std::uint64_t>(v)) : fmt::format("{}", v),
                     i, t);
      r.sparse[t] = static_cast<std::uint32_t>(v);
    }
  }
  return recs;
}

}  // namespace sparq
