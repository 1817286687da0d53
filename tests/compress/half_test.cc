// fp16 conversions against the compiler's own _Float16 (an independent
// implementation: soft-float or F16C), exhaustively over all fp16 values.
#include "sparq/compress/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace sparq::compress {
namespace {

#if defined(__FLT16_MAX__)
std::uint16_t ref_bits(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float ref_value(std::uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

TEST(Half, EveryHalfConvertsExactlyBothWays) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float ref = ref_value(h);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(half_to_float(h))) << b;
      continue;
    }
    EXPECT_EQ(std::bit_cast<std::uint32_t>(half_to_float(h)), std::bit_cast<std::uint32_t>(ref)) << b;
    EXPECT_EQ(float_to_half(ref), h) << b;
  }
}

TEST(Half, RoundsToNearestEvenLikeTheCompiler) {
  std::mt19937 rng(5);
  // Random bit patterns cover normals, subnormals, overflow and ties alike.
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), ref_bits(f)) << f;
  }
  // Exact ties between neighbours: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), ref_bits(1.0f + 0x1p-11f));
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // ties to even past 65504: inf
}
#else
// Compilers without _Float16 (clang < 15 on x86) have no independent reference.
TEST(Half, EveryHalfConvertsExactlyBothWays) { GTEST_SKIP() << "no _Float16 in this compiler"; }
TEST(Half, RoundsToNearestEvenLikeTheCompiler) { GTEST_SKIP() << "no _Float16 in this compiler"; }
#endif

TEST(Half, DirectedRoundingBracketsTheInput) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float f = i % 2 ? d(rng) : d(rng) * 1e-6f;
    const float lo = half_to_float(half_round_down(f)), hi = half_to_float(half_round_up(f));
    ASSERT_LE(lo, f);
    ASSERT_GE(hi, f);
    // No fp16 strictly between them and f: they are neighbours or equal.
    if (lo != hi && std::isfinite(lo) && std::isfinite(hi)) {
      const std::uint16_t l = half_round_down(f);
      const float next = half_to_float(static_cast<std::uint16_t>(l & 0x8000 ? (l == 0x8000 ? 1 : l - 1) : l + 1));
      ASSERT_EQ(next, hi) << f;
    }
  }
  EXPECT_EQ(half_to_float(half_round_down(1e6f)), 65504.0f);
  EXPECT_TRUE(std::isinf(half_to_float(half_round_up(1e6f))));
}

// half_grids (F16C where the CPU has it) against the portable roundings,
// row by row, over every class of float: fp16 normals and subnormals, exact
// fp16 values, float subnormals, zeros of both signs, values beyond 65504,
// and blocks of every length from 1 to 8.
TEST(Half, GridsMatchThePortableRoundings) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits(0, 0x7f7fffffu);  // finite, positive
  std::vector<float> xs = {0.0f, -0.0f, 65504.0f, 65520.0f, 1e6f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-26f, 0x1p-14f,
                           std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()};
  for (std::uint32_t h = 0; h < 0x7c00u; h += 3) xs.push_back(half_to_float(static_cast<std::uint16_t>(h)));  // exact
  for (int i = 0; i < 100000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    xs.push_back(f * 0x1p-100f);  // most of them: float subnormals and zeros...
    xs.push_back(std::ldexp(f, -std::ilogb(f) + static_cast<int>(rng() % 48) - 30));  // ...and 2^-30 .. 2^17
  }
  for (std::size_t i = 0; i + 16 <= xs.size(); i += 16) {
    float lo[8], hi[8];
    const std::size_t n = 1 + i / 16 % 8;
    for (std::size_t j = 0; j < n; ++j) {
      const float a = rng() % 2 ? -xs[i + 2 * j] : xs[i + 2 * j], b = rng() % 2 ? -xs[i + 2 * j + 1] : xs[i + 2 * j + 1];
      lo[j] = std::min(a, b), hi[j] = std::max(a, b);
    }
    for (const float levels : {3.0f, 15.0f, 255.0f}) {
      std::uint16_t bias[8], scale[8];
      half_grids(lo, hi, n, levels, bias, scale);
      for (std::size_t j = 0; j < n; ++j) {
        const std::uint16_t want_bias = half_round_down(lo[j]);
        ASSERT_EQ(bias[j], want_bias) << lo[j];
        ASSERT_EQ(scale[j], half_round_up((hi[j] - half_to_float(want_bias)) / levels)) << lo[j] << " " << hi[j];
      }
    }
  }
}

