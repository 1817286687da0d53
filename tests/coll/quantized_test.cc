// Quantized collectives against a sequential emulation of the papers'
// algorithms (Yang et al.'s single-node emulation, written out plainly), the
// per-hop error bound, error compensation over repeated calls, and the bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "sparq/coll/patterns.h"
#include "sparq/coll/quantized.h"
#include "sparq/transport/local_transport.h"
#include "tests/coll/reference.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

Codec rowwise(int bits, bool ec, std::size_t row_len) {
  Codec c = parse_codec(fmt::format("q{}{}", bits, ec ? "+ec" : ""));
  c.row_len = row_len;
  return c;
}

std::vector<float> dq(const Codec& c, std::vector<float> z) {
  std::vector<std::byte> b(c.bytes(z.size()));
  c.encode(z, b, 0, 0);
  c.decode(b, z);
  return z;
}

// Algorithm 2 sequentially: chunk k is first put on the wire by rank k+1,
// each next rank adds its own values to what it received and re-encodes, and
// rank k's encoding is what everybody ends with. resid[rank] holds each rank's
// residuals (error compensation) across calls. With "+ec" every hop is
// compensated (sparq's default); with "+ec-skip-first" the first hop sends
// plain DQ(T), as Algorithm 2 does, and its residuals are never touched.
std::vector<float> emulate_ring(const std::vector<std::vector<float>>& x, const Codec& c,
                                std::vector<std::vector<float>>& resid) {
  const int p = static_cast<int>(x.size());
  const std::size_t n = x[0].size();
  const pattern::Partition part{n, p};
  std::vector<float> result(n);
  for (int k = 0; k < p; ++k) {
    const std::size_t off = part.offset(k), len = part.len(k);
    std::vector<float> y(len, 0.0f);  // what arrived so far (nothing before the first hop)
    for (int hop = 1; hop <= p; ++hop) {
      const int j = (k + hop) % p;
      std::vector<float> z(len);
      for (std::size_t i = 0; i < len; ++i) z[i] = hop == 1 ? x[j][off + i] : x[j][off + i] + y[i];
      const bool ec = c.error_comp && (hop > 1 || c.ec_first_hop);
      if (ec)
        for (std::size_t i = 0; i < len; ++i) z[i] += resid[j][off + i];
      y = dq(c, z);
      if (ec)
        for (std::size_t i = 0; i < len; ++i) resid[j][off + i] = z[i] - y[i];
    }
    std::copy(y.begin(), y.end(), result.begin() + static_cast<std::ptrdiff_t>(off));
  }
  return result;
}

TEST(QuantizedRing, BitwiseEqualsSequentialEmulation) {
  SPARQ_LOCAL_ONLY();
  for (int p : {2, 3, 4, 5, 8})
    for (const char* spec : {"q4", "q2", "q2+ec", "q4+ec-skip-first", "q2+ec-skip-first"})
      for (std::size_t segment : {std::size_t{1} << 18, std::size_t{40}}) {  // one segment per chunk, or several
        Codec codec = parse_codec(spec);
        codec.row_len = codec.rowwise.bits == 2 && !codec.error_comp ? 7 : 16;
        SCOPED_TRACE(testing::Message() << "P=" << p << " codec=" << codec.name() << " segment=" << segment);
        const std::size_t n = 1000 + static_cast<std::size_t>(p);
        std::vector<std::vector<float>> x(p), resid(p, std::vector<float>(n, 0.0f));
        for (int r = 0; r < p; ++r) x[r] = test::rank_input<float>(n, r);
        compress::ErrorFeedbackStore stores[16];
        for (int call = 0; call < 3; ++call) {  // residuals carry over between calls
          const auto expect = emulate_ring(x, codec, resid);
          run_local(p, [&](Transport& t) {
            std::vector<float> v = x[t.rank()];
            QuantizedAllreduceOptions o;
            o.codec = codec;
            o.residuals = &stores[t.rank()];
            o.segment = segment;
            quantized_allreduce(t, std::span<float>(v), o);
            ASSERT_EQ(0, std::memcmp(v.data(), expect.data(), n * sizeof(float))) << "rank " << t.rank();
          });
          if (!codec.error_comp) continue;
          for (int r = 0; r < p; ++r) {
            const auto e = stores[r].residual("tensor/ring", n);
            ASSERT_EQ(0, std::memcmp(e.data(), resid[r].data(), n * sizeof(float))) << "residuals of rank " << r;
          }
        }
      }
}

