#include "sparq/coll/quantized.h"

#include <algorithm>
#include <vector>

#include "sparq/coll/algorithms.h"
#include "sparq/coll/patterns.h"
#include "sparq/core/finite.h"

namespace sparq {

std::string_view quant_algo_name(QuantAlgo a) { return a == QuantAlgo::Ring ? "ring" : "recursive-doubling"; }

QuantAlgo parse_quant_algo(std::string_view s) {
  if (s == "ring") return QuantAlgo::Ring;
  if (s == "recursive-doubling") return QuantAlgo::RecursiveDoubling;
  SPARQ_THROW(InputError, "unknown quantized allreduce algorithm '{}' (ring, recursive-doubling)", s);
}

namespace {

// FNV-1a: a tensor name's key for QSGD randomness, stable across builds.
std::uint64_t name_key(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

// Puts values on the wire: enc(v + E[pos..]) with E refreshed (error
// compensation, one fused pass: Codec::encode_ec), or plain enc(v). Each
// call is a new hop for QSGD's key.
class Hop {
 public:
  Hop(const Codec& codec, std::span<float> resid, std::uint64_t step, std::uint64_t key)
      : codec_(codec), resid_(resid), step_(step), key_(key) {}

  // ec = false: a plain enc(v) even with residuals (the paper's first hop).
  void encode(std::span<const float> v, std::size_t pos, std::span<std::byte> out, bool ec = true) {
    const std::uint64_t key = key_ + 0x9E3779B97F4A7C15ull * ++hops_;
    if (resid_.empty() || !ec) {
      codec_.encode(v, out, step_, key);
      return;
    }
    codec_.encode_ec(v, resid_.subspan(pos, v.size()), out);
  }
  // v[i] += dec(in)[i]
  void add_decoded(std::span<const std::byte> in, std::span<float> v) {
    back_.resize(v.size());
    codec_.decode(in, back_);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] += back_[i];
  }
  const Codec& codec() const { return codec_; }

 private:
  const Codec& codec_;
  std::span<float> resid_;
  std::uint64_t step_, key_, hops_ = 0;
  std::vector<float> back_;
};

// Every hop's messages: chunk `send`'s segments from `sent` (the chunk's
// encoding) go right, chunk `recv`'s land from the left in `land`.
void post_hop(Call& c, const QuantizedRingLayout& l, int send, std::span<const std::byte> sent, int recv,
              std::span<std::byte> land, std::vector<Request>& sends, std::vector<Request>& recvs) {
  const int right = pattern::mod(c.rank() + 1, c.size()), left = pattern::mod(c.rank() - 1, c.size());
  if (recv >= 0)
    for (std::size_t k = 0; k < l.segments(recv); ++k)
      recvs.push_back(c.irecv(left, land.subspan(l.seg_byte(k), l.seg_bytes(recv, k))));
  if (send >= 0)
    for (std::size_t k = 0; k < l.segments(send); ++k)
      sends.push_back(c.isend(right, sent.subspan(l.seg_byte(k), l.seg_bytes(send, k))));
}

// The ring's reduce-scatter is pipelined in segments of whole rows (a
// row-wise encoding of a segment is the bytes of its rows in the chunk's
// encoding): a hop decodes, adds and re-encodes segment k and sends it on
// while segment k+1 is still on the wire, instead of holding a whole chunk
// for compute between transfers (on 4 hosts at 1 Gbit/s, 64 MiB q4:
// docs/results.md). QSGD draws a key per encode call, so it stays one
// segment per chunk.
void ring(Call& c, std::span<float> data, Hop& hop, std::size_t segment) {
  const int p = c.size(), r = c.rank();
  const Codec& codec = hop.codec();
  const QuantizedRingLayout l(codec, data.size(), p, segment);
  std::vector<std::byte> wire(l.byte(p));
  auto vals_of = [&](int j, std::size_t k) { return data.subspan(l.value(j) + k * l.seg, l.seg_len(j, k)); };
  auto enc_of = [&](int j, std::size_t k) {
    return std::span<std::byte>(wire).subspan(l.byte(j) + l.seg_byte(k), l.seg_bytes(j, k));
  };
  const int right = pattern::mod(r + 1, p);
  // Two landing buffers of a chunk each: step s+1's receives are posted
  // while step s's segments are reduced (a sender must find them posted to
  // stream on).
  std::size_t chunk_bytes = 0;
  for (int j = 0; j < p; ++j) chunk_bytes = std::max(chunk_bytes, l.byte(j + 1) - l.byte(j));
  std::vector<std::byte> land[2] = {std::vector<std::byte>(chunk_bytes), std::vector<std::byte>(chunk_bytes)};
  std::vector<Request> sends, recvs, next;
  post_hop(c, l, -1, {}, pattern::ring_rs_recv_chunk(r, p, 0), land[0], sends, recvs);
  // The first hop of a chunk: my own values, no sum yet (compensated unless
  // the codec asks for the paper's plain DQ(T) here).
  const int first = pattern::ring_rs_send_chunk(r, p, 0);
  for (std::size_t k = 0; k < l.segments(first); ++k) {
    hop.encode(vals_of(first, k), l.value(first) + k * l.seg, enc_of(first, k), codec.ec_first_hop);
    sends.push_back(c.isend(right, std::span<const std::byte>(enc_of(first, k))));
  }
  for (int s = 0; s + 1 < p; ++s) {
    const bool forward = s + 2 < p;  // else this chunk is mine: its encoding is what all ranks end with
    next.clear();
    if (forward) post_hop(c, l, -1, {}, pattern::ring_rs_recv_chunk(r, p, s + 1), land[(s + 1) % 2], sends, next);
    const int ch = pattern::ring_rs_recv_chunk(r, p, s);
    for (std::size_t k = 0; k < l.segments(ch); ++k) {
      c.wait(recvs[k]);
      const auto v = vals_of(ch, k);
      hop.add_decoded(std::span<const std::byte>(land[s % 2]).subspan(l.seg_byte(k), l.seg_bytes(ch, k)), v);
      hop.encode(v, l.value(ch) + k * l.seg, enc_of(ch, k));
      if (forward) sends.push_back(c.isend(right, std::span<const std::byte>(enc_of(ch, k))));
    }
    recvs.swap(next);
    c.count_round();
  }
  c.wait_all(sends);
  // Each owner's single encoding travels the ring unchanged; every rank,
  // the owner included, decodes the same bytes, each chunk as it completes.
  algo::ring_allgather(c, wire.data(), std::span<const std::size_t>(l.bytes), std::size_t{1} << 20, [&](int j) {
    codec.decode(std::span<const std::byte>(wire).subspan(l.byte(j), l.byte(j + 1) - l.byte(j)),
                 data.subspan(l.value(j), l.values(j)));
  });
}

// Recursive doubling over groups of G ranks: rank r is member r % G of
// group r / G and holds part r % G of the sum at the end of phase 1.
struct Doubling {
  Call& c;
  std::span<float> data;
  Hop& hop;
  const Codec& codec;
  int gsize, members, g, i;  // ranks a group, groups, my group, my part
  pattern::Partition parts;

