#pragma once
// Quantized collectives (Yang et al., DLP-KDD'20): every hop encodes what it
// sends with a Codec and the receiver decodes it, so the numerics are those
// of a real quantized network, and the bytes are what the counters show.
//
// Error compensation (Codec::error_comp): every time a rank puts values of
// positions S on the wire it sends enc(v + E[S]) and keeps E[S] := (v + E[S])
// - dec(enc(v + E[S])) (Algorithm 1, DQE, at each hop), so the error of
// one call is fed into the next call of the same tensor. The residuals live
// in an ErrorFeedbackStore under the tensor's name (one N-float buffer per
// tensor and algorithm), so they persist across calls and survive re-bucketing.
// That is sparq's default; Yang et al.'s Algorithm 2 leaves the ring's first
// hop of every chunk uncompensated (it sends DQ(T)), which the codec spelling
// "+ec-skip-first" (Codec::ec_first_hop = false) selects. Their Algorithms
// 3-5 place DQE elsewhere too (docs/algorithms.md): recursive doubling here
// compensates every encode.
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/coll/call.h"
#include "sparq/coll/codec.h"
#include "sparq/coll/patterns.h"
#include "sparq/compress/error_feedback.h"

namespace sparq {

enum class QuantAlgo { Ring, RecursiveDoubling };
std::string_view quant_algo_name(QuantAlgo a);
QuantAlgo parse_quant_algo(std::string_view s);  // "ring", "recursive-doubling"

struct QuantizedAllreduceOptions {
  QuantAlgo algo = QuantAlgo::Ring;
  Codec codec{};
  // Residuals for error compensation (required when codec.error_comp), and
  // the tensor's stable name they are kept under.
  compress::ErrorFeedbackStore* residuals = nullptr;
  std::string tensor = "tensor";
  std::uint64_t step = 0;  // QSGD randomness key (with the tensor name)
  int tag = tags::kQuantizedAllreduce;
  Millis timeout{0};
  int group = 8;  // recursive-doubling: ranks per fully connected group
  std::size_t segment = std::size_t{1} << 18;  // ring: values per pipelined segment (whole rows)
};

// In-place sum of `data` over all ranks; identical on every rank.
//  ring: reduce-scatter where every hop sends enc(partial sum), then an
//    allgather that forwards each owner's one encoding unchanged
//    (Algorithm 2): each element is quantized P times on its way, once by
//    every rank, so its error is at most P * s/2 (s: the row's step).
//  recursive-doubling (Algorithms 3-5): inside groups of G = min(group, P)
//    ranks each rank reduces its 1/G part (an alltoall of encoded parts);
//    ranks holding the same part in the P/G groups reduce it by recursive
//    halving pairs (the keeper of each pair gathers both halves), the last
//    keeper broadcasts one encoding of the part, and the group shares the
//    parts. Needs P/G to be a power of two.
CollStats quantized_allreduce(Transport& t, std::span<float> data, const QuantizedAllreduceOptions& opts);

// The quantized ring's layout: chunk j of a Partition of n values over P
// ranks, its encoding at bytes [byte(j), byte(j + 1)) of the wire buffer,
// and the segments (whole rows, at most `segment` values; QSGD one per
// chunk) each hop sends as a message of its own.
struct QuantizedRingLayout {
  QuantizedRingLayout(const Codec& codec, std::size_t n, int p, std::size_t segment = std::size_t{1} << 18);
  std::size_t value(int j) const { return part.offset(j); }
  std::size_t values(int j) const { return part.len(j); }
  std::size_t byte(int j) const { return bytes[static_cast<std::size_t>(j)]; }
  std::size_t segments(int j) const { return (part.len(j) + seg - 1) / seg; }
  // Segment k of chunk j: its values' length, and its bytes' offset and size
  // inside the chunk's encoding.
  std::size_t seg_len(int j, std::size_t k) const { return std::min(seg, part.len(j) - k * seg); }
  std::size_t seg_byte(std::size_t k) const { return codec.bytes(k * seg); }
  std::size_t seg_bytes(int j, std::size_t k) const { return codec.bytes(seg_len(j, k)); }