// The ring by hops, as a rank that encodes and decodes elsewhere drives it
// (sparq.torch on a GPU): the encodings made here with the codec, the
// messages by quantized_ring_hop and quantized_ring_allgather.
void ring_by_hops(Transport& t, std::span<float> data, const Codec& codec, std::span<float> resid,
                  std::size_t segment) {
  const int p = t.size(), r = t.rank();
  const QuantizedRingLayout l(codec, data.size(), p, segment);
  std::vector<std::byte> wire(l.byte(p)), land;
  auto chunk = [&](int j) { return data.subspan(l.value(j), l.values(j)); };
  auto enc = [&](int j) { return std::span<std::byte>(wire).subspan(l.byte(j), l.byte(j + 1) - l.byte(j)); };
  auto encode = [&](int j, bool ec) {
    if (ec && codec.error_comp) codec.encode_ec(chunk(j), resid.subspan(l.value(j), l.values(j)), enc(j));
    else codec.encode(chunk(j), enc(j), 0, 0);
  };
  auto hop_to = [&](int send, int recv) {
    land.assign(recv < 0 ? 0 : l.byte(recv + 1) - l.byte(recv), std::byte{0});
    quantized_ring_hop(t, l, send, send < 0 ? std::span<const std::byte>() : enc(send), recv, land);
  };
  const int first = pattern::ring_rs_send_chunk(r, p, 0);
  encode(first, codec.ec_first_hop);
  hop_to(first, pattern::ring_rs_recv_chunk(r, p, 0));
  for (int s = 0; s + 1 < p; ++s) {
    const int ch = pattern::ring_rs_recv_chunk(r, p, s);
    std::vector<float> back(l.values(ch));
    codec.decode(land, back);
    for (std::size_t i = 0; i < back.size(); ++i) chunk(ch)[i] += back[i];
    encode(ch, true);
    if (s + 2 < p) hop_to(ch, pattern::ring_rs_recv_chunk(r, p, s + 1));
  }
  quantized_ring_allgather(t, l, wire);
  for (int j = 0; j < p; ++j) codec.decode(enc(j), chunk(j));
}

// Ranks that drive the ring by hops and ranks that call quantized_allreduce
// send the same messages: mixed in one allreduce, every rank ends with the
// all-quantized_allreduce result and residuals, bit for bit.
TEST(QuantizedRing, HopsByTheCallerMixWithTheCollective) {
  SPARQ_LOCAL_ONLY();
  for (int p : {2, 3, 5})
    for (const char* spec : {"q4+ec", "q2+ec-skip-first", "q8"})
      for (std::size_t segment : {std::size_t{1} << 18, std::size_t{40}}) {
        Codec codec = parse_codec(spec);
        codec.row_len = 16;
        SCOPED_TRACE(testing::Message() << "P=" << p << " codec=" << codec.name() << " segment=" << segment);
        const std::size_t n = 1000 + static_cast<std::size_t>(p);
        std::vector<std::vector<float>> x(p), want(p), want_resid(p), got(p), got_resid(p);
        for (int r = 0; r < p; ++r) x[r] = test::rank_input<float>(n, r);
        for (bool mixed : {false, true}) {
          compress::ErrorFeedbackStore stores[8];
          std::vector<std::vector<float>> resid(p, std::vector<float>(n, 0.0f));
          auto& out = mixed ? got : want;
          auto& out_resid = mixed ? got_resid : want_resid;
          for (int call = 0; call < 2; ++call) {  // residuals carry over
            run_local(p, [&](Transport& t) {
              std::vector<float> v = x[t.rank()];
              if (mixed && t.rank() % 2 == 0) {
                ring_by_hops(t, v, codec, resid[t.rank()], segment);
              } else {
                QuantizedAllreduceOptions o;
                o.codec = codec;
                o.residuals = &stores[t.rank()];
                o.segment = segment;
                quantized_allreduce(t, std::span<float>(v), o);
                const auto e = stores[t.rank()].residual("tensor/ring", n);
                resid[t.rank()].assign(e.begin(), e.end());
              }
              out[t.rank()] = v;
            });
          }
          out_resid = resid;
        }
        for (int r = 0; r < p; ++r) {
          ASSERT_EQ(0, std::memcmp(got[r].data(), want[r].data(), n * sizeof(float))) << "rank " << r;
          ASSERT_EQ(0, std::memcmp(got_resid[r].data(), want_resid[r].data(), n * sizeof(float))) << "rank " << r;
        }
      }
}