  std::span<float> vals_of(int j) const { return data.subspan(parts.offset(j), parts.len(j)); }
  int group_rank(int j) const { return g * gsize + j; }
  int holder_of_my_part(int group) const { return group * gsize + i; }

  // 1. Inside the group: part j of my data goes to member j; I sum part i.
  std::vector<float> reduce_in_group() {
    std::vector<float> acc(vals_of(i).begin(), vals_of(i).end());
    std::vector<std::vector<std::byte>> out(gsize), in(gsize);
    std::vector<Request> reqs;
    for (int s = 1; s < gsize; ++s) {
      const int from = pattern::mod(i - s, gsize);
      in[from].resize(codec.bytes(parts.len(i)));
      reqs.push_back(c.irecv(group_rank(from), std::span<std::byte>(in[from])));
    }
    for (int s = 1; s < gsize; ++s) {
      const int j = pattern::mod(i + s, gsize);
      out[j].resize(codec.bytes(parts.len(j)));
      hop.encode(vals_of(j), parts.offset(j), out[j]);
      reqs.push_back(c.isend(group_rank(j), std::span<const std::byte>(out[j])));
    }
    c.wait_all(reqs);
    for (int q = 0; q < gsize; ++q)
      if (q != i) hop.add_decoded(in[q], acc);
    if (gsize > 1) c.count_round();
    return acc;
  }

