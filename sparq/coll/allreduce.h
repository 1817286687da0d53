#pragma once
// Allreduce: every rank ends with the element-wise reduction of all ranks'
// inputs, bit-identical on every rank, and bitwise repeatable run to run.
#include <cstddef>
#include <span>
#include <string_view>

#include "sparq/coll/call.h"
#include "sparq/coll/reduce_op.h"

namespace sparq {

enum class AllreduceAlgo { Auto, Ring, RecursiveDoubling, Rabenseifner, Native };

std::string_view allreduce_algo_name(AllreduceAlgo a);
AllreduceAlgo parse_allreduce_algo(std::string_view s);  // throws InputError

// The `auto` rule (docs/algorithms.md, measurements in docs/results.md):
// one rank -> copy; up to `small_bytes` (or `small_bytes_folded` when P is not
// a power of two) -> recursive-doubling, the fewest rounds for latency-bound
// sizes; larger -> rabenseifner when P is a power of two, else ring (both
// send 2(P-1)/P of the data; rabenseifner in 2 log2 P rounds instead of
// 2(P-1), but for other P its fold costs a full extra message).
// Recursive doubling stays ahead longer for non-powers of two because there
// every alternative pays either the fold or ring's 2(P-1) rounds.
struct AutoRule {
  std::size_t small_bytes = 32 * 1024;
  std::size_t small_bytes_folded = 256 * 1024;
};

struct AllreduceOptions {
  AllreduceAlgo algo = AllreduceAlgo::Auto;
  ReduceOp op = ReduceOp::Sum;
  int tag = tags::kAllreduce;
  Millis timeout{0};                    // 0 = the transport's
  std::size_t segment_bytes = 1 << 20;  // ring pipelining granularity
  AutoRule auto_rule{};
};

// The algorithm `auto` picks for these sizes (or `opts.algo` if not auto).
AllreduceAlgo resolve_allreduce_algo(const AllreduceOptions& opts, std::size_t bytes, int nranks);

// Out-of-place (in and out of equal size, disjoint or identical: in-place).
template <class T>
CollStats allreduce(Transport& t, std::span<const T> in, std::span<T> out, const AllreduceOptions& opts = {});

template <class T>
CollStats allreduce(Transport& t, std::span<T> inout, const AllreduceOptions& opts = {}) {
  return allreduce(t, std::span<const T>(inout), inout, opts);
}

}  // namespace sparq
