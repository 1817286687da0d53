// Rabenseifner's allreduce: recursive-halving reduce-scatter, then
// recursive-doubling allgather, over the power-of-two group left after
// folding (pattern::Fold, as in recursive doubling).
//
// The data is split into pof2 blocks. Halving step with mask = pof2/2..1: a
// rank keeps half of its block window, sends the other half to new_rank ^ mask
// and reduces the partner's copy of the kept half into it. After log2(pof2)
// steps, new rank i holds reduced block i; the doubling steps (mask = 1..pof2/2)
// exchange windows back until every rank has everything.
// Rounds: 2 log2(pof2) (+2 when folded). Bytes sent per rank:
// 2 (pof2-1)/pof2 * N (+N on folded ranks).
#include <cstring>
#include <vector>

#include "sparq/coll/algorithms.h"
#include "sparq/coll/patterns.h"

namespace sparq::algo {

template <class T>
void rabenseifner(Call& c, const T* in, T* out, std::size_t count, ReduceOp op) {
  const pattern::Fold fold(c.size());
  const int nr = fold.new_rank(c.rank());
  const pattern::Partition blocks{count, fold.pof2};
  auto off = [&](pattern::Window w) { return blocks.offset(w.lo); };
  auto len = [&](pattern::Window w) { return blocks.offset(w.hi) - blocks.offset(w.lo); };
  const T* src = fold_in(c, in, out, count, op);  // where this rank's partial result lives
  if (nr >= 0) {
    // The first kept half is the largest (leading blocks hold the remainder).
    std::vector<T> tmp(fold.pof2 > 1 ? blocks.offset(fold.pof2 / 2) : 0);
    pattern::Window w{0, fold.pof2};
    for (int mask = fold.pof2 / 2; mask >= 1; mask >>= 1) {
      const auto [keep, give] = pattern::halve(w, nr, mask);
      const int peer = fold.real_rank(nr ^ mask);
      c.sendrecv(peer, std::span<const T>(src + off(give), len(give)), peer, std::span<T>(tmp.data(), len(keep)));
      reduce3(op, out + off(keep), src + off(keep), tmp.data(), len(keep));
      src = out;
      w = keep;
    }
    if (src == in && out != in && count) std::memcpy(out, in, count * sizeof(T));  // P == 1
    for (int mask = 1; mask < fold.pof2; mask <<= 1) {
      const pattern::Window other = pattern::sibling(w, nr, mask);
      const int peer = fold.real_rank(nr ^ mask);
      c.sendrecv(peer, std::span<const T>(out + off(w), len(w)), peer, std::span<T>(out + off(other), len(other)));
      w = {std::min(w.lo, other.lo), std::max(w.hi, other.hi)};
    }
  }
  fold_out(c, out, count);
}

#define X(T) template void rabenseifner<T>(Call&, const T*, T*, std::size_t, ReduceOp);
SPARQ_FOR_EACH_DTYPE(X)
#undef X

}  // namespace sparq::algo
