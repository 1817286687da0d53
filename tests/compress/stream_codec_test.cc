// The stream wire format: round trips, one rejection per kind of corruption,
// and a fuzz-style sweep (random and mutated messages never crash: they decode
// to a valid stream or throw WireError).
#include "sparq/compress/stream_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "sparq/compress/half.h"
#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

std::vector<std::byte> encode(const SparseStream& s, ValueFormat vf = ValueFormat::F32) {
  std::vector<std::byte> w(encoded_size(s, vf));
  encode_stream(s, w, vf);
  return w;
}

void put_u32(std::vector<std::byte>& w, std::size_t off, std::uint32_t v) { std::memcpy(w.data() + off, &v, 4); }

// LEB128 written out independently of the codec: 7 bits a byte, low first.
void put_varint(std::vector<std::byte>& w, std::uint64_t v) {
  do {
    w.push_back(std::byte{static_cast<std::uint8_t>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0))});
    v >>= 7;
  } while (v);
}

// A delta-varint message by hand: the first index, then gaps minus one.
std::vector<std::byte> handmade_varint(std::uint32_t dim, const std::vector<std::uint64_t>& deltas,
                                       const std::vector<float>& val) {
  std::vector<std::byte> w(12);
  w[0] = std::byte{1};
  w[1] = std::byte{0x80};
  put_u32(w, 4, dim);
  put_u32(w, 8, static_cast<std::uint32_t>(deltas.size()));
  for (auto d : deltas) put_varint(w, d);
  for (float v : val) {
    std::byte bytes[4];
    std::memcpy(bytes, &v, 4);
    w.insert(w.end(), bytes, bytes + 4);
  }
  return w;
}

// Header and body written by hand from the documented layout.
std::vector<std::byte> handmade(std::uint8_t kind, std::uint8_t c, std::uint32_t dim,
                                const std::vector<std::uint32_t>& idx, const std::vector<float>& val) {
  std::vector<std::byte> w(12);
  w[0] = std::byte{kind};
  w[1] = std::byte{c};
  put_u32(w, 4, dim);
  put_u32(w, 8, static_cast<std::uint32_t>(kind == 2 ? val.size() : idx.size()));
  for (auto i : idx)
    for (std::size_t b = 0; b < c; ++b) w.push_back(std::byte{static_cast<std::uint8_t>(i >> (8 * b))});
  for (float v : val) {
    std::byte bytes[4];
    std::memcpy(bytes, &v, 4);
    w.insert(w.end(), bytes, bytes + 4);
  }
  return w;
}

TEST(StreamCodec, EncodesTheDocumentedLayout) {
  // Both numbers need 2 varint bytes (130, then 168): fixed width on the tie.
  const SparseStream s = SparseStream::sparse(300, {130, 299}, {1.5f, -2.0f});
  EXPECT_EQ(encode(s), handmade(1, 2, 300, {130, 299}, {1.5f, -2.0f}));
  EXPECT_EQ(encode(SparseStream::dense({1.0f, 2.0f})), handmade(2, 0, 2, {}, {1.0f, 2.0f}));
}

TEST(StreamCodec, PicksDeltaVarintWhenShorter) {
  // dim 100000 (fixed width 4): gaps 1, 127, 128 and 16384 take 1, 1, 2 and 3 bytes.
  const SparseStream s = SparseStream::sparse(100000, {5, 6, 134, 263, 16648}, {1, 2, 3, 4, 5});
  EXPECT_EQ(encode(s), handmade_varint(100000, {5, 0, 127, 128, 16384}, {1, 2, 3, 4, 5}));
  EXPECT_EQ(encoded_size(s), 12u + (1 + 1 + 1 + 2 + 3) + 5 * 4);
  // Far apart: varint 1 + 5 bytes against fixed 4 + 4.
  const SparseStream far = SparseStream::sparse(4000000000u, {0, 3999999999u}, {1, 2});
  EXPECT_EQ(encode(far), handmade_varint(4000000000u, {0, 3999999998u}, {1, 2}));
  // Both numbers need 5 bytes: fixed width wins.
  const SparseStream wide = SparseStream::sparse(4000000000u, {300000000u, 3999999999u}, {1, 2});
  EXPECT_EQ(encode(wide), handmade(1, 4, 4000000000u, {300000000u, 3999999999u}, {1, 2}));
  // One-byte indices are never beaten.
  EXPECT_EQ(encode(SparseStream::sparse(200, {0, 1}, {1, 2})), handmade(1, 1, 200, {0, 1}, {1, 2}));
}

