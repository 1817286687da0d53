// Recursive-doubling allreduce for any rank count.
//
// Non-power-of-two P is folded first (pattern::Fold): each even rank among the
// first 2*rem hands its vector to its odd neighbour, the pof2 remaining ranks
// exchange whole vectors with partner new_rank ^ mask for mask = 1, 2, ...,
// pof2/2, and finally the odd ranks hand the result back.
// Rounds: log2(pof2) (+2 when P is not a power of two). Bytes sent per rank:
// N * log2(pof2) (+N on folded ranks).
#include <cstring>
#include <vector>

#include "sparq/coll/algorithms.h"
#include "sparq/coll/patterns.h"

namespace sparq::algo {

template <class T>
const T* fold_in(Call& c, const T* in, T* out, std::size_t count, ReduceOp op) {
  const int r = c.rank();
  const pattern::Fold fold(c.size());
  if (r >= 2 * fold.rem) return in;
  if (fold.new_rank(r) < 0) {
    Request s = c.isend(r + 1, std::span<const T>(in, count));
    c.wait(s);
  } else {
    std::vector<T> tmp(count);
    Request q = c.irecv(r - 1, std::span<T>(tmp));
    c.wait(q);
    reduce3(op, out, in, tmp.data(), count);
  }
  c.count_round();
  return fold.new_rank(r) < 0 ? in : out;
}

template <class T>
void fold_out(Call& c, T* out, std::size_t count) {
  const int r = c.rank();
  const pattern::Fold fold(c.size());
  if (r >= 2 * fold.rem) return;
  if (fold.new_rank(r) < 0) {
    Request q = c.irecv(r + 1, std::span<T>(out, count));
    c.wait(q);
  } else {
    Request s = c.isend(r - 1, std::span<const T>(out, count));
    c.wait(s);
  }
  c.count_round();
}

template <class T>
void recursive_doubling(Call& c, const T* in, T* out, std::size_t count, ReduceOp op) {
  const pattern::Fold fold(c.size());
  const int nr = fold.new_rank(c.rank());
  const T* src = fold_in(c, in, out, count, op);  // where this rank's partial result lives
  if (nr >= 0) {
    std::vector<T> tmp(count);
    for (int mask = 1; mask < fold.pof2; mask <<= 1) {
      const int peer = fold.real_rank(nr ^ mask);
      c.sendrecv(peer, std::span<const T>(src, count), peer, std::span<T>(tmp));
      reduce3(op, out, src, tmp.data(), count);
      src = out;
    }
    if (src == in && out != in && count) std::memcpy(out, in, count * sizeof(T));  // P == 1
  }
  fold_out(c, out, count);
}

#define X(T)                                                                        \
  template const T* fold_in<T>(Call&, const T*, T*, std::size_t, ReduceOp);         \
  template void fold_out<T>(Call&, T*, std::size_t);                                \
  template void recursive_doubling<T>(Call&, const T*, T*, std::size_t, ReduceOp);
SPARQ_FOR_EACH_DTYPE(X)
#undef X

}  // namespace sparq::algo