  Codec codec;
  pattern::Partition part;
  std::vector<std::size_t> bytes;  // P + 1 offsets
  std::size_t seg;
};

// The ring's messages for encodings made elsewhere (a GPU rank's kernels,
// sparq.torch): quantized_allreduce's ring sends exactly these, in this
// order, so ranks of both kinds mix in one allreduce. With r's chunks from
// pattern::ring_rs_*: the first hop sends chunk ring_rs_send_chunk(r, P, 0)
// (the rank's own values, encoded) and receives chunk ring_rs_recv_chunk(r,
// P, 0); step s decodes and adds the landed chunk, encodes the sum, and
// unless it is the last step (s = P - 2: the chunk is the rank's) sends it
// while receiving step s + 1's; then the encodings' ring allgather.
//
// One hop: chunk `send`'s encoding to the right neighbour as its segments
// (send < 0: none), chunk `recv`'s segments from the left one into `land`
// (the chunk's encoding; recv < 0: none). Returns when both are done.
CollStats quantized_ring_hop(Transport& t, const QuantizedRingLayout& l, int send, std::span<const std::byte> sent,
                             int recv, std::span<std::byte> land, Millis timeout = Millis{0});
// The allgather of the chunks' encodings in `wire` (the layout's bytes).
CollStats quantized_ring_allgather(Transport& t, const QuantizedRingLayout& l, std::span<std::byte> wire,
                                   Millis timeout = Millis{0});

// Recursive doubling's messages for encodings made elsewhere, for P <= the
// group (8: one group, no pairs across groups): its first round sends part
// j of the rank's values (pattern::Partition{n, P}), encoded, to rank j and
// receives every rank's part r; its last sends the encoding of the summed
// part r to every rank and receives theirs. One round: `recvs` posted in
// order, then `sends`, each a (peer, bytes) pair; returns when all are done.
struct QuantizedMessage {
  int peer;
  std::span<std::byte> bytes;
};
CollStats quantized_allreduce_round(Transport& t, std::span<const QuantizedMessage> recvs,
                                    std::span<const QuantizedMessage> sends, Millis timeout = Millis{0});

struct QuantizedAlltoallOptions {
  Codec codec{};  // e.g. q4 forward (embedding lookups), q2 backward (their gradients)
  // QSGD's random stream: a block's roundings are a pure function of (step,
  // stream, sender, receiver, run), so every step draws new ones and any
  // rank can recompute what another drew (quantized_alltoall_key).
  std::uint64_t step = 0;
  std::string stream = "alltoall";
  // Per peer, the equal runs its block is cut into (empty: one run a block).
  // Every run starts a new quantization row (or QSGD bucket), so no row
  // mixes two runs: the table-wise alltoalls pass one run per table.
  std::span<const std::size_t> send_runs{}, recv_runs{};
  int tag = tags::kQuantizedAlltoall;
  Millis timeout{0};
};

// Alltoallv of floats: send_counts[j] values go to rank j, recv_counts[i]
// come from rank i, blocks contiguous in rank order. Blocks for other ranks
// are encoded, each run of a block (see send_runs) a run of codec.row_len-value
// rows (the last one shorter where the run does not divide); a rank's own
// block is copied as is (it never crosses the wire). No error compensation
// (lookups differ every step).
CollStats quantized_alltoallv(Transport& t, std::span<const float> in, std::span<const std::size_t> send_counts,
                              std::span<float> out, std::span<const std::size_t> recv_counts,
                              const QuantizedAlltoallOptions& opts);

// The QSGD key of run `run` of the block `sender` sends `receiver` (with
// opts.step, Codec::encode's (step, key)).
std::uint64_t quantized_alltoall_key(std::string_view stream, int sender, int receiver, std::size_t run);

// Equal blocks of in.size() / P values.
CollStats quantized_alltoall(Transport& t, std::span<const float> in, std::span<float> out,
                             const QuantizedAlltoallOptions& opts);

}  // namespace sparq