// A stream within delta can still encode larger than dense where one wide
// gap makes a long varint; densify_if_smaller goes by the exact size.
TEST(StreamCodec, DensifyIfSmallerGoesByTheExactSize) {
  // dim 1000, f32: delta = 800 pairs; dense = 12 + 4000 bytes.
  std::vector<std::uint32_t> idx(800);
  for (std::uint32_t i = 0; i < 800; ++i) idx[i] = i;
  const std::vector<float> val(800, 1.5f);
  SparseStream tight = SparseStream::sparse(1000, idx, val);
  ASSERT_EQ(encode(tight).size(), 12u + 800 + 3200);  // one varint byte per index: a tie, stays sparse
  densify_if_smaller(tight, ValueFormat::F32);
  EXPECT_FALSE(tight.is_dense());
  idx.back() = 999;  // gap 200: a two-byte varint
  SparseStream wide = SparseStream::sparse(1000, idx, val);
  ASSERT_EQ(encode(wide).size(), 12u + 801 + 3200);
  densify_if_smaller(wide, ValueFormat::F32);
  ASSERT_TRUE(wide.is_dense());
  EXPECT_EQ(encode(wide).size(), 12u + 4000);
  std::vector<float> want(1000, 0.0f);
  for (std::uint32_t i : idx) want[i] = 1.5f;
  EXPECT_TRUE(std::ranges::equal(wide.values(), want));
  // In fp8 the same stream (800 > delta = 500) is far larger than dense.
  SparseStream small = SparseStream::sparse(1000, idx, val);
  densify_if_smaller(small, ValueFormat::Fp8);
  EXPECT_TRUE(small.is_dense());
}

TEST(StreamCodec, Bf16ValuesRoundToNearestEven) {
  // Exact bf16 values survive; others go to the nearer neighbour, ties to the even one.
  // (bf16's ulp at 1 is 2^-7.)
  const float in[] = {1.0f, -2.5f, 1.0f + 0x1p-8f, 1.0f + 0x1p-7f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 3e38f,
                      1e-40f, std::numeric_limits<float>::infinity()};
  const float want[] = {1.0f, -2.5f, 1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f};
  const SparseStream s = SparseStream::sparse(8, {0, 1, 2, 3, 4, 5, 6, 7}, std::vector<float>(in, in + 8));
  const std::vector<std::byte> w = encode(s, ValueFormat::Bf16);
  EXPECT_EQ(w.size(), 12u + 8 + 8 * 2);
  EXPECT_EQ(w[2], std::byte{1});
  const SparseStream d = decode_stream(w);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(d.values()[i], want[i]) << i;
  EXPECT_NEAR(d.values()[5], 3e38f, 3e38f * 0x1p-8f);
  EXPECT_LT(std::fabs(d.values()[6]), 1e-39f);  // bf16 keeps float's subnormal range, at 8 bits
  EXPECT_TRUE(std::isinf(d.values()[7]));
  SparseStream r = s;
  round_values(r, ValueFormat::Bf16);
  EXPECT_EQ(encode(r), encode(d));  // what the sender holds == what peers decode
  EXPECT_TRUE(std::isnan(decode_stream(encode(SparseStream::dense({std::nanf("")}), ValueFormat::Bf16)).values()[0]));
}