// Recursive doubling in one group by rounds, as a rank that encodes and
// decodes elsewhere drives it: its parts encoded here, the messages by
// quantized_allreduce_round.
void recursive_doubling_by_rounds(Transport& t, std::span<float> data, const Codec& codec, std::span<float> resid) {
  const int p = t.size(), r = t.rank();
  const pattern::Partition part{data.size(), p};
  auto vals = [&](int j) { return data.subspan(part.offset(j), part.len(j)); };
  auto encode = [&](std::span<const float> v, std::size_t at) {
    std::vector<std::byte> b(codec.bytes(v.size()));
    if (codec.error_comp) codec.encode_ec(v, resid.subspan(at, v.size()), b);
    else codec.encode(v, b, 0, 0);
    return b;
  };
  std::vector<std::vector<std::byte>> out(p), in(p);
  std::vector<QuantizedMessage> recvs, sends;
  for (int s = 1; s < p; ++s) {
    const int from = pattern::mod(r - s, p), to = pattern::mod(r + s, p);
    in[from].resize(codec.bytes(part.len(r)));
    recvs.push_back({from, in[from]});
    out[to] = encode(vals(to), part.offset(to));
    sends.push_back({to, out[to]});
  }
  quantized_allreduce_round(t, recvs, sends);
  std::vector<float> acc(vals(r).begin(), vals(r).end()), back(acc.size());
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    codec.decode(in[q], back);
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += back[i];
  }
  std::vector<std::byte> fin = encode(acc, part.offset(r));
  recvs.clear(), sends.clear();
  for (int j = 0; j < p; ++j) {
    if (j == r) continue;
    in[j].resize(codec.bytes(part.len(j)));
    recvs.push_back({j, in[j]});
    sends.push_back({j, fin});
  }
  quantized_allreduce_round(t, recvs, sends);
  in[r] = fin;
  for (int j = 0; j < p; ++j) codec.decode(in[j], vals(j));
}

TEST(QuantizedRecursiveDoubling, RoundsByTheCallerMixWithTheCollective) {
  SPARQ_LOCAL_ONLY();
  for (int p : {2, 3, 8})
    for (const char* spec : {"q4+ec", "q8"}) {
      Codec codec = parse_codec(spec);
      codec.row_len = 16;
      SCOPED_TRACE(testing::Message() << "P=" << p << " codec=" << codec.name());
      const std::size_t n = 1000 + static_cast<std::size_t>(p);
      std::vector<std::vector<float>> x(p), want(p), got(p), want_resid(p), got_resid(p);
      for (int r = 0; r < p; ++r) x[r] = test::rank_input<float>(n, r);
      for (bool mixed : {false, true}) {
        compress::ErrorFeedbackStore stores[8];
        std::vector<std::vector<float>> resid(p, std::vector<float>(n, 0.0f));
        for (int call = 0; call < 2; ++call) {  // residuals carry over
          run_local(p, [&](Transport& t) {
            std::vector<float> v = x[t.rank()];
            if (mixed && t.rank() % 2 == 1) {
              recursive_doubling_by_rounds(t, v, codec, resid[t.rank()]);
            } else {
              QuantizedAllreduceOptions o;
              o.algo = QuantAlgo::RecursiveDoubling;
              o.codec = codec;
              o.residuals = &stores[t.rank()];
              quantized_allreduce(t, std::span<float>(v), o);
              const auto e = stores[t.rank()].residual("tensor/recursive-doubling", n);
              resid[t.rank()].assign(e.begin(), e.end());
            }
            (mixed ? got : want)[t.rank()] = v;
          });
        }
        (mixed ? got_resid : want_resid) = resid;
      }
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(0, std::memcmp(got[r].data(), want[r].data(), n * sizeof(float))) << "rank " << r;
        ASSERT_EQ(0, std::memcmp(got_resid[r].data(), want_resid[r].data(), n * sizeof(float))) << "rank " << r;
      }
    }
  run_local(2, [&](Transport& t) {
    std::vector<std::byte> b(4);
    const QuantizedMessage self{t.rank(), b};
    EXPECT_THROW(quantized_allreduce_round(t, std::span(&self, 1), {}), InputError);
  });
}

TEST(QuantizedRing, HopsRefuseBuffersOfTheWrongSize) {
  SPARQ_LOCAL_ONLY();
  run_local(2, [&](Transport& t) {
    const QuantizedRingLayout l(parse_codec("q4"), 100, 2);
    std::vector<std::byte> land(l.byte(1) - l.byte(0) + 1);
    EXPECT_THROW(quantized_ring_hop(t, l, -1, {}, 0, land), InputError);
    const QuantizedRingLayout three(parse_codec("q4"), 100, 3);
    EXPECT_THROW(quantized_ring_hop(t, three, -1, {}, -1, {}), InputError);
    std::vector<std::byte> wire(l.byte(2) - 1);
    EXPECT_THROW(quantized_ring_allgather(t, l, wire), InputError);
  });
}

