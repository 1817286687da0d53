#include "sparq/coll/allgather.h"

#include <algorithm>
#include <vector>

#include "sparq/coll/algorithms.h"

namespace sparq {

template <class T>
CollStats allgatherv(Transport& t, std::span<const T> mine, std::span<T> out, std::span<const std::size_t> counts,
                     const AllgatherOptions& opts) {
  const int p = t.size(), r = t.rank();
  SPARQ_CHECK_AS(InputError, counts.size() == static_cast<std::size_t>(p), "allgatherv: {} counts for {} ranks",
                 counts.size(), p);
  std::vector<std::size_t> bounds(p + 1, 0);
  for (int i = 0; i < p; ++i) bounds[i + 1] = bounds[i] + counts[i];
  SPARQ_CHECK_AS(InputError, mine.size() == counts[r], "allgatherv: rank {} gives {} elements, counts say {}", r,
                 mine.size(), counts[r]);
  SPARQ_CHECK_AS(InputError, out.size() == bounds[p], "allgatherv: output has {} elements, counts sum to {}",
                 out.size(), bounds[p]);
  SPARQ_CHECK_AS(InputError, opts.segment_bytes >= sizeof(T), "allgatherv: segment below one element");
  Call c(t, "allgather/ring", opts.tag, opts.timeout);
  T* own = out.data() + bounds[r];
  if (mine.data() != own) std::copy(mine.begin(), mine.end(), own);  // else in place
  algo::ring_allgather(c, out.data(), std::span<const std::size_t>(bounds), opts.segment_bytes / sizeof(T));
  return c.finish("ring");
}

template <class T>
CollStats allgather(Transport& t, std::span<const T> mine, std::span<T> out, const AllgatherOptions& opts) {
  const std::vector<std::size_t> counts(t.size(), mine.size());
  return allgatherv(t, mine, out, std::span<const std::size_t>(counts), opts);
}

#define X(T)                                                                                                \
  template CollStats allgatherv<T>(Transport&, std::span<const T>, std::span<T>, std::span<const std::size_t>, \
                                   const AllgatherOptions&);                                                 \
  template CollStats allgather<T>(Transport&, std::span<const T>, std::span<T>, const AllgatherOptions&);
SPARQ_FOR_EACH_DTYPE(X)
#undef X

}  // namespace sparq
