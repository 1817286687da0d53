// Every compiled SIMD level of the row-wise kernels against a plain scalar
// reference written here (division, std::nearbyint, a bit-by-bit packer):
// the bytes and floats must be identical on every level, so ranks on CPUs
// with different vector units agree.
#include "sparq/compress/rowwise_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "sparq/compress/bitpack.h"

namespace sparq::compress {
namespace {

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }

struct Ref {
  std::vector<std::uint8_t> packed;
  std::vector<float> left, decoded;
};

Ref reference(const std::vector<float>& x, float scale, float bias, int bits) {
  const float levels = static_cast<float>((1 << bits) - 1);
  Ref r{std::vector<std::uint8_t>(packed_bytes(x.size(), bits)), {}, {}};
  for (std::size_t i = 0; i < x.size(); ++i) {
    float q = scale == 0.0f ? 0.0f : std::nearbyint((x[i] - bias) / scale);
    q = std::clamp(q, 0.0f, levels);
    const unsigned c = static_cast<unsigned>(q);
    r.packed[i * bits / 8] = static_cast<std::uint8_t>(r.packed[i * bits / 8] | c << (i * bits % 8));
    const float d = bias + scale * static_cast<float>(c);
    r.decoded.push_back(d);
    r.left.push_back(x[i] - d);
  }
  return r;
}

// Inputs: normal values, small integers (many exact ties: the reciprocal
// shortcut's fallback), zeros of both signs.
std::vector<float> input(std::size_t n, int kind, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = kind == 0 ? nd(g) : kind == 1 ? static_cast<float>(static_cast<int>(g() % 31) - 15)
                                         : (g() % 2 ? 0.0f : -0.0f);
  return x;
}

TEST(RowwiseKernels, EveryLevelMatchesTheReference) {
  for (SimdLevel l : supported_simd_levels()) {
    const RowwiseKernels& k = rowwise_kernels(l);
    for (int bits : {8, 4, 2})
      for (std::size_t n : {1u, 3u, 7u, 15u, 16u, 17u, 31u, 32u, 33u, 48u, 64u, 65u, 127u, 128u, 129u, 512u, 1000u})
        for (int kind : {0, 1, 2}) {
          const auto x = input(n, kind, static_cast<unsigned>(n * 7 + bits + kind));
          const RowRange rr = k.range(x.data(), nullptr, n);
          const float lo = *std::min_element(x.begin(), x.end()) + 0.0f;  // a zero min is +0 on every level
          const float hi = *std::max_element(x.begin(), x.end()) + 0.0f;
          ASSERT_EQ(bits_of(rr.lo), bits_of(lo));
          ASSERT_EQ(bits_of(rr.hi), bits_of(hi));
          // The error-compensation form: sum += x, then the sums' range.
          std::vector<float> sum = input(n, 0, static_cast<unsigned>(n + kind)), want(n);
          for (std::size_t i = 0; i < n; ++i) want[i] = sum[i] + x[i];
          const RowRange sr = k.range(x.data(), sum.data(), n);
          for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(sum[i]), bits_of(want[i]));
          ASSERT_EQ(bits_of(sr.lo), bits_of(*std::min_element(want.begin(), want.end()) + 0.0f));
          ASSERT_EQ(bits_of(sr.hi), bits_of(*std::max_element(want.begin(), want.end()) + 0.0f));
          const float levels = static_cast<float>((1 << bits) - 1);
          const float scale = (hi - lo) / levels;
          for (float s : {scale, scale * 1.25f, 0.0f}) {  // the row's own step, a coarser (fp16-like) one, constant
            const Ref ref = reference(x, s, lo, bits);
            std::vector<std::uint8_t> packed(ref.packed.size(), 0xAB);
            std::vector<float> left(n), back(n);
            k.encode(x.data(), n, s, lo, bits, packed.data(), left.data());
            ASSERT_EQ(packed, ref.packed) << simd_level_name(l) << " bits " << bits << " n " << n << " kind " << kind;
            k.decode(packed.data(), n, s, lo, bits, back.data());
            for (std::size_t i = 0; i < n; ++i) {
              ASSERT_EQ(bits_of(left[i]), bits_of(ref.left[i])) << simd_level_name(l) << " " << i;
              ASSERT_EQ(bits_of(back[i]), bits_of(ref.decoded[i])) << simd_level_name(l) << " " << i;
            }
            // left may alias x (error compensation writes the residual in place).
            std::vector<float> inplace(x);
            k.encode(inplace.data(), n, s, lo, bits, packed.data(), inplace.data());
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(inplace[i]), bits_of(ref.left[i]));
          }
        }
  }
}

TEST(RowwiseKernels, NanAndInfAreNotFinite) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (SimdLevel l : supported_simd_levels())
    for (std::size_t n : {1u, 5u, 40u, 129u})
      for (std::size_t at : {std::size_t{0}, n / 2, n - 1})
        for (float b : bad) {
          std::vector<float> x = input(n, 0, 3);
          x[at] = b;
          const RowRange r = rowwise_kernels(l).range(x.data(), nullptr, n);
          EXPECT_FALSE(std::isfinite(r.lo) && std::isfinite(r.hi)) << simd_level_name(l) << " " << n << " " << at;
        }
}

TEST(RowwiseKernels, SubnormalScaleDividesEverywhere) {
  // 1 / scale overflows: every level must take the division for all values.
  const float s = std::numeric_limits<float>::denorm_min();
  std::vector<float> x(100);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 4) * s;
  for (SimdLevel l : supported_simd_levels()) {
    const Ref ref = reference(x, s, 0.0f, 2);
    std::vector<std::uint8_t> packed(ref.packed.size());
    rowwise_kernels(l).encode(x.data(), x.size(), s, 0.0f, 2, packed.data(), nullptr);
    EXPECT_EQ(packed, ref.packed) << simd_level_name(l);
  }
}

TEST(RowwiseKernels, ForcedLevelIsUsed) {
  const SimdLevel was = simd_level();
  for (SimdLevel l : supported_simd_levels()) {
    force_simd_level(l);
    EXPECT_EQ(simd_level(), l);
    EXPECT_EQ(&rowwise_kernels(), &rowwise_kernels(l));
  }
  force_simd_level(was);
}

}  // namespace
}  // namespace sparq::compress