// bfloat16 against nearest-by-distance in double (ties to the even pattern).
TEST(Bf16, RoundsToNearestEven) {
  std::mt19937 rng(8);
  std::uniform_int_distribution<std::uint32_t> bits(0, 0x7f7fffffu);  // finite, positive
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t x = i < 1000 ? (static_cast<std::uint32_t>(i) << 16) | 0x8000u : bits(rng);  // exact ties first
    const float f = std::bit_cast<float>(x);
    const std::uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u;
    const double dl = f - static_cast<double>(std::bit_cast<float>(lo));
    // Past the largest bf16 the next value up is 2^128 (which rounds to inf).
    const double dh = (hi == 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(std::bit_cast<float>(hi))) - f;
    const std::uint32_t want = dl < dh ? lo : dh < dl ? hi : ((lo >> 16) & 1 ? hi : lo);
    ASSERT_EQ(static_cast<std::uint32_t>(float_to_bf16(f)) << 16, want) << f;
    ASSERT_EQ(float_to_bf16(-f), (want >> 16) | 0x8000u) << f;
    ASSERT_EQ(bf16_to_float(static_cast<std::uint16_t>(want >> 16)), std::bit_cast<float>(want));
  }
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

// E4M3 from its definition: (1 + m/8) 2^(e-7), subnormal m 2^-9, S.1111.111 NaN.
double e4m3_reference(int code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const double v = e == 0 ? m * std::ldexp(1.0, -9) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  return code & 0x80 ? -v : v;
}

TEST(Fp8, EveryCodeDecodesAsDefinedAndRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(e4m3_to_float(static_cast<std::uint8_t>(c))));
      continue;
    }
    ASSERT_EQ(static_cast<double>(e4m3_to_float(static_cast<std::uint8_t>(c))), e4m3_reference(c)) << c;
    ASSERT_EQ(float_to_e4m3(e4m3_to_float(static_cast<std::uint8_t>(c))), c) << c;
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);
}

// Encoding picks the nearest code by distance (ties: even mantissa), and
// saturates beyond 448.
TEST(Fp8, RoundsToNearestEvenAndSaturates) {
  std::vector<double> codes;  // the non-negative finite values, ascending
  for (int c = 0; c < 0x7f; ++c) codes.push_back(e4m3_reference(c));
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) {
    float f = i < 126 ? static_cast<float>((codes[i] + codes[i + 1]) / 2)  // exact midpoints
                      : std::ldexp(u(rng), static_cast<int>(rng() % 22) - 12);
    if (i % 7 == 0) f = u(rng) * 600.0f;
    int want = 0x7e;
    if (f < 448.0f) {
      const auto up = std::lower_bound(codes.begin(), codes.end(), static_cast<double>(f)) - codes.begin();
      const int hi = static_cast<int>(up), lo = hi > 0 ? hi - 1 : 0;
      const double dl = f - codes[lo], dh = codes[hi] - f;
      want = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    }
    ASSERT_EQ(float_to_e4m3(f), want) << f;
    ASSERT_EQ(float_to_e4m3(-f), want | 0x80) << f;
  }
  EXPECT_EQ(float_to_e4m3(1e30f), 0x7e);
  EXPECT_EQ(e4m3_to_float(float_to_e4m3(std::nanf(""))) != e4m3_to_float(float_to_e4m3(std::nanf(""))), true);
}

}  // namespace
}  // namespace sparq::compress
