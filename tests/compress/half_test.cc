// fp16 conversions against the compiler's own _Float16 (an independent
// implementation: soft-float or F16C), exhaustively over all fp16 values.
#include "sparq/compress/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

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

}  // namespace
}  // namespace sparq::compress