// Encodes v, the values at positions pos.. of rank r's tensor, for one hop
// and returns what the receiver decodes; with error compensation the rank
// sends DQ(v + E) and keeps E := (v + E) - DQ(v + E) (Algorithm 1).
std::vector<float> hop(const Codec& c, std::vector<std::vector<float>>& resid, int r, std::size_t pos,
                       std::vector<float> v, bool ec = true) {
  ec = ec && c.error_comp;
  if (ec)
    for (std::size_t k = 0; k < v.size(); ++k) v[k] += resid[r][pos + k];
  std::vector<float> y = dq(c, v);
  if (ec)
    for (std::size_t k = 0; k < v.size(); ++k) resid[r][pos + k] = v[k] - y[k];
  return y;
}

// Algorithms 3-5 sequentially, in the order sparq's recursive doubling does
// its arithmetic. Ranks form P/G groups of G = min(group, P); member i of a
// group owns part i of the tensor (pattern::Partition{n, G}).
//  1. Algorithm 5: every member sends member i its part i, encoded; member i
//     adds what it got to its own part i in order of the senders' index.
//  2. Algorithms 3-4 over the column of members i: the holders (one per
//     group, in group order) pair up (N[0], N[1]), (N[2], N[3]), ...; in each
//     pair the first (sparq's keeper; the paper keeps the second) sends its
//     low half, the second its high half, each adds the other's to its own
//     half, and the second sends its reduced low half to the first, which
//     takes it as it arrives. The first ones go on to the next level.
//  3. The last holder encodes its part once; every rank decodes that.
// Every encode is a hop with error compensation (when the codec has it).
std::vector<float> emulate_recursive_doubling(const std::vector<std::vector<float>>& x, int group, const Codec& c,
                                              std::vector<std::vector<float>>& resid) {
  const int p = static_cast<int>(x.size()), gs = std::min(group, p), groups = p / gs;
  const std::size_t n = x[0].size();
  const pattern::Partition part{n, gs};
  std::vector<float> result(n);
  for (int i = 0; i < gs; ++i) {
    const std::size_t off = part.offset(i), len = part.len(i), h = len / 2;
    auto slice = [&](const std::vector<float>& v, std::size_t from, std::size_t count) {
      return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(from),
                                v.begin() + static_cast<std::ptrdiff_t>(from + count));
    };
    // 1. sums[g]: what member i of group g holds after the group's exchange.
    std::vector<std::vector<float>> sums(groups);
    for (int g = 0; g < groups; ++g) {
      std::vector<std::vector<float>> got(gs);
      for (int q = 0; q < gs; ++q)
        if (q != i) got[q] = hop(c, resid, g * gs + q, off, slice(x[g * gs + q], off, len));
      sums[g] = slice(x[g * gs + i], off, len);
      for (int q = 0; q < gs; ++q)
        if (q != i)
          for (std::size_t k = 0; k < len; ++k) sums[g][k] += got[q][k];
    }
    // 2. Pairs of holders, level by level (Algorithm 4's `groups`).
    std::vector<int> holders(groups);
    for (int g = 0; g < groups; ++g) holders[g] = g;
    while (holders.size() > 1) {
      std::vector<int> next;
      for (std::size_t k = 0; k + 1 < holders.size(); k += 2) {
        const int a = holders[k], b = holders[k + 1];  // a keeps, b drops out
        const int ra = a * gs + i, rb = b * gs + i;
        const auto lo_of_a = hop(c, resid, ra, off, slice(sums[a], 0, h));
        const auto hi_of_b = hop(c, resid, rb, off + h, slice(sums[b], h, len - h));
        for (std::size_t k2 = 0; k2 < h; ++k2) sums[b][k2] += lo_of_a[k2];
        for (std::size_t k2 = h; k2 < len; ++k2) sums[a][k2] += hi_of_b[k2 - h];
        const auto lo_of_b = hop(c, resid, rb, off, slice(sums[b], 0, h));
        std::copy(lo_of_b.begin(), lo_of_b.end(), sums[a].begin());
        next.push_back(a);
      }
      holders = next;
    }
    // 3. One encoding of the whole part, by the last holder, for everybody.
    const auto fin = hop(c, resid, holders[0] * gs + i, off, sums[holders[0]]);
    std::copy(fin.begin(), fin.end(), result.begin() + static_cast<std::ptrdiff_t>(off));
  }
  return result;
}