  // 2. Across groups, among the members holding part i: pairs (keeper m,
  //    sender m + d) halve the work, the sender hands its reduced half to the
  //    keeper and drops out; keepers pair again at distance 2d. Group 0 ends
  //    with the sum of part i.
  void reduce_across_groups(std::span<float> acc) {
    const std::size_t base = parts.offset(i), h = acc.size() / 2;
    const std::span<float> lo = acc.first(h), hi = acc.subspan(h);
    for (int d = 1; d < members; d *= 2) {
      if (g % (2 * d) == d) {  // sender
        const int keeper = holder_of_my_part(g - d);
        std::vector<std::byte> out_hi(codec.bytes(hi.size())), in_lo(codec.bytes(h)), out_lo(codec.bytes(h));
        hop.encode(hi, base + h, out_hi);
        Request rs[2] = {c.irecv(keeper, std::span<std::byte>(in_lo)),
                         c.isend(keeper, std::span<const std::byte>(out_hi))};
        c.wait_all(rs);
        hop.add_decoded(in_lo, lo);
        hop.encode(lo, base, out_lo);
        Request s2 = c.isend(keeper, std::span<const std::byte>(out_lo));
        c.wait(s2);
        c.count_round();
        return;
      }
      if (g % (2 * d) == 0) {  // keeper
        const int sender = holder_of_my_part(g + d);
        std::vector<std::byte> out_lo(codec.bytes(h)), in_hi(codec.bytes(hi.size())), in_lo(codec.bytes(h));
        hop.encode(lo, base, out_lo);
        Request rs[3] = {c.irecv(sender, std::span<std::byte>(in_hi)), c.irecv(sender, std::span<std::byte>(in_lo)),
                         c.isend(sender, std::span<const std::byte>(out_lo))};
        c.wait(rs[0]);
        hop.add_decoded(in_hi, hi);
        c.wait(rs[1]);
        codec.decode(in_lo, lo);  // the sender's reduced half
        c.wait(rs[2]);
        c.count_round();
      }
    }
  }

  // 3. The last keeper encodes part i once; that encoding goes down a
  //    binomial tree over the members.
  std::vector<std::byte> broadcast_across_groups(std::span<const float> acc) {
    std::vector<std::byte> fin(codec.bytes(acc.size()));
    if (g == 0) hop.encode(acc, parts.offset(i), fin);
    int mask = 1;
    for (; mask < members; mask <<= 1)
      if (g & mask) {
        Request q = c.irecv(holder_of_my_part(g - mask), std::span<std::byte>(fin));
        c.wait(q);
        c.count_round();
        break;
      }
    std::vector<Request> down;
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (g + mask < members) down.push_back(c.isend(holder_of_my_part(g + mask), std::span<const std::byte>(fin)));
    c.wait_all(down);
    return fin;
  }

