// Row-wise quantizer against a plain per-row reference (min_element /
// max_element, division, std::nearbyint, a bit-by-bit packer).
#include "sparq/compress/rowwise_quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "sparq/compress/half.h"
#include "sparq/core/error.h"
#include "tests/compress/random_data.h"

namespace sparq::compress {
namespace {

struct RefRow {
  float scale, bias;
  std::vector<unsigned> codes;
};

// The paper's definition, written plainly (fp32 scales).
RefRow reference_row(const float* x, std::size_t n, int bits) {
  const float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  const float levels = static_cast<float>((1 << bits) - 1);
  RefRow r{(hi - lo) / levels, lo, {}};
  for (std::size_t i = 0; i < n; ++i) {
    float q = r.scale == 0.0f ? 0.0f : std::nearbyint((x[i] - lo) / r.scale);  // FE_TONEAREST: ties to even
    q = std::clamp(q, 0.0f, levels);
    r.codes.push_back(static_cast<unsigned>(q));
  }
  return r;
}

unsigned read_code(const std::byte* row_codes, std::size_t i, int bits) {
  const std::size_t bit = i * static_cast<std::size_t>(bits);
  return (static_cast<unsigned>(row_codes[bit / 8]) >> (bit % 8)) & ((1u << bits) - 1);
}

using test::normal;

TEST(RowwiseQuant, MatchesReferenceBitwise) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (int bits : {8, 4, 2})
    for (std::size_t cols : {1u, 3u, 8u, 13u, 64u, 600u}) {
      const std::size_t rows = 5;
      const auto x = normal(rows * cols, static_cast<unsigned>(cols * 10 + bits));
      const RowwiseLayout lay{cols, {bits}};
      std::vector<std::byte> wire(lay.bytes(rows));
      rowwise_quantize(x, cols, {bits}, wire);
      for (std::size_t r = 0; r < rows; ++r) {
        const RefRow ref = reference_row(x.data() + r * cols, cols, bits);
        const std::byte* row = wire.data() + r * lay.row_bytes();
        float scale, bias;
        std::memcpy(&scale, row, 4);
        std::memcpy(&bias, row + 4, 4);
        ASSERT_EQ(scale, ref.scale);
        ASSERT_EQ(bias, ref.bias);
        for (std::size_t i = 0; i < cols; ++i) ASSERT_EQ(read_code(row + 8, i, bits), ref.codes[i]) << r << "," << i;
      }
      std::vector<float> out(x.size());
      rowwise_dequantize(wire, cols, {bits}, out);
      for (std::size_t r = 0; r < rows; ++r) {
        const RefRow ref = reference_row(x.data() + r * cols, cols, bits);
        for (std::size_t i = 0; i < cols; ++i)
          ASSERT_EQ(out[r * cols + i], ref.bias + ref.scale * static_cast<float>(ref.codes[i]));
      }
    }
}

// The fused error-compensated encoder equals the three steps it replaces:
// z = x + err, Q(z), err = z - D(Q(z)), bit for bit, for every width, both
// scale types, rows longer than one code chunk, and a constant row.
TEST(RowwiseQuant, ErrorCompensatedEncodeEqualsQuantizeThenDecode) {
  for (int bits : {8, 4, 2})
    for (ScaleType st : {ScaleType::F32, ScaleType::F16})
      for (std::size_t cols : {1u, 13u, 64u, 1100u}) {
        const RowwiseFormat fmt{bits, st};
        const std::size_t rows = 4, n = rows * cols;
        const auto x = normal(n, static_cast<unsigned>(cols + bits));
        auto err = normal(n, static_cast<unsigned>(cols * 7 + bits), 0.1f);
        std::fill(err.begin(), err.begin() + cols, 0.0f);
        std::vector<float> x0(x);
        std::fill(x0.begin(), x0.begin() + cols, 0.75f);  // row 0: constant
        std::vector<float> z(n), back(n), want_err(n);
        for (std::size_t i = 0; i < n; ++i) z[i] = x0[i] + err[i];
        const RowwiseLayout lay{cols, fmt};
        std::vector<std::byte> want(lay.bytes(rows)), got(lay.bytes(rows));
        rowwise_quantize(z, cols, fmt, want);
        rowwise_dequantize(want, cols, fmt, back);
        for (std::size_t i = 0; i < n; ++i) want_err[i] = z[i] - back[i];
        rowwise_quantize_ec(x0, err, cols, fmt, got);
        ASSERT_EQ(got, want) << bits << " bits, " << cols << " cols";
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(err[i]), std::bit_cast<std::uint32_t>(want_err[i])) << i;
      }
}