// Every rank's result and every rank's residuals, bit for bit, over three
// calls (residuals carry over), on up to 16 groups of 8 (the paper's 128
// nodes), with rows that straddle the parts and their halves.
TEST(QuantizedRecursiveDoubling, BitwiseEqualsSequentialEmulation) {
  SPARQ_LOCAL_ONLY();
  const std::pair<int, int> shapes[] = {{16, 8}, {32, 8}, {64, 8}, {128, 8}, {8, 8}, {8, 2}, {4, 4}};
  for (const auto& [p, group] : shapes)
    for (const Codec& codec :
         {rowwise(4, false, 24), rowwise(4, true, 24), rowwise(2, false, 7), rowwise(2, true, 7)}) {
      SCOPED_TRACE(testing::Message() << "P=" << p << " group=" << group << " codec=" << codec.name()
                                      << " row_len=" << codec.row_len);
      // Parts of 253-1013 values, unequal (n % G != 0), halves odd or even;
      // rows of 24 and 7 straddle parts and halves (a few fit exactly).
      const std::size_t n = 2001 + 3 * static_cast<std::size_t>(p);
      std::vector<std::vector<float>> x(p), resid(p, std::vector<float>(n, 0.0f));
      for (int r = 0; r < p; ++r) x[r] = test::rank_input<float>(n, r);
      std::vector<compress::ErrorFeedbackStore> stores(p);
      for (int call = 0; call < 3; ++call) {
        const auto expect = emulate_recursive_doubling(x, group, codec, resid);
        run_local(p, [&](Transport& t) {
          std::vector<float> v = x[t.rank()];
          QuantizedAllreduceOptions o;
          o.algo = QuantAlgo::RecursiveDoubling;
          o.group = group;
          o.codec = codec;
          o.residuals = &stores[t.rank()];
          quantized_allreduce(t, std::span<float>(v), o);
          ASSERT_EQ(0, std::memcmp(v.data(), expect.data(), n * sizeof(float)))
              << "rank " << t.rank() << " call " << call;
        });
        if (!codec.error_comp) continue;
        for (int r = 0; r < p; ++r) {
          const auto e = stores[r].residual("tensor/recursive-doubling", n);
          ASSERT_EQ(0, std::memcmp(e.data(), resid[r].data(), n * sizeof(float)))
              << "residuals of rank " << r << " call " << call;
        }
      }
    }
}

// On every transport (the emulation above is in-process only) and on shapes
// it does not cover (P = 6, group 3): (a) with fp32 on the wire it is the
// plain sum, (b) quantized, every element is within the per-hop bound:
// hops x s/2 with s <= 2 * sum|x| / (2^q - 1).
TEST(QuantizedRecursiveDoubling, ExactWithFp32AndWithinHopBound) {
  const std::pair<int, int> shapes[] = {{1, 8}, {2, 8}, {4, 8}, {8, 8}, {16, 8}, {8, 2}, {16, 4}, {6, 3}};
  for (const auto& [p, group] : shapes) {
    if (!test::ranks_available(p)) continue;
    const std::size_t n = 999;
    const auto ref = test::reference_reduce<float>(n, p, ReduceOp::Sum);
    const int members = p / std::min(group, p);
    const double hops = 3 + 2 * std::log2(members);  // in group, 2 per level, the shared encoding
    for (const char* name : {"fp32", "q8", "q4"}) {
      SCOPED_TRACE(testing::Message() << "P=" << p << " group=" << group << " codec=" << name);
      Codec codec = parse_codec(name);
      codec.row_len = 32;
      const double step = codec.kind == Codec::Kind::Fp32 ? 0 : 2.0 * p / ((1 << codec.rowwise.bits) - 1);
      test::run_ranks(p, [&](Transport& t) {
        auto v = test::rank_input<float>(n, t.rank());
        QuantizedAllreduceOptions o;
        o.algo = QuantAlgo::RecursiveDoubling;
        o.codec = codec;
        o.group = group;
        quantized_allreduce(t, std::span<float>(v), o);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_LE(std::abs(v[i] - ref.value[i]), hops * step / 2 * 1.01 + 4 * ref.tolerance[i] + 1e-6) << i;
      });
    }
  }
}

TEST(QuantizedRing, WithinHopBoundOnAllRankCounts) {
  for (int p : {1, 2, 3, 4, 5, 7, 8, 16}) {
    if (!test::ranks_available(p)) continue;
    const std::size_t n = 4099;
    const auto ref = test::reference_reduce<float>(n, p, ReduceOp::Sum);
    test::run_ranks(p, [&](Transport& t) {
      auto v = test::rank_input<float>(n, t.rank());
      QuantizedAllreduceOptions o;
      o.codec = rowwise(8, false, 64);
      quantized_allreduce(t, std::span<float>(v), o);
      const double step = 2.0 * p / 255;
      for (std::size_t i = 0; i < n; ++i) ASSERT_LE(std::abs(v[i] - ref.value[i]), p * step / 2 * 1.01 + 1e-6) << i;
    });
  }
}

