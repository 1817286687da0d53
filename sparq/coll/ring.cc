// Ring reduce-scatter and allgather, pipelined in segments.
//
// Each ring step moves one chunk (1/P of the data) to the right neighbour.
// Chunks are cut into segments so that the reduction of segment k overlaps
// the transfer of segment k+1, and a reduced segment is forwarded at once.
// Bytes sent per rank: (P-1)/P * N per phase, 2(P-1)/P * N for allreduce.
#include <cstring>
#include <vector>

#include "sparq/coll/algorithms.h"
#include "sparq/coll/patterns.h"

namespace sparq::algo {

namespace {

// The segments [off, off+len) of one chunk.
template <class F>
void for_each_segment(std::size_t off, std::size_t len, std::size_t seg, F&& f) {
  for (std::size_t s = 0; s < len; s += seg) f(off + s, std::min(seg, len - s), s);
}

}  // namespace

template <class T>
void ring_reduce_scatter(Call& c, const T* in, T* work, std::size_t count, ReduceOp op, std::size_t seg) {
  const int p = c.size(), r = c.rank();
  if (p == 1) {
    if (work != in && count) std::memcpy(work, in, count * sizeof(T));
    return;
  }
  const pattern::Partition part{count, p};
  const int right = pattern::mod(r + 1, p), left = pattern::mod(r - 1, p);
  // Two landing buffers: step s+1's receives are posted into one while step
  // s's segments are reduced out of the other.
  std::vector<T> land[2] = {std::vector<T>(part.max_len()), std::vector<T>(part.max_len())};
  std::vector<Request> sends, recvs, next;

  auto post_recvs = [&](int step, std::vector<Request>& into) {
    into.clear();
    const int ch = pattern::ring_rs_recv_chunk(r, p, step);
    T* buf = land[step % 2].data();
    for_each_segment(0, part.len(ch), seg, [&](std::size_t, std::size_t len, std::size_t at) {
      into.push_back(c.irecv(left, std::span<T>(buf + at, len)));
    });
  };

  post_recvs(0, recvs);
  const int first = pattern::ring_rs_send_chunk(r, p, 0);
  for_each_segment(part.offset(first), part.len(first), seg, [&](std::size_t off, std::size_t len, std::size_t) {
    sends.push_back(c.isend(right, std::span<const T>(in + off, len)));
  });
  for (int s = 0; s + 1 < p; ++s) {
    const bool forward = s + 2 < p;  // the chunk reduced now is sent at step s+1
    if (forward) post_recvs(s + 1, next);
    const int ch = pattern::ring_rs_recv_chunk(r, p, s);
    const T* buf = land[s % 2].data();
    std::size_t k = 0;
    for_each_segment(part.offset(ch), part.len(ch), seg, [&](std::size_t off, std::size_t len, std::size_t at) {
      c.wait(recvs[k++]);
      reduce3(op, work + off, in + off, buf + at, len);
      if (forward) sends.push_back(c.isend(right, std::span<const T>(work + off, len)));
    });
    recvs.swap(next);
    c.count_round();
  }
  // The allgather that follows overwrites chunks sent here.
  c.wait_all(sends);
}

std::vector<std::size_t> partition_bounds(std::size_t count, int parts) {
  const pattern::Partition part{count, parts};
  std::vector<std::size_t> b(parts + 1);
  for (int i = 0; i <= parts; ++i) b[i] = part.offset(i);
  return b;
}

template <class T>
void ring_allgather(Call& c, T* work, std::span<const std::size_t> bounds, std::size_t seg,
                    const std::function<void(int)>& on_block) {
  const int p = c.size(), r = c.rank();
  if (p == 1) {
    if (on_block) on_block(0);
    return;
  }
  const int right = pattern::mod(r + 1, p), left = pattern::mod(r - 1, p);
  auto segments = [&](int ch, auto&& f) { for_each_segment(bounds[ch], bounds[ch + 1] - bounds[ch], seg, f); };
  // Every block lands in place, so all receives can be posted up front; a
  // received segment is forwarded as soon as it arrives.
  std::vector<std::vector<Request>> recvs(p - 1);
  for (int s = 0; s + 1 < p; ++s)
    segments(pattern::ring_ag_recv_chunk(r, p, s), [&](std::size_t off, std::size_t len, std::size_t) {
      recvs[s].push_back(c.irecv(left, std::span<T>(work + off, len)));
    });
  std::vector<Request> sends;
  segments(pattern::ring_ag_send_chunk(r, p, 0), [&](std::size_t off, std::size_t len, std::size_t) {
    sends.push_back(c.isend(right, std::span<const T>(work + off, len)));
  });
  if (on_block) on_block(pattern::ring_ag_send_chunk(r, p, 0));
  for (int s = 0; s + 1 < p; ++s) {
    std::size_t k = 0;
    const int ch = pattern::ring_ag_recv_chunk(r, p, s);
    segments(ch, [&](std::size_t off, std::size_t len, std::size_t) {
      c.wait(recvs[s][k++]);
      if (s + 2 < p) sends.push_back(c.isend(right, std::span<const T>(work + off, len)));
    });
    if (on_block) on_block(ch);
    c.count_round();
  }
  c.wait_all(sends);
}

#define X(T)                                                                                        \
  template void ring_reduce_scatter<T>(Call&, const T*, T*, std::size_t, ReduceOp, std::size_t); \
  template void ring_allgather<T>(Call&, T*, std::span<const std::size_t>, std::size_t,   \
                                  const std::function<void(int)>&);
SPARQ_FOR_EACH_DTYPE(X)
#undef X
// Byte blobs (quantized payloads) travel through the same allgather.
template void ring_allgather<std::byte>(Call&, std::byte*, std::span<const std::size_t>, std::size_t,
                                        const std::function<void(int)>&);

}  // namespace sparq::algo