TEST(RowwiseQuant, EveryElementWithinHalfAStep) {
  for (int bits : {8, 4, 2})
    for (auto fmt : {RowwiseFormat{bits, ScaleType::F32}, RowwiseFormat{bits, ScaleType::F16}}) {
      const std::size_t cols = 77, rows = 40;
      auto x = normal(rows * cols, 3, 5.0f, 2.0f);
      std::vector<float> out(x.size());
      rowwise_dq(x, cols, fmt, out);
      std::vector<std::byte> wire(RowwiseLayout{cols, fmt}.bytes(rows));
      rowwise_quantize(x, cols, fmt, wire);
      for (std::size_t r = 0; r < rows; ++r) {
        // The scale actually sent (fp16-rounded up in F16 mode).
        float s;
        if (fmt.scale == ScaleType::F32) {
          std::memcpy(&s, wire.data() + r * RowwiseLayout{cols, fmt}.row_bytes(), 4);
        } else {
          std::uint16_t h;
          std::memcpy(&h, wire.data() + r * RowwiseLayout{cols, fmt}.row_bytes(), 2);
          s = half_to_float(h);
        }
        for (std::size_t i = 0; i < cols; ++i) {
          const float v = x[r * cols + i];
          // s/2 plus float rounding of (x - lo)/s and of lo + s*c.
          const float tol = s * 0.5f * (1 + 1e-5f) + 4 * std::numeric_limits<float>::epsilon() * std::fabs(v) + 1e-6f;
          ASSERT_LE(std::fabs(out[r * cols + i] - v), tol) << bits << " " << r << " " << i;
        }
      }
    }
}

TEST(RowwiseQuant, AllLevelsReachable) {
  for (int bits : {8, 4, 2}) {
    const int levels = 1 << bits;
    std::vector<float> x(static_cast<std::size_t>(levels));
    for (int i = 0; i < levels; ++i) x[static_cast<std::size_t>(i)] = -3.0f + 0.25f * static_cast<float>(i);
    std::vector<float> out(x.size());
    rowwise_dq(x, x.size(), {bits}, out);
    EXPECT_EQ(std::set<float>(out.begin(), out.end()).size(), static_cast<std::size_t>(levels)) << bits;
    EXPECT_EQ(out, x);  // the grid points themselves are exact
  }
}

TEST(RowwiseQuant, TiesRoundToEven) {
  // lo = 0, hi = 15: s = 1 at 4 bits, so k + 0.5 is an exact tie.
  const std::vector<float> x{0.0f, 15.0f, 0.5f, 1.5f, 2.5f, 3.5f, 12.5f, 13.5f, 14.5f};
  std::vector<float> out(x.size());
  rowwise_dq(x, x.size(), {4}, out);
  EXPECT_EQ(out, (std::vector<float>{0, 15, 0, 2, 2, 4, 12, 14, 14}));
}

TEST(RowwiseQuant, ConstantRowsAreExact) {
  const std::vector<float> x{2.7f, 2.7f, 2.7f, -1e-30f, -1e-30f, -1e-30f, 0.0f, 0.0f, 0.0f};
  for (int bits : {8, 4, 2}) {
    std::vector<float> out(x.size());
    rowwise_dq(x, 3, {bits}, out);
    EXPECT_EQ(out, x);
  }
  // fp16 bias: exact only if the constant is an fp16 value.
  const std::vector<float> h{0.5f, 0.5f, -3.0f, -3.0f};
  std::vector<float> out(h.size());
  rowwise_dq(h, 2, {4, ScaleType::F16}, out);
  EXPECT_EQ(out, h);
}

TEST(RowwiseQuant, SubnormalRangeIsNotTakenForConstant) {
  // (hi - lo) / 255 underflows to 0 in float: the step becomes the smallest
  // subnormal and both ends survive.
  const std::vector<float> x{0.0f, 1e-44f, 5e-45f};
  std::vector<float> out(3);
  rowwise_dq(x, 3, {8}, out);
  EXPECT_EQ(out, x);
}

TEST(RowwiseQuant, NonFiniteAndOverflowAreInputErrors) {
  std::vector<float> out(4);
  std::vector<std::byte> wire(RowwiseLayout{4, {8}}.bytes(1));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    const std::vector<float> x{1.0f, bad, 2.0f, 3.0f};
    EXPECT_THROW(rowwise_quantize(x, 4, {8}, wire), InputError);
    EXPECT_THROW(rowwise_dq(x, 4, {8}, out), InputError);
  }
  const std::vector<float> wide{-3e38f, 3e38f, 0.0f, 0.0f};
  EXPECT_THROW(rowwise_dq(wide, 4, {8}, out), InputError);
  const std::vector<float> big{-1e5f, 0.0f, 0.0f, 0.0f};  // bias -1e5 has no fp16
  EXPECT_THROW(rowwise_dq(big, 4, {8, ScaleType::F16}, out), InputError);
  std::vector<float> five(5);
  EXPECT_THROW(rowwise_dq(five, 4, {8}, five), InputError);
  EXPECT_THROW(rowwise_dq(out, 4, {3}, out), InputError);
}