TEST(StreamCodec, Fp8ValuesShareAPowerOfTwoScale) {
  // max 3.0 = 0.75 * 2^2: scale 2^-6 puts it at 192, in (128, 256].
  const std::vector<float> in = {3.0f, -1.1f, 0.01f, 1e-7f, 0.0f};
  const SparseStream s = SparseStream::sparse(100, {1, 5, 9, 20, 30}, in);
  const std::vector<std::byte> w = encode(s, ValueFormat::Fp8);
  ASSERT_EQ(w.size(), 12u + 5 + 5);
  EXPECT_EQ(w[2], std::byte{2});
  EXPECT_EQ(static_cast<std::int8_t>(w[3]), -6);
  const SparseStream d = decode_stream(w);
  EXPECT_EQ(d.values()[0], 3.0f);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float want = std::ldexp(e4m3_to_float(float_to_e4m3(std::ldexp(in[i], 6))), -6);
    EXPECT_EQ(d.values()[i], want) << i;
    // Relative error <= 2^-4 down to the normal range (2^-6 * 2^-6 here); below, flushed toward 0.
    if (std::fabs(in[i]) >= 0x1p-12f) {
      EXPECT_LE(std::fabs(d.values()[i] - in[i]), std::fabs(in[i]) * 0x1p-4f) << i;
    }
  }
  EXPECT_EQ(d.values()[3], 0.0f);
  SparseStream r = s;
  round_values(r, ValueFormat::Fp8);
  EXPECT_TRUE(std::ranges::equal(r.values(), d.values()));
  EXPECT_THROW(encode(SparseStream::sparse(10, {1}, {std::numeric_limits<float>::infinity()}), ValueFormat::Fp8),
               InputError);
  EXPECT_EQ(encode(SparseStream::sparse(10, {1}, {0.0f}), ValueFormat::Fp8)[3], std::byte{0});
  // Float's largest: the message scale 2^120 puts it at 256 after rounding,
  // beyond float; it takes the code below (240 * 2^120).
  const float top = std::numeric_limits<float>::max();
  const SparseStream big = decode_stream(encode(SparseStream::sparse(10, {1, 2}, {top, -top}), ValueFormat::Fp8));
  EXPECT_EQ(big.values()[0], std::ldexp(240.0f, 120));
  EXPECT_EQ(big.values()[1], -std::ldexp(240.0f, 120));
  // Codes no encoder writes are refused: NaN's (0x7f, 0xff), and 256 at that scale.
  for (std::uint8_t code : {0x7f, 0xff, 0x78}) {
    auto bad = encode(SparseStream::sparse(10, {1, 2}, {top, 2.0f}), ValueFormat::Fp8);
    bad.back() = std::byte{code};
    EXPECT_THROW(decode_stream(bad), WireError) << int{code};
  }
}