// The same input allreduced again and again: with error compensation on
// every hop the running mean of the results converges to the exact sum (each
// call repays the previous call's error); without it the error repeats and
// never shrinks. Skipping the first hop (Algorithm 2 as printed) leaves the
// first hop's error DQ(x) - x in every call, unpaid: the mean converges to
// the sum plus that bias.
TEST(QuantizedRing, ErrorCompensationKeepsAccumulatedErrorBounded) {
  const int p = 4, calls = 64;
  SPARQ_NEED_RANKS(p);
  const std::size_t n = 2048;
  const auto ref = test::reference_reduce<float>(n, p, ReduceOp::Sum);
  for (const char* spec : {"q2", "q2+ec", "q2+ec-skip-first"}) {
    Codec codec = parse_codec(spec);
    codec.row_len = 64;
    // The first hop's error: chunk k is first encoded by rank k + 1.
    const pattern::Partition part{n, p};
    std::vector<double> bias(n, 0.0);
    if (codec.error_comp && !codec.ec_first_hop)
      for (int k = 0; k < p; ++k) {
        const auto x = test::rank_input<float>(n, (k + 1) % p);
        const std::vector<float> chunk(x.begin() + static_cast<std::ptrdiff_t>(part.offset(k)),
                                       x.begin() + static_cast<std::ptrdiff_t>(part.offset(k) + part.len(k)));
        const auto y = dq(codec, chunk);
        for (std::size_t i = 0; i < chunk.size(); ++i) bias[part.offset(k) + i] = double(y[i]) - double(chunk[i]);
      }
    test::run_ranks(p, [&](Transport& t) {
      compress::ErrorFeedbackStore store;
      QuantizedAllreduceOptions o;
      o.codec = codec;
      o.residuals = &store;
      std::vector<double> mean(n, 0.0);
      double first_err = 0;
      for (int k = 0; k < calls; ++k) {
        auto v = test::rank_input<float>(n, t.rank());
        quantized_allreduce(t, std::span<float>(v), o);
        for (std::size_t i = 0; i < n; ++i) mean[i] += v[i] / double(calls);
        if (k == 0)
          for (std::size_t i = 0; i < n; ++i) first_err = std::max(first_err, std::abs(double(v[i]) - ref.value[i]));
      }
      double mean_err = 0, unbiased_err = 0, max_bias = 0;
      for (std::size_t i = 0; i < n; ++i) {
        mean_err = std::max(mean_err, std::abs(mean[i] - ref.value[i]));
        unbiased_err = std::max(unbiased_err, std::abs(mean[i] - ref.value[i] - bias[i]));
        max_bias = std::max(max_bias, std::abs(bias[i]));
      }
      ASSERT_GT(first_err, 0.05);  // 2-bit: a visible error in one call
      if (!codec.error_comp) {
        EXPECT_NEAR(mean_err, first_err, 1e-3 * first_err) << "without EC the same error repeats";
      } else if (codec.ec_first_hop) {
        EXPECT_LT(mean_err, 0.05 * first_err) << "with EC on every hop";
      } else {
        EXPECT_LT(unbiased_err, 0.05 * first_err) << "EC repays all but the first hop's error";
        EXPECT_GT(mean_err, 0.5 * max_bias) << "which stays";
        EXPECT_GT(max_bias, 0.1 * first_err);
      }
    });
  }
}

TEST(QuantizedRing, FourBitSendsSevenTimesFewerBytesThanFp32) {
  const int p = 4;
  SPARQ_NEED_RANKS(p);
  test::run_ranks(p, [&](Transport& t) {
    const std::size_t n = 1 << 20;
    auto v = test::rank_input<float>(n, t.rank());
    QuantizedAllreduceOptions o;
    o.codec = parse_codec("fp32");
    const auto fp32 = quantized_allreduce(t, std::span<float>(v), o).wire.bytes_sent;
    o.codec = parse_codec("q4");  // rows of 512 values, fp32 scale and bias per row
    const auto q4 = quantized_allreduce(t, std::span<float>(v), o).wire.bytes_sent;
    EXPECT_EQ(fp32, 2 * (p - 1) * n / p * sizeof(float));
    // A chunk is n/p values, whole rows of 512: 256 bytes of codes + 8 of scale
    // and bias a row, 2048 / 264 = 7.76x fewer than fp32.
    EXPECT_EQ(q4, 2 * (p - 1) * (n / p / 512) * (512 / 2 + 8));
    EXPECT_GE(static_cast<double>(fp32) / static_cast<double>(q4), 7.0);
  });
}

