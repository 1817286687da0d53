#pragma once
// Internal: the allreduce-family algorithms, on a Call. `in` and `out` have
// `count` elements and may be the same buffer. Each leaves the full result
// in `out` (ring_reduce_scatter: only chunk `rank` of the partition).
#include <functional>
#include <vector>

#include "sparq/coll/call.h"
#include "sparq/coll/reduce_op.h"

namespace sparq::algo {

template <class T>
void ring_reduce_scatter(Call& c, const T* in, T* work, std::size_t count, ReduceOp op, std::size_t seg_elems);
// Block i of `work` is [bounds[i], bounds[i+1]); rank r holds block r.
// `on_block(i)`, if given, runs as soon as block i is complete here (block r
// first), while later blocks are still on the wire.
template <class T>
void ring_allgather(Call& c, T* work, std::span<const std::size_t> bounds, std::size_t seg_elems,
                    const std::function<void(int)>& on_block = {});
// bounds (P+1 prefix offsets) of a Partition of `count` into P chunks.
std::vector<std::size_t> partition_bounds(std::size_t count, int parts);
template <class T>
void recursive_doubling(Call& c, const T* in, T* out, std::size_t count, ReduceOp op);
template <class T>
void rabenseifner(Call& c, const T* in, T* out, std::size_t count, ReduceOp op);
// The fold of a non-power-of-two rank count (pattern::Fold) shared by
// recursive doubling and Rabenseifner. fold_in returns where this rank's
// partial result now lives (`in`, or `out` after absorbing a neighbour);
// fold_out hands the final `out` back to the ranks that sat out.
template <class T>
const T* fold_in(Call& c, const T* in, T* out, std::size_t count, ReduceOp op);
template <class T>
void fold_out(Call& c, T* out, std::size_t count);

template <class T>
void native_allreduce(Transport& t, const T* in, T* out, std::size_t count, ReduceOp op);

}  // namespace sparq::algo

// Explicit instantiation for every element type the collectives support.
#define SPARQ_FOR_EACH_DTYPE(X) X(float) X(double) X(std::int32_t) X(std::int64_t)