// The nearest fp4 value to x (E2M1 magnitudes times 2^e), ties to the code
// with mantissa bit 0: a search over the grid, the independent reference.
float nearest_fp4(float x, int e) {
  const double grid[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  int best = 0;
  const double ax = std::fabs(static_cast<double>(x));
  for (int c = 1; c < 8; ++c) {
    const double d = std::fabs(grid[c] * std::ldexp(1.0, e) - ax), db = std::fabs(grid[best] * std::ldexp(1.0, e) - ax);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  const float m = static_cast<float>(grid[best] * std::ldexp(1.0, e));
  return best == 0 ? 0.0f : (x < 0 ? -m : m);
}

TEST(StreamCodec, Fp4ValuesTakeAPowerOfTwoScaleEach32) {
  // 70 values: groups of 32, 32 and 6. The first group's largest, 11.5,
  // needs e = 1 (6 * 2^0 < 11.5 <= 6 * 2^1); the second holds ties and
  // flushes at its scale 2^-2 (largest 1.5); the third is all zeros.
  std::vector<float> in(70, 0.0f);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (std::size_t i = 0; i < 32; ++i) in[i] = std::clamp(nd(rng), -7.0f, 7.0f);
  in[3] = -11.5f;
  // At 2^-2 these are the midpoints 0.25, 0.75, 1.25, 5, -2.5, 3.5 and 1.75 of the grid.
  const float second[] = {1.5f, 0.0625f, 0.1875f, 0.3125f, 1.25f, -0.625f, 0.875f, 1e-30f, -1e-30f, 0.4375f};
  std::copy(std::begin(second), std::end(second), in.begin() + 32);
  std::vector<std::uint32_t> idx(70);
  for (std::uint32_t i = 0; i < 70; ++i) idx[i] = 3 * i;
  const SparseStream s = SparseStream::sparse(300, idx, in);
  const std::vector<std::byte> w = encode(s, ValueFormat::Fp4);
  const std::size_t values_at = w.size() - (1 + 16) - (1 + 16) - (1 + 3);
  ASSERT_EQ(w.size(), 12u + 70 + (1 + 16) * 2 + (1 + 3));  // varint gaps of 2: a byte each
  EXPECT_EQ(w[2], std::byte{3});
  EXPECT_EQ(w[3], std::byte{0});
  EXPECT_EQ(static_cast<std::int8_t>(w[values_at]), 1);
  EXPECT_EQ(static_cast<std::int8_t>(w[values_at + 17]), -2);
  EXPECT_EQ(static_cast<std::int8_t>(w[values_at + 34]), 0);
  const SparseStream d = decode_stream(w);
  const int scales[] = {1, -2, 0};
  for (std::size_t i = 0; i < 70; ++i) EXPECT_EQ(d.values()[i], nearest_fp4(in[i], scales[i / 32])) << i;
  EXPECT_EQ(d.values()[3], -6.0f * 2);  // the largest is never clipped
  const float second_want[] = {1.5f, 0.0f, 0.25f, 0.25f, 1.0f, -0.5f, 1.0f, 0.0f, 0.0f, 0.5f};
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(d.values()[32 + i], second_want[i]) << i;
  EXPECT_FALSE(std::signbit(d.values()[40]));  // -1e-30 flushes to +0
  SparseStream r = s;
  round_values(r, ValueFormat::Fp4);
  EXPECT_TRUE(std::ranges::equal(r.values(), d.values()));  // what the sender holds == what peers decode
  EXPECT_THROW(encode(SparseStream::sparse(10, {1}, {std::numeric_limits<float>::quiet_NaN()}), ValueFormat::Fp4),
               InputError);
  // Near float's largest the code below where rounding up would overflow.
  const float top = std::numeric_limits<float>::max();
  const SparseStream big = decode_stream(encode(SparseStream::sparse(10, {1, 2}, {top, -top}), ValueFormat::Fp4));
  EXPECT_EQ(big.values()[0], std::ldexp(3.0f, 126));
  EXPECT_EQ(big.values()[1], -std::ldexp(3.0f, 126));
  auto beyond = encode(SparseStream::sparse(10, {1}, {top}), ValueFormat::Fp4);
  beyond.back() = std::byte{0x06};  // 4 * 2^126 = 2^128
  EXPECT_THROW(decode_stream(beyond), WireError);
  auto neg_zero = encode(SparseStream::sparse(10, {1, 2}, {1.0f, 0.0f}), ValueFormat::Fp4);
  neg_zero.back() = std::byte{0x84};  // codes 4 (1.0) and 8 (-0)
  EXPECT_THROW(decode_stream(neg_zero), WireError);
}

// Rounding twice is rounding once, in every format: what a sender rounded
// (DCT-DP's pairs, their rounding fed back) is re-encoded by the sparse
// allreduce without losing more. fp8's scale is the case: a largest value
// that rounds up to a power of two (250 -> 256) keeps the message's scale.
TEST(StreamCodec, RoundedValuesRoundToThemselves) {
  std::mt19937 rng(7);
  std::vector<std::vector<float>> sets = {{250.0f, 3.0f, -1.0f}, {256.0f, 0.7f}, {-255.0f, 100.0f, 1e-3f},
                                          {std::numeric_limits<float>::max(), 1.0f}, {1e-30f, 3e-31f}};
  for (int k = 0; k < 50; ++k) {
    std::vector<float> v(1 + rng() % 100);
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    for (float& x : v) x = (static_cast<float>(rng() % 20001) - 10000.0f) / 37.0f * scale;
    sets.push_back(v);
  }
  for (const auto vf : {ValueFormat::Bf16, ValueFormat::Fp8, ValueFormat::Fp4}) {
    for (const auto& v : sets) {
      std::vector<float> once = v;
      round_values(once, vf);
      std::vector<float> twice = once;
      round_values(twice, vf);
      for (std::size_t i = 0; i < v.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(once[i]), std::bit_cast<std::uint32_t>(twice[i]))
            << static_cast<int>(vf) << " value " << v[i];
    }
  }
  std::vector<float> carried = {250.0f, 1.0f};
  round_values(carried, ValueFormat::Fp8);
  EXPECT_EQ(carried[0], 256.0f);
  const auto w = encode(SparseStream::sparse(10, {1, 2}, {256.0f, 1.0f}), ValueFormat::Fp8);
  EXPECT_EQ(static_cast<std::int8_t>(w[3]), 0);  // 256 lands on 256: scale 2^0, as for 250
}

TEST(StreamCodec, RoundTripsEveryIndexWidth) {
  for (std::size_t dim : {1u, 256u, 257u, 65536u, 65537u, 1000000u}) {
    std::vector<std::uint32_t> idx;
    std::vector<float> val;
    for (std::size_t i = 0; i < dim; i += 1 + dim / 7) idx.push_back(static_cast<std::uint32_t>(i)), val.push_back(float(i) + 0.5f);
    idx.back() = static_cast<std::uint32_t>(dim - 1);
    const SparseStream s = SparseStream::sparse(dim, idx, val);
    const SparseStream d = decode_stream(encode(s));
    EXPECT_FALSE(d.is_dense());
    EXPECT_EQ(d.dim(), dim);
    EXPECT_EQ(std::vector(d.indices().begin(), d.indices().end()), idx);
    EXPECT_EQ(std::vector(d.values().begin(), d.values().end()), val);
    EXPECT_EQ(encode(d), encode(s));
  }
  const SparseStream dense = SparseStream::dense({3.0f, 0.0f, -1.0f});
  EXPECT_EQ(encode(decode_stream(encode(dense))), encode(dense));
  EXPECT_EQ(decode_stream(encode(SparseStream(0))).dim(), 0u);
}

TEST(StreamCodec, RejectsEachKindOfCorruption) {
  const auto good = handmade(1, 2, 300, {2, 7, 299}, {1, 2, 3});
  ASSERT_NO_THROW(decode_stream(good));
  auto expect_wire_error = [](std::vector<std::byte> w) { EXPECT_THROW(decode_stream(w), WireError); };
  expect_wire_error({});                                                  // empty
  expect_wire_error(std::vector<std::byte>(good.begin(), good.begin() + 11));  // short header
  expect_wire_error(std::vector<std::byte>(good.begin(), good.end() - 1));     // truncated body
  auto longer = good;
  longer.push_back(std::byte{0});
  expect_wire_error(longer);                                          // trailing bytes
  expect_wire_error(handmade(3, 2, 300, {2, 7, 299}, {1, 2, 3}));     // unknown kind
  expect_wire_error(handmade(1, 4, 300, {2, 7, 299}, {1, 2, 3}));     // index width not the dim's
  expect_wire_error(handmade(1, 2, 300, {2, 7, 300}, {1, 2, 3}));     // index out of range
  expect_wire_error(handmade(1, 2, 300, {7, 2, 299}, {1, 2, 3}));     // unsorted
  expect_wire_error(handmade(1, 2, 300, {2, 2, 299}, {1, 2, 3}));     // duplicate
  expect_wire_error(handmade(1, 1, 2, {0, 1, 1}, {1, 2, 3}));         // more pairs than dim
  expect_wire_error(handmade(2, 1, 3, {}, {1, 2, 3}));                // dense with c != 0
  auto scaled = good;
  scaled[3] = std::byte{1};  // a scale byte on f32 values
  expect_wire_error(scaled);
  auto format = good;
  format[2] = std::byte{4};  // unknown value format
  expect_wire_error(format);
  auto coding = good;
  coding[1] = std::byte{0x81};  // unknown index coding
  expect_wire_error(coding);
  expect_wire_error(handmade(2, 0x80, 3, {}, {1, 2, 3}));             // dense with a varint run
  ASSERT_NO_THROW(decode_stream(handmade_varint(300, {2, 4, 291}, {1, 2, 3})));
  expect_wire_error(handmade_varint(300, {2, 4, 292}, {1, 2, 3}));              // delta past dim
  expect_wire_error(handmade_varint(300, {2, 0xffffffffu, 0}, {1, 2, 3}));      // sum wraps 32 bits
  expect_wire_error(handmade_varint(300, {2, 1ull << 35, 0}, {1, 2, 3}));       // 6-byte varint
  auto cut = handmade_varint(300, {2, 4, 5}, {1, 2, 3});
  cut[12 + 2] |= std::byte{0x80};  // last varint continues into the values
  expect_wire_error(cut);
  auto extra = handmade_varint(300, {2, 4, 5}, {1, 2, 3});
  extra.insert(extra.begin() + 12, std::byte{0});  // a fourth index byte: run not consumed
  expect_wire_error(extra);
  auto dense_count = handmade(2, 0, 3, {}, {1, 2, 3});
  put_u32(dense_count, 8, 2);  // dense n != dim
  expect_wire_error(dense_count);
  auto huge = good;
  put_u32(huge, 8, 0xffffffffu);  // n claims 4G pairs: size check, no allocation
  expect_wire_error(huge);
}

// Decoding either succeeds with a stream that survives re-encoding in its
// value format (bit for bit, NaN payloads aside: f32 and bf16 carry NaN,
// and bf16's encoder quiets a signalling one; the index coding may change
// to the shorter one), or throws WireError; anything else (crash, other
// exception) fails.
void decode_or_reject(const std::vector<std::byte>& w) {
  try {
    const SparseStream s = decode_stream(w);
    const auto vf = static_cast<ValueFormat>(w[2]);
    const SparseStream again = decode_stream(encode(s, vf));
    ASSERT_EQ(again.is_dense(), s.is_dense());
    ASSERT_TRUE(std::ranges::equal(again.indices(), s.indices()));
    ASSERT_EQ(again.nnz(), s.nnz());
    for (std::size_t i = 0; i < s.nnz(); ++i) {
      const float a = again.values()[i], b = s.values()[i];
      ASSERT_TRUE((std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b));
    }
  } catch (const WireError&) {
  }
}

TEST(StreamCodec, FuzzRandomAndMutatedMessagesNeverCrash) {
  std::mt19937 rng(1234);
  const std::vector<std::vector<std::byte>> seeds = {
      handmade(1, 2, 300, {2, 7, 299}, {1, 2, 3}), handmade(1, 1, 200, {0, 199}, {1, 2}),
      handmade(1, 4, 70000, {5, 69999}, {1, 2}), handmade(2, 0, 4, {}, {1, 2, 3, 4}), handmade(1, 1, 5, {}, {}),
      handmade_varint(70000, {5, 200, 69000}, {1, 2, 3}), encode(SparseStream::sparse(300, {2, 7}, {1, 2}), ValueFormat::Bf16),
      encode(SparseStream::sparse(300, {2, 7, 100}, {1, -2.5f, 1e-3f}), ValueFormat::Fp8),
      encode(SparseStream::sparse(300, {2, 7, 100}, {1, -2.5f, 1e-3f}), ValueFormat::Fp4)};
  for (int iter = 0; iter < 100000; ++iter) {
    std::vector<std::byte> w;
    if (iter % 4 == 0) {
      w.resize(rng() % 64);
      for (auto& b : w) b = std::byte{static_cast<std::uint8_t>(rng())};
      if (w.size() >= 4 && rng() % 2) w[0] = std::byte{static_cast<std::uint8_t>(1 + rng() % 2)}, w[2] = w[3] = std::byte{0};
    } else {
      w = seeds[rng() % seeds.size()];
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips && !w.empty(); ++f) w[rng() % w.size()] ^= std::byte{static_cast<std::uint8_t>(1u << (rng() % 8))};
      if (rng() % 8 == 0) w.resize(rng() % (w.size() + 9));
    }
    decode_or_reject(w);
  }
}

}  // namespace
}  // namespace sparq::compress