TEST(QuantizedAlltoall, RoundTripWithinHalfAStep) {
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    const std::size_t dim = 16, rows = 10, block = dim * rows;
    test::run_ranks(p, [&](Transport& t) {
      std::vector<float> in(block * p), out(block * p);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.37f * i + 1.3f * t.rank());
      for (int bits : {8, 4, 2}) {
        QuantizedAlltoallOptions o;
        o.codec = rowwise(bits, false, dim);
        quantized_alltoall(t, std::span<const float>(in), std::span<float>(out), o);
        for (int s = 0; s < p; ++s)
          for (std::size_t row = 0; row < rows; ++row) {
            // What rank s sent me: row `row` of its block for me.
            float lo = 1e9f, hi = -1e9f;
            std::vector<float> sent(dim);
            for (std::size_t j = 0; j < dim; ++j) {
              const std::size_t idx = t.rank() * block + row * dim + j;
              sent[j] = std::sin(0.37f * idx + 1.3f * s);
              lo = std::min(lo, sent[j]);
              hi = std::max(hi, sent[j]);
            }
            const double half = s == t.rank() ? 0 : (hi - lo) / ((1 << bits) - 1) / 2;
            for (std::size_t j = 0; j < dim; ++j)
              ASSERT_LE(std::abs(out[s * block + row * dim + j] - sent[j]), half * 1.001 + 1e-6);
          }
      }
    });
  }
}

// Rows of 4 values; rank s sends (s + d) % 3 rows to rank d, some none.
TEST(QuantizedAlltoallv, VariableRowCounts) {
  for (int p : {1, 2, 3, 5}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      const std::size_t row = 4;
      auto rows = [](int s, int d) { return static_cast<std::size_t>((s + d) % 3); };
      auto value = [](int s, int d, std::size_t i) { return static_cast<float>(s * 100 + d * 10) + 0.25f * i; };
      std::vector<std::size_t> sr(p), rr(p);
      std::vector<float> in;
      for (int d = 0; d < p; ++d) {
        sr[d] = rows(t.rank(), d);
        rr[d] = rows(d, t.rank());
        for (std::size_t i = 0; i < sr[d] * row; ++i) in.push_back(value(t.rank(), d, i));
      }
      std::size_t total = 0;
      for (auto x : rr) total += x;
      std::vector<float> out(total * row);
      QuantizedAlltoallOptions o;
      o.codec = rowwise(8, false, row);
      std::vector<std::size_t> sc(p), rc(p);  // in values
      for (int j = 0; j < p; ++j) sc[j] = sr[j] * row, rc[j] = rr[j] * row;
      quantized_alltoallv(t, in, sc, out, rc, o);
      std::size_t at = 0;
      for (int s = 0; s < p; ++s)
        for (std::size_t i = 0; i < rr[s] * row; ++i, ++at) {
          // Each row spans 0.75: 8 bits put every value within 0.75/255/2.
          ASSERT_NEAR(out[at], value(s, t.rank(), i), 0.75 / 255 / 2 * 1.01 + 1e-4) << "from " << s;
        }
    });
  }
}