TEST(RowwiseQuant, DecoderRejectsBadMessages) {
  const std::size_t cols = 6;
  const RowwiseFormat fmt{4};
  const std::vector<float> x = normal(2 * cols, 9);
  std::vector<std::byte> wire(RowwiseLayout{cols, fmt}.bytes(2));
  rowwise_quantize(x, cols, fmt, wire);
  std::vector<float> out(x.size());
  EXPECT_THROW(rowwise_dequantize(std::span(wire).first(wire.size() - 1), cols, fmt, out), WireError);
  auto bad = wire;
  const float nan = std::numeric_limits<float>::quiet_NaN(), neg = -1.0f;
  std::memcpy(bad.data(), &nan, 4);
  EXPECT_THROW(rowwise_dequantize(bad, cols, fmt, out), WireError);
  bad = wire;
  std::memcpy(bad.data() + RowwiseLayout{cols, fmt}.row_bytes(), &neg, 4);
  EXPECT_THROW(rowwise_dequantize(bad, cols, fmt, out), WireError);
}

TEST(RowwiseQuant, Fp16HeaderHalvesTheOverhead) {
  EXPECT_EQ((RowwiseLayout{64, {4, ScaleType::F32}}.row_bytes()), 8u + 32u);
  EXPECT_EQ((RowwiseLayout{64, {4, ScaleType::F16}}.row_bytes()), 4u + 32u);
  EXPECT_EQ((RowwiseLayout{5, {2, ScaleType::F16}}.row_bytes()), 4u + 2u);
}

TEST(RowwiseQuant, DqIsQuantizeThenDequantize) {
  for (auto fmt : {RowwiseFormat{2, ScaleType::F16}, RowwiseFormat{8, ScaleType::F32}}) {
    const std::size_t cols = 1030;  // more than one internal chunk
    const auto x = normal(3 * cols, 4);
    std::vector<std::byte> wire(RowwiseLayout{cols, fmt}.bytes(3));
    rowwise_quantize(x, cols, fmt, wire);
    std::vector<float> a(x.size()), b(x.size());
    rowwise_dequantize(wire, cols, fmt, a);
    rowwise_dq(x, cols, fmt, b);
    EXPECT_EQ(a, b);
  }
}

TEST(RowwiseQuant, DqeFollowsAlgorithmOne) {
  const std::size_t cols = 16, rows = 4, n = rows * cols;
  const auto t = normal(n, 1), y = normal(n, 2);
  std::vector<float> e = normal(n, 3, 0.01f), out(n);
  // Reference: Z = T + Y + E; out = DQ(Z); E = Z - out.
  std::vector<float> z(n), ref_out(n);
  for (std::size_t i = 0; i < n; ++i) z[i] = (t[i] + y[i]) + e[i];
  rowwise_dq(z, cols, {2}, ref_out);
  rowwise_dqe(t, y, e, cols, {2}, out);
  EXPECT_EQ(out, ref_out);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(e[i], z[i] - ref_out[i]);
}

TEST(RowwiseQuant, DqeCompensatesOverSteps) {
  // Sending the same T for K steps: the error telescopes, so the mean of the
  // outputs is T - E_K / K, far closer to T than a single 2-bit DQ.
  const std::size_t cols = 32, n = 2 * cols, steps = 400;
  const auto t = normal(n, 7);
  std::vector<float> e(n, 0.0f), out(n), total(n, 0.0f), once(n);
  for (std::size_t k = 0; k < steps; ++k) {
    rowwise_dqe(t, {}, e, cols, {2}, out);
    for (std::size_t i = 0; i < n; ++i) total[i] += out[i];
  }
  rowwise_dq(t, cols, {2}, once);
  double err_mean = 0, err_once = 0;
  for (std::size_t i = 0; i < n; ++i) {
    err_mean = std::max(err_mean, std::fabs(static_cast<double>(total[i]) / steps - t[i]));
    err_once = std::max(err_once, std::fabs(static_cast<double>(once[i]) - t[i]));
  }
  EXPECT_LT(err_mean, err_once / 20);
}

}  // namespace
}  // namespace sparq::compress
