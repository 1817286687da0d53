#pragma once
// Peer and offset arithmetic of the collective patterns, as pure functions
// (tested without any communication). Chunk/rank indices are taken mod P.
#include <cstddef>
#include <utility>

namespace sparq::pattern {

// Splits `count` elements into `parts` contiguous chunks; the first
// count % parts chunks get one element more.
struct Partition {
  std::size_t count;
  int parts;
  std::size_t len(int i) const { return count / parts + (static_cast<std::size_t>(i) < count % parts ? 1 : 0); }
  std::size_t offset(int i) const {
    const std::size_t base = count / parts, extra = count % parts, ii = static_cast<std::size_t>(i);
    return ii * base + (ii < extra ? ii : extra);
  }
  std::size_t max_len() const { return count / parts + (count % parts ? 1 : 0); }
};

constexpr int mod(int a, int p) { return ((a % p) + p) % p; }

// Ring reduce-scatter, steps s = 0..P-2: rank r sends chunk r-s-1 to r+1 and
// receives chunk r-s-2 from r-1; after P-1 steps it holds reduced chunk r.
//
//   P=3     step 0        step 1
//   rank 0  send 2 recv 1 send 1 recv 0
//   rank 1  send 0 recv 2 send 2 recv 1
//   rank 2  send 1 recv 0 send 0 recv 2
constexpr int ring_rs_send_chunk(int r, int p, int s) { return mod(r - s - 1, p); }
constexpr int ring_rs_recv_chunk(int r, int p, int s) { return mod(r - s - 2, p); }
// Ring allgather, steps s = 0..P-2, starting from chunk r: send chunk r-s,
// receive chunk r-s-1.
constexpr int ring_ag_send_chunk(int r, int p, int s) { return mod(r - s, p); }
constexpr int ring_ag_recv_chunk(int r, int p, int s) { return mod(r - s - 1, p); }

// Folding a non-power-of-two rank count onto pof2 = the largest power of two
// <= P: the first 2*rem ranks (rem = P - pof2) pair up, even ranks hand their
// data to the odd neighbour and sit out; the odd ones and all ranks >= 2*rem
// form a power-of-two group with new ranks 0..pof2-1.
struct Fold {
  int p, pof2, rem;
  explicit Fold(int nranks);
  // New rank in the power-of-two group, or -1 for a rank that sits out.
  int new_rank(int r) const { return r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem; }
  int real_rank(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
};

// Recursive-halving window of blocks [lo, hi) of a power-of-two group. At
// each step (mask = pof2/2, ..., 1) a rank keeps the half of its window on
// its side of `mask` and sends the other half to new rank ^ mask. After the
// last step the window is [new_rank, new_rank+1).
struct Window {
  int lo, hi;
  bool operator==(const Window&) const = default;
};
// {kept, sent} halves of `w` for new rank `nr` at `mask`.
std::pair<Window, Window> halve(Window w, int nr, int mask);
// Recursive-doubling allgather step: the window of new rank `nr`'s partner
// (nr ^ mask), which is the sibling of `w` in the halving tree.
Window sibling(Window w, int nr, int mask);

}  // namespace sparq::pattern