// QSGD in the alltoall: what rank s sends rank d at step k is a pure function
// of (k, stream, s, d, run), so every rank's result equals the sequential
// emulation below (any rank can recompute what another drew), the same step
// draws the same rounding and the next step another. Over many steps the
// mean of what arrives converges to what was sent: unbiased, with fresh noise
// every step (a rounding drawn once would keep its error for ever).
TEST(QuantizedAlltoallv, QsgdDrawsEachStepAfresh) {
  const std::size_t n = 40, runs = 2, len = n / runs;  // to each peer: 2 runs of 20, buckets of 8, 8 and 4
  Codec c = parse_codec("qsgd4");
  c.qsgd.bucket = 8;
  const double levels = 7;  // 4 bits: 2^3 - 1 magnitude levels
  auto value = [](int s, int d, std::size_t i) { return std::sin(0.7f * static_cast<float>(i) + 1.1f * s + 0.3f * d); };
  for (int p : {2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      const int me = t.rank();
      std::vector<float> in(n * p), out(n * p);
      for (int d = 0; d < p; ++d)
        for (std::size_t i = 0; i < n; ++i) in[d * n + i] = value(me, d, i);
      const std::vector<std::size_t> counts(p, n), run_counts(p, runs);
      QuantizedAlltoallOptions o{.codec = c, .stream = "test", .send_runs = run_counts, .recv_runs = run_counts};
      auto at_step = [&](std::uint64_t k) {
        o.step = k;
        quantized_alltoallv(t, in, counts, out, counts, o);
        return out;
      };
      // What rank s sends me at step k, run by run.
      auto emulate = [&](int s, std::uint64_t k) {
        std::vector<float> x(n), y(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = value(s, me, i);
        std::vector<std::byte> b(c.bytes(len));
        for (std::size_t r = 0; r < runs; ++r) {
          c.encode(std::span<const float>(x).subspan(r * len, len), b, k, quantized_alltoall_key("test", s, me, r));
          c.decode(b, std::span<float>(y).subspan(r * len, len));
        }
        return y;
      };
      const auto first = at_step(0), again = at_step(0), next = at_step(1);
      EXPECT_EQ(first, again) << "the same step draws the same rounding";
      std::size_t moved = 0;
      for (int s = 0; s < p; ++s) {
        const std::vector<float> want0 = s == me ? std::vector<float>(in.begin() + s * n, in.begin() + (s + 1) * n)
                                                 : emulate(s, 0);
        const std::vector<float> want1 = s == me ? want0 : emulate(s, 1);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(first[s * n + i], want0[i]) << "from " << s << " at " << i;
          ASSERT_EQ(next[s * n + i], want1[i]) << "from " << s << " at " << i;
          moved += first[s * n + i] != next[s * n + i];
        }
      }
      // Two independent roundings of a value a fraction f above a level differ
      // with probability 2f(1 - f), a third on average.
      EXPECT_GE(moved, (p - 1) * n / 8) << "step 1 must round other values than step 0";
      // The mean over T steps: each draw errs by at most norm/levels (norm: the
      // L2 norm of the value's bucket), so its variance is at most
      // (norm/levels)^2/4 and 6 standard deviations of the mean bound it.
      const int steps = 400;
      std::vector<double> mean(n * p, 0.0);
      for (int k = 2; k < 2 + steps; ++k) {
        const auto got = at_step(static_cast<std::uint64_t>(k));
        for (std::size_t i = 0; i < got.size(); ++i) mean[i] += got[i] / static_cast<double>(steps);
      }
      for (int s = 0; s < p; ++s) {
        if (s == me) continue;
        for (std::size_t r = 0; r < runs; ++r)
          for (std::size_t b0 = r * len; b0 < (r + 1) * len; b0 += c.qsgd.bucket) {
            const std::size_t b1 = std::min(b0 + c.qsgd.bucket, (r + 1) * len);  // a bucket of run r
            double norm = 0;
            for (std::size_t i = b0; i < b1; ++i) norm += double(value(s, me, i)) * value(s, me, i);
            norm = std::sqrt(norm);
            const double bound = 6 * norm / levels / 2 / std::sqrt(double(steps)) + 1e-6;
            for (std::size_t i = b0; i < b1; ++i)
              ASSERT_NEAR(mean[s * n + i], value(s, me, i), bound) << "from " << s << " at " << i;
          }
      }
    });
  }
}

TEST(QuantizedAllreduce, BadInput) {
  SPARQ_LOCAL_ONLY();
  EXPECT_THROW(parse_codec("q3"), InputError);
  EXPECT_THROW(parse_codec("qsgd5"), InputError);
  EXPECT_THROW(parse_quant_algo("tree"), InputError);
  for (const char* bad : {"q4+ec-skip", "q4+ec-skip-first+ec", "q4+ec+ec", "fp32+ec", "q4+EC"}) {
    try {
      parse_codec(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const InputError& e) {  // one line that lists the valid spellings
      EXPECT_NE(std::string(e.what()).find("+ec or +ec-skip-first"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  for (const char* good : {"q8", "q4+ec", "q2+ec-skip-first"}) EXPECT_EQ(parse_codec(good).name(), good);
  EXPECT_FALSE(parse_codec("q2+ec-skip-first").ec_first_hop);
  EXPECT_TRUE(parse_codec("q2+ec").ec_first_hop);
  run_local(2, [](Transport& t) {
    std::vector<float> v(8);
    QuantizedAllreduceOptions o;
    o.codec = parse_codec("q4+ec");  // no residual store given
    EXPECT_THROW(quantized_allreduce(t, std::span<float>(v), o), InputError);
  });
  run_local(6, [](Transport& t) {
    std::vector<float> v(8);
    QuantizedAllreduceOptions o;
    o.algo = QuantAlgo::RecursiveDoubling;  // 6 = 6 * 2^0 works; group 4 does not divide 6
    o.group = 4;
    EXPECT_THROW(quantized_allreduce(t, std::span<float>(v), o), InputError);
  });
  run_local(2, [](Transport& t) {
    std::vector<float> v(8);
    compress::ErrorFeedbackStore store;
    QuantizedAllreduceOptions o;
    o.algo = QuantAlgo::RecursiveDoubling;  // skipping the first hop is the ring's (Algorithm 2)
    o.codec = parse_codec("q4+ec-skip-first");
    o.residuals = &store;
    EXPECT_THROW(quantized_allreduce(t, std::span<float>(v), o), InputError);
  });
}

}  // namespace
}  // namespace sparq
