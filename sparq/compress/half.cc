#include "sparq/compress/half.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace sparq::compress {

namespace {
// One row the portable way.
void half_grid(float lo, float hi, float levels, std::uint16_t& bias, std::uint16_t& scale) {
  bias = half_round_down(lo);
  scale = half_round_up((hi - half_to_float(bias)) / levels);
}

#if defined(__x86_64__)
// A lane whose input is a float subnormal, or whose result is a zero, is
// redone the portable way: with MXCSR.DAZ set (PyTorch's flush-denormal sets
// it) the instruction would read a subnormal as 0, and which zero a tiny
// value rounds to differs between the two.
bool redo(float in, std::uint16_t out) {
  return (out & 0x7fffu) == 0 || (in != 0.0f && std::fabs(in) < std::numeric_limits<float>::min());
}

// CPUID leaf 1 (clang before 15 has no "f16c" for __builtin_cpu_supports);
// "avx" also says the OS saves the ymm registers.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

__attribute__((target("avx,f16c"))) void half_grids_f16c(const float* lo, const float* hi, std::size_t n,
                                                         float levels, std::uint16_t* bias, std::uint16_t* scale) {
  alignas(32) float l[8] = {}, h[8] = {}, s[8];
  alignas(16) std::uint16_t bh[8], sh[8];
  for (std::size_t j = 0; j < n; ++j) l[j] = lo[j], h[j] = hi[j];
  const __m128i b = _mm256_cvtps_ph(_mm256_load_ps(l), _MM_FROUND_TO_NEG_INF);
  const __m256 sv = _mm256_div_ps(_mm256_sub_ps(_mm256_load_ps(h), _mm256_cvtph_ps(b)), _mm256_set1_ps(levels));
  _mm_store_si128(reinterpret_cast<__m128i*>(bh), b);
  _mm_store_si128(reinterpret_cast<__m128i*>(sh), _mm256_cvtps_ph(sv, _MM_FROUND_TO_POS_INF));
  _mm256_store_ps(s, sv);
  for (std::size_t j = 0; j < n; ++j) {
    if (redo(l[j], bh[j]) || redo(s[j], sh[j])) half_grid(l[j], h[j], levels, bh[j], sh[j]);
    bias[j] = bh[j], scale[j] = sh[j];
  }
}
#endif
}  // namespace

void half_grids(const float* lo, const float* hi, std::size_t n, float levels, std::uint16_t* bias,
                std::uint16_t* scale) {
#if defined(__x86_64__)
  static const bool f16c = has_f16c();
  if (f16c) {
    for (std::size_t i = 0; i < n; i += 8)
      half_grids_f16c(lo + i, hi + i, std::min<std::size_t>(8, n - i), levels, bias + i, scale + i);
    return;
  }
#endif
  for (std::size_t j = 0; j < n; ++j) half_grid(lo[j], hi[j], levels, bias[j], scale[j]);
}

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  // Adding 0x7fff plus the kept part's lowest bit rounds half to even; a carry
  // into the exponent is the correct next binade (or infinity).
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

std::uint8_t float_to_e4m3(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7fu);
  if (ax >= 0x43e00000u) return static_cast<std::uint8_t>(sign | 0x7eu);  // >= 448: saturate
  if (ax < 0x3c800000u) {
    // Below 2^-6: a subnormal k * 2^-9; k may reach 8, the smallest normal's pattern.
    const float k = std::nearbyint(std::bit_cast<float>(ax) * 0x1p9f);
    return static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(k));
  }
  // Normal: rebias the exponent (127 -> 7) and round 23 -> 3 mantissa bits to
  // nearest even; a carry correctly bumps the exponent (at most to 448).
  const std::uint32_t r = ax - 0x3c000000u;
  return static_cast<std::uint8_t>(sign | ((r + 0x7ffffu + ((r >> 20) & 1u)) >> 20));
}

float e4m3_to_float(std::uint8_t q) {
  const std::uint32_t e = (q >> 3) & 0xfu, m = q & 7u;
  float v;
  if (e == 0) v = static_cast<float>(m) * 0x1p-9f;
  else if (e == 15 && m == 7) v = std::numeric_limits<float>::quiet_NaN();
  else v = std::bit_cast<float>(((e + 120u) << 23) | (m << 20));  // rebias 7 -> 127
  return (q & 0x80u) ? -v : v;
}

}  // namespace sparq::compress
