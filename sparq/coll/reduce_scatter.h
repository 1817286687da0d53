#pragma once
// Reduce-scatter: rank r receives block r of the reduction, where blocks are
// pattern::Partition{count, P} (sizes differ by at most one element; the
// first count % P blocks are the longer ones). Ring algorithm, pipelined.
#include <span>

#include "sparq/coll/call.h"
#include "sparq/coll/reduce_op.h"

namespace sparq {

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::Sum;
  int tag = tags::kReduceScatter;
  Millis timeout{0};
  std::size_t segment_bytes = 1 << 20;
};

// Length of rank r's block of `count` elements over `nranks` ranks.
std::size_t reduce_scatter_block_len(std::size_t count, int nranks, int r);

// `out` must have reduce_scatter_block_len(in.size(), P, rank) elements.
// Uses a scratch buffer of in.size() elements. In place: `out` may be this
// rank's block inside `in`.
template <class T>
CollStats reduce_scatter(Transport& t, std::span<const T> in, std::span<T> out,
                         const ReduceScatterOptions& opts = {});

}  // namespace sparq
