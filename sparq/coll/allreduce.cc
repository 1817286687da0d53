#include "sparq/coll/allreduce.h"

#include <cstring>

#include "sparq/coll/algorithms.h"

namespace sparq {

std::string_view allreduce_algo_name(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::Auto: return "auto";
    case AllreduceAlgo::Ring: return "ring";
    case AllreduceAlgo::RecursiveDoubling: return "recursive-doubling";
    case AllreduceAlgo::Rabenseifner: return "rabenseifner";
    case AllreduceAlgo::Native: return "native";
  }
  return "?";
}

AllreduceAlgo parse_allreduce_algo(std::string_view s) {
  for (AllreduceAlgo a : {AllreduceAlgo::Auto, AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling,
                          AllreduceAlgo::Rabenseifner, AllreduceAlgo::Native})
    if (s == allreduce_algo_name(a)) return a;
  SPARQ_THROW(InputError, "unknown allreduce algorithm '{}' (auto, ring, recursive-doubling, rabenseifner, native)",
              s);
}

AllreduceAlgo resolve_allreduce_algo(const AllreduceOptions& opts, std::size_t bytes, int nranks) {
  if (opts.algo != AllreduceAlgo::Auto) return opts.algo;
  const bool pow2 = (nranks & (nranks - 1)) == 0;
  if (bytes <= (pow2 ? opts.auto_rule.small_bytes : opts.auto_rule.small_bytes_folded))
    return AllreduceAlgo::RecursiveDoubling;
  return pow2 ? AllreduceAlgo::Rabenseifner : AllreduceAlgo::Ring;
}

template <class T>
CollStats allreduce(Transport& t, std::span<const T> in, std::span<T> out, const AllreduceOptions& opts) {
  SPARQ_CHECK_AS(InputError, in.size() == out.size(), "allreduce: input has {} elements, output {}", in.size(),
                 out.size());
  SPARQ_CHECK_AS(InputError,
                 in.data() == out.data() || in.empty() || in.data() + in.size() <= out.data() ||
                     out.data() + out.size() <= in.data(),
                 "allreduce: input and output overlap without being the same buffer");
  SPARQ_CHECK_AS(InputError, opts.segment_bytes >= sizeof(T), "allreduce: segment of {} bytes is below one element",
                 opts.segment_bytes);
  const std::size_t n = in.size();
  const AllreduceAlgo a = resolve_allreduce_algo(opts, n * sizeof(T), t.size());
  const std::string name(allreduce_algo_name(a));
  Call c(t, "allreduce/" + name, opts.tag, opts.timeout);
  switch (a) {
    case AllreduceAlgo::Ring: {
      const std::size_t seg = opts.segment_bytes / sizeof(T);
      algo::ring_reduce_scatter(c, in.data(), out.data(), n, opts.op, seg);
      algo::ring_allgather(c, out.data(), std::span<const std::size_t>(algo::partition_bounds(n, t.size())), seg);
      break;
    }
    case AllreduceAlgo::RecursiveDoubling: algo::recursive_doubling(c, in.data(), out.data(), n, opts.op); break;
    case AllreduceAlgo::Rabenseifner: algo::rabenseifner(c, in.data(), out.data(), n, opts.op); break;
    case AllreduceAlgo::Native: {
      algo::native_allreduce(t, in.data(), out.data(), n, opts.op);
      CollStats s = c.finish(name);
      s.counted = false;
      return s;
    }
    case AllreduceAlgo::Auto: break;
  }
  return c.finish(name);
}

#define X(T) template CollStats allreduce<T>(Transport&, std::span<const T>, std::span<T>, const AllreduceOptions&);
SPARQ_FOR_EACH_DTYPE(X)
#undef X

}  // namespace sparq
