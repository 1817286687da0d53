#include "sparq/coll/reduce_scatter.h"

#include <algorithm>
#include <vector>

#include "sparq/coll/algorithms.h"
#include "sparq/coll/patterns.h"

namespace sparq {

std::size_t reduce_scatter_block_len(std::size_t count, int nranks, int r) {
  return pattern::Partition{count, nranks}.len(r);
}

template <class T>
CollStats reduce_scatter(Transport& t, std::span<const T> in, std::span<T> out, const ReduceScatterOptions& opts) {
  const pattern::Partition part{in.size(), t.size()};
  SPARQ_CHECK_AS(InputError, out.size() == part.len(t.rank()),
                 "reduce_scatter: rank {} output has {} elements, its block of {} has {}", t.rank(), out.size(),
                 in.size(), part.len(t.rank()));
  SPARQ_CHECK_AS(InputError, opts.segment_bytes >= sizeof(T), "reduce_scatter: segment below one element");
  Call c(t, "reduce_scatter/ring", opts.tag, opts.timeout);
  std::vector<T> work(in.size());
  algo::ring_reduce_scatter(c, in.data(), work.data(), in.size(), opts.op, opts.segment_bytes / sizeof(T));
  const auto first = work.begin() + static_cast<std::ptrdiff_t>(part.offset(t.rank()));
  std::copy(first, first + static_cast<std::ptrdiff_t>(out.size()), out.begin());
  return c.finish("ring");
}

#define X(T) \
  template CollStats reduce_scatter<T>(Transport&, std::span<const T>, std::span<T>, const ReduceScatterOptions&);
SPARQ_FOR_EACH_DTYPE(X)
#undef X

}  // namespace sparq