  // 4. Every part's encoding around the group; every rank decodes the same
  //    bytes.
  void allgather_in_group(std::vector<std::byte> fin) {
    std::vector<std::vector<std::byte>> all(gsize);
    std::vector<Request> reqs;
    for (int j = 0; j < gsize; ++j) {
      if (j == i) continue;
      all[j].resize(codec.bytes(parts.len(j)));
      reqs.push_back(c.irecv(group_rank(j), std::span<std::byte>(all[j])));
    }
    for (int j = 0; j < gsize; ++j)
      if (j != i) reqs.push_back(c.isend(group_rank(j), std::span<const std::byte>(fin)));
    c.wait_all(reqs);
    if (gsize > 1) c.count_round();
    all[i] = std::move(fin);
    for (int j = 0; j < gsize; ++j) codec.decode(all[j], vals_of(j));
  }
};

void recursive_doubling(Call& c, std::span<float> data, Hop& hop, int group) {
  const int p = c.size(), r = c.rank();
  const int gsize = std::min(group, p), members = p / gsize;
  SPARQ_CHECK_AS(InputError, group >= 1 && p % gsize == 0 && (members & (members - 1)) == 0,
                 "quantized recursive-doubling needs P = G * 2^k with G = min(group, P): P = {}, group = {}", p,
                 group);
  Doubling d{c, data, hop, hop.codec(), gsize, members, r / gsize, r % gsize, {data.size(), gsize}};
  std::vector<float> acc = d.reduce_in_group();
  d.reduce_across_groups(acc);
  d.allgather_in_group(d.broadcast_across_groups(acc));
}

}  // namespace

QuantizedRingLayout::QuantizedRingLayout(const Codec& c, std::size_t n, int p, std::size_t segment)
    : codec(c), part{n, p}, bytes(static_cast<std::size_t>(p) + 1, 0), seg(segment) {
  for (int j = 0; j < p; ++j) bytes[j + 1] = bytes[j] + codec.bytes(part.len(j));
  if (codec.kind == Codec::Kind::Qsgd) seg = part.max_len();
  if (codec.kind == Codec::Kind::Rowwise) seg = std::max(codec.row_len, seg / codec.row_len * codec.row_len);
  seg = std::max<std::size_t>(seg, 1);
}

CollStats quantized_ring_hop(Transport& t, const QuantizedRingLayout& l, int send, std::span<const std::byte> sent,
                             int recv, std::span<std::byte> land, Millis timeout) {
  const int p = t.size();
  SPARQ_CHECK_AS(InputError, l.part.parts == p, "quantized ring hop: a layout of {} chunks on {} ranks", l.part.parts,
                 p);
  SPARQ_CHECK_AS(InputError, send < p && recv < p, "quantized ring hop: chunk {} or {} of {}", send, recv, p);
  auto chunk_bytes = [&](int j) { return j < 0 ? std::size_t{0} : l.byte(j + 1) - l.byte(j); };
  SPARQ_CHECK_AS(InputError, sent.size() == chunk_bytes(send) && land.size() == chunk_bytes(recv),
                 "quantized ring hop: {} bytes to send and {} to land, chunks {} and {} take {} and {}", sent.size(),
                 land.size(), send, recv, chunk_bytes(send), chunk_bytes(recv));
  Call c(t, "quantized_allreduce/ring/" + l.codec.name(), tags::kQuantizedAllreduce, timeout);
  std::vector<Request> sends, recvs;
  post_hop(c, l, send, sent, recv, land, sends, recvs);
  c.wait_all(recvs);
  c.wait_all(sends);
  c.count_round();
  return c.finish("ring");
}

CollStats quantized_ring_allgather(Transport& t, const QuantizedRingLayout& l, std::span<std::byte> wire,
                                   Millis timeout) {
  SPARQ_CHECK_AS(InputError, l.part.parts == t.size() && wire.size() == l.byte(l.part.parts),
                 "quantized ring allgather: {} bytes for a layout of {} on {} ranks", wire.size(),
                 l.byte(l.part.parts), t.size());
  Call c(t, "quantized_allreduce/ring/" + l.codec.name(), tags::kQuantizedAllreduce, timeout);
  algo::ring_allgather(c, wire.data(), std::span<const std::size_t>(l.bytes), std::size_t{1} << 20);
  return c.finish("ring");
}

CollStats quantized_allreduce_round(Transport& t, std::span<const QuantizedMessage> recvs,
                                    std::span<const QuantizedMessage> sends, Millis timeout) {
  for (const auto* list : {&recvs, &sends})
    for (const QuantizedMessage& m : *list)
      SPARQ_CHECK_AS(InputError, m.peer >= 0 && m.peer < t.size() && m.peer != t.rank(),
                     "quantized allreduce round on rank {}: peer {} is not another rank of {}", t.rank(), m.peer,
                     t.size());
  Call c(t, "quantized_allreduce/recursive-doubling", tags::kQuantizedAllreduce, timeout);
  std::vector<Request> reqs;
  for (const QuantizedMessage& m : recvs) reqs.push_back(c.irecv(m.peer, m.bytes));
  for (const QuantizedMessage& m : sends) reqs.push_back(c.isend(m.peer, std::span<const std::byte>(m.bytes)));
  c.wait_all(reqs);
  c.count_round();
  return c.finish("recursive-doubling");
}

CollStats quantized_allreduce(Transport& t, std::span<float> data, const QuantizedAllreduceOptions& opts) {
  const std::string name(quant_algo_name(opts.algo));
  Call c(t, fmt::format("quantized_allreduce/{}/{}", name, opts.codec.name()), opts.tag, opts.timeout);
  std::span<float> resid;
  if (opts.codec.error_comp) {
    SPARQ_CHECK_AS(InputError, opts.residuals != nullptr,
                   "quantized allreduce with error compensation needs a residual store");
    resid = opts.residuals->residual(opts.tensor + "/" + std::string(quant_algo_name(opts.algo)), data.size());
    SPARQ_CHECK_AS(InputError, opts.codec.ec_first_hop || opts.algo == QuantAlgo::Ring,
                   "codec {}: error compensation that skips the first hop is defined for the ring only, not {}",
                   opts.codec.name(), name);
  }
  if (t.size() == 1) return c.finish(name);  // nothing crosses a wire
  Hop hop(opts.codec, resid, opts.step, name_key(opts.tensor) + static_cast<std::uint64_t>(t.rank()));
  if (opts.algo == QuantAlgo::Ring) ring(c, data, hop, opts.segment);
  else recursive_doubling(c, data, hop, opts.group);
  return c.finish(name);
}

namespace {

// SplitMix64's finaliser: spreads each field over all 64 bits, so that QSGD's
// fold to 32 bits keeps distinct (sender, receiver, run) apart.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Runs of peer j's block (one when the caller gives none); each of n / runs values.
std::size_t runs_of(std::span<const std::size_t> runs, int j) {
  return runs.empty() ? 1 : runs[static_cast<std::size_t>(j)];
}
std::size_t block_bytes(const Codec& codec, std::size_t n, std::size_t runs) {
  return n == 0 ? 0 : runs * codec.bytes(n / runs);
}

}  // namespace

std::uint64_t quantized_alltoall_key(std::string_view stream, int sender, int receiver, std::size_t run) {
  std::uint64_t h = mix64(name_key(stream) ^ static_cast<std::uint64_t>(sender));
  h = mix64(h ^ static_cast<std::uint64_t>(receiver));
  return mix64(h ^ static_cast<std::uint64_t>(run));
}

CollStats quantized_alltoallv(Transport& t, std::span<const float> in, std::span<const std::size_t> send_counts,
                              std::span<float> out, std::span<const std::size_t> recv_counts,
                              const QuantizedAlltoallOptions& opts) {
  const int p = t.size(), r = t.rank();
  const Codec& codec = opts.codec;
  SPARQ_CHECK_AS(InputError,
                 send_counts.size() == static_cast<std::size_t>(p) && recv_counts.size() == send_counts.size(),
                 "quantized alltoallv: {} send and {} receive counts for {} ranks", send_counts.size(),
                 recv_counts.size(), p);
  SPARQ_CHECK_AS(InputError,
                 (opts.send_runs.empty() || opts.send_runs.size() == send_counts.size()) &&
                     (opts.recv_runs.empty() || opts.recv_runs.size() == recv_counts.size()),
                 "quantized alltoallv: {} send and {} receive run counts for {} ranks", opts.send_runs.size(),
                 opts.recv_runs.size(), p);
  std::vector<std::size_t> sd(p + 1, 0), rd(p + 1, 0);  // value offsets
  for (int j = 0; j < p; ++j) {
    sd[j + 1] = sd[j] + send_counts[j], rd[j + 1] = rd[j] + recv_counts[j];
    for (const auto& [n, runs] : {std::pair{send_counts[j], runs_of(opts.send_runs, j)},
                                  std::pair{recv_counts[j], runs_of(opts.recv_runs, j)}})
      SPARQ_CHECK_AS(InputError, n == 0 || (runs > 0 && n % runs == 0),
                     "quantized alltoallv: a block of {} values for rank {} is not {} equal runs", n, j, runs);
  }
  SPARQ_CHECK_AS(InputError, sd[p] == in.size() && rd[p] == out.size(),
                 "quantized alltoallv: counts sum to {} / {} values, buffers hold {} / {}", sd[p], rd[p], in.size(),
                 out.size());
  SPARQ_CHECK_AS(InputError, send_counts[r] == recv_counts[r],
                 "quantized alltoallv: rank {} sends itself {} values, expects {}", r, send_counts[r], recv_counts[r]);
  // Before anything is sent, fp32 too: a NaN row would reach its owner's
  // table (or every value of a quantized row would decode as NaN).
  for (int j = 0; j < p; ++j)
    SPARQ_CHECK_FINITE(in.subspan(sd[j], send_counts[j]),
                 [&] { return fmt::format("quantized alltoallv ({}): rank {}'s block for rank {}", opts.stream, r, j); });
  Call c(t, "quantized_alltoall/" + codec.name(), opts.tag, opts.timeout);
  std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(sd[r]), send_counts[r],
              out.begin() + static_cast<std::ptrdiff_t>(rd[r]));
  std::vector<std::byte> send, recv;
  for (int s = 1; s < p; ++s) {
    const int to = pattern::mod(r + s, p), from = pattern::mod(r - s, p);
    const std::size_t sn = send_counts[to], sruns = runs_of(opts.send_runs, to);
    const std::size_t rn = recv_counts[from], rruns = runs_of(opts.recv_runs, from);
    send.resize(block_bytes(codec, sn, sruns));
    recv.resize(block_bytes(codec, rn, rruns));
    if (sn > 0) {
      const std::size_t len = sn / sruns, bytes = codec.bytes(len);
      for (std::size_t k = 0; k < sruns; ++k)
        codec.encode(in.subspan(sd[to] + k * len, len), std::span(send).subspan(k * bytes, bytes), opts.step,
                     quantized_alltoall_key(opts.stream, r, to, k));
    }
    c.sendrecv(to, std::span<const std::byte>(send), from, std::span<std::byte>(recv));
    if (rn > 0) {
      const std::size_t len = rn / rruns, bytes = codec.bytes(len);
      for (std::size_t k = 0; k < rruns; ++k)
        codec.decode(std::span<const std::byte>(recv).subspan(k * bytes, bytes), out.subspan(rd[from] + k * len, len));
    }
  }
  return c.finish("pairwise");
}

CollStats quantized_alltoall(Transport& t, std::span<const float> in, std::span<float> out,
                             const QuantizedAlltoallOptions& opts) {
  const std::size_t p = static_cast<std::size_t>(t.size());
  SPARQ_CHECK_AS(InputError, in.size() == out.size() && in.size() % p == 0,
                 "quantized alltoall: {} in, {} out values are not {} equal blocks", in.size(), out.size(), p);
  const std::vector<std::size_t> counts(p, in.size() / p);
  return quantized_alltoallv(t, in, counts, out, counts, opts);
}

}  // namespace sparq
