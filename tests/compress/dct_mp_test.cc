// DCT-MP (Algorithm 2) against a per-row full sort, and its wire format.
#include "tests/compress/random_data.h"
#include "sparq/compress/dct_mp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "sparq/compress/topk.h"
#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

using test::normal;

// Reference mask of one row: columns of the keep largest |x|, ties to lower columns.
std::vector<bool> ref_row(const float* x, std::size_t d, std::size_t keep) {
  std::vector<std::size_t> c(d);
  std::iota(c.begin(), c.end(), 0u);
  std::stable_sort(c.begin(), c.end(), [&](auto a, auto b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  std::vector<bool> m(d, false);
  for (std::size_t i = 0; i < keep; ++i) m[c[i]] = true;
  return m;
}

TEST(DctMp, KeepsExactlyCeilOneMinusEtaTimesDPerRow) {
  for (std::size_t d : {1u, 7u, 20u, 512u})
    for (double eta : {0.0, 0.5, 0.75, 0.95, 1.0}) {
      const std::size_t rows = 9;
      const auto act = normal(rows * d, static_cast<unsigned>(d));
      const RowMask m = dct_mp_select(act, d, eta);
      const std::size_t keep = static_cast<std::size_t>(std::ceil((1 - eta) * d - 1e-9));
      ASSERT_EQ(m.keep(), keep) << d << " " << eta;
      for (std::size_t r = 0; r < rows; ++r) {
        const auto ref = ref_row(act.data() + r * d, d, keep);
        for (std::size_t c = 0; c < d; ++c) ASSERT_EQ(m.test(r, c), ref[c]) << r << " " << c;
      }
    }
}

TEST(DctMp, TiesGoToLowerColumns) {
  const std::vector<float> act{1, 1, 1, 1, 2, -2, 0.5f, 2};  // 2 rows of 4
  const RowMask m = dct_mp_select(act, 4, 0.5);                  // keep 2 per row
  EXPECT_TRUE(m.test(0, 0) && m.test(0, 1) && !m.test(0, 2) && !m.test(0, 3));
  EXPECT_TRUE(m.test(1, 0) && m.test(1, 1) && !m.test(1, 2) && !m.test(1, 3));
}

TEST(DctMp, GradientUsesTheForwardMask) {
  const std::size_t rows = 16, d = 64;
  const auto act = normal(rows * d, 1), grad = normal(rows * d, 2);
  const RowMask m = dct_mp_select(act, d, 0.9);
  std::vector<float> fwd(rows * m.keep()), bwd(rows * m.keep()), dense_a(rows * d), dense_g(rows * d);
  dct_mp_gather(m, act, fwd);
  dct_mp_gather(m, grad, bwd);
  dct_mp_scatter(m, fwd, dense_a);
  dct_mp_scatter(m, bwd, dense_g);
  for (std::size_t i = 0; i < rows * d; ++i) {
    const bool kept = m.test(i / d, i % d);
    ASSERT_EQ(dense_a[i], kept ? act[i] : 0.0f);
    ASSERT_EQ(dense_g[i], kept ? grad[i] : 0.0f);  // same positions backward
    ASSERT_EQ(dense_g[i] != 0.0f || grad[i] == 0.0f, kept);
  }
}

TEST(DctMp, WireRoundTripAndRejections) {
  const std::size_t rows = 3, d = 13;
  const auto act = normal(rows * d, 3);
  const RowMask m = dct_mp_select(act, d, 0.7);
  std::vector<float> vals(rows * m.keep());
  dct_mp_gather(m, act, vals);
  std::vector<std::byte> wire(dct_mp_message_bytes(rows, d, m.keep()));
  ASSERT_EQ(wire.size(), rows * 2 + rows * m.keep() * 4);
  dct_mp_encode(m, vals, wire);
  RowMask back;
  std::vector<float> vals_back(vals.size());
  dct_mp_decode(wire, rows, d, m.keep(), back, vals_back);
  EXPECT_EQ(vals_back, vals);
  EXPECT_TRUE(std::equal(back.bytes().begin(), back.bytes().end(), m.bytes().begin(), m.bytes().end()));

  EXPECT_THROW(decode_row_mask(std::span(wire).first(wire.size() - 1), rows, d, m.keep()), WireError);
  auto extra_bit = wire;
  for (std::size_t c = 0; c < 8; ++c)  // set one more column in row 0
    if (!m.test(0, c)) {
      extra_bit[0] |= std::byte{static_cast<std::uint8_t>(1u << c)};
      break;
    }
  EXPECT_THROW(decode_row_mask(extra_bit, rows, d, m.keep()), WireError);
  auto padding = wire;
  padding[1] |= std::byte{0x80};  // column 15 of row 0 does not exist (d = 13)
  EXPECT_THROW(decode_row_mask(padding, rows, d, m.keep()), WireError);
  EXPECT_THROW(decode_row_mask(wire, rows, d, d + 1), WireError);
}

TEST(DctMp, Bf16ValuesRoundToNearestEvenAndHalveTheValueBytes) {
  const std::size_t rows = 4, d = 21;
  auto act = normal(rows * d, 5);
  // Exact halfway cases between two bf16 neighbours (last kept mantissa bit 0
  // then 1): 1 + 2^-8 rounds down to 1, 1 + 3 * 2^-8 up to 1 + 2^-6.
  act[0] = 128.0f * (1.0f + 0x1p-8f);
  act[1] = -128.0f * (1.0f + 3 * 0x1p-8f);
  const RowMask m = dct_mp_select(act, d, 0.8);
  std::vector<float> vals(rows * m.keep());
  dct_mp_gather(m, act, vals);
  std::vector<std::byte> wire(dct_mp_message_bytes(rows, d, m.keep(), ValueFormat::Bf16));
  ASSERT_EQ(wire.size(), rows * 3 + rows * m.keep() * 2);
  dct_mp_encode(m, vals, wire, ValueFormat::Bf16);
  RowMask back;
  std::vector<float> got(vals.size());
  dct_mp_decode(wire, rows, d, m.keep(), back, got, ValueFormat::Bf16);
  EXPECT_EQ(got[0], 128.0f);  // row 0 keeps columns 0 and 1 first (the largest two)
  EXPECT_EQ(got[1], -128.0f * (1.0f + 0x1p-6f));
  for (std::size_t i = 0; i < vals.size(); ++i) {
    const float rel = std::abs(got[i] - vals[i]) / std::abs(vals[i]);
    ASSERT_LE(rel, 0x1p-8f) << i;  // half a unit in bf16's 8-bit mantissa
  }
  EXPECT_THROW(dct_mp_decode(wire, rows, d, m.keep(), back, got, ValueFormat::F32), WireError);  // f32 size differs
  std::vector<std::byte> values_only(vals.size() * 2);
  dct_mp_encode_values(vals, values_only, ValueFormat::Bf16);
  EXPECT_TRUE(std::equal(values_only.begin(), values_only.end(), wire.end() - values_only.size()));
  EXPECT_THROW(dct_mp_decode_values(std::span(values_only).first(3), got, ValueFormat::Bf16), WireError);
  EXPECT_THROW(dct_mp_message_bytes(rows, d, m.keep(), ValueFormat::Fp8), InputError);
}

TEST(DctMp, RejectsBadInput) {
  std::vector<float> act(10);
  EXPECT_THROW(dct_mp_select(act, 3, 0.5), InputError);
  EXPECT_THROW(dct_mp_select(act, 0, 0.5), InputError);
  EXPECT_THROW(dct_mp_select(act, 5, 1.5), InputError);
  const RowMask m = dct_mp_select(act, 5, 0.5);
  std::vector<float> packed(3);
  EXPECT_THROW(dct_mp_gather(m, act, packed), InputError);
}

}  // namespace
}  // namespace sparq::compress
