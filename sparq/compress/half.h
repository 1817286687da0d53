#pragma once
// IEEE 754 binary16 ("fp16") conversions for the row-wise quantizer's optional
// half-precision scale/bias, and bfloat16 and fp8 (E4M3) for sparse-stream
// values. Written out in integer arithmetic because the
// quantizer needs *directed* rounding (round the bias down and the scale up so
// that every input stays inside the dequantized grid), which no standard
// conversion offers, and so that results do not depend on the target's F16C
// (half_grids uses it where present, for speed, with the same results).
// The fp16 conversions are inline: the quantizer calls them several times
// per row, and rows of embedding vectors are short (16-32 values).
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace sparq::compress {

// Round-to-nearest-even float -> fp16 bits. Overflow gives +-inf, NaN stays NaN.
inline std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  // 65520 = 65504 + half an ulp: from there on, round-to-nearest-even overflows.
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    // Below 2^-14 the result is an fp16 subnormal k * 2^-24; scaling by 2^24 is
    // exact and nearbyint rounds half to even in the default rounding mode. k
    // may reach 1024, which is exactly the bit pattern of the smallest normal.
    const float k = std::nearbyint(std::bit_cast<float>(ax) * 0x1p24f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(k));
  }
  // Normal: rebias the exponent (127 -> 15) and round 23 -> 10 mantissa bits
  // to nearest even; a carry out of the mantissa correctly bumps the exponent.
  const std::uint32_t r = ax - 0x38000000u;
  return static_cast<std::uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
}

// Exact fp16 bits -> float (every fp16 value is a float).
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(man) * 0x1p-24f;  // exact
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

namespace half_detail {
// fp16 bit patterns mapped onto consecutive integers in value order (both
// zeros -> 0), so "the next fp16 down" is key - 1.
inline int order_key(std::uint16_t h) { return (h & 0x8000u) ? -static_cast<int>(h & 0x7fffu) : static_cast<int>(h); }
inline std::uint16_t from_key(int k) { return static_cast<std::uint16_t>(k >= 0 ? k : (0x8000 | -k)); }
}  // namespace half_detail

// The largest fp16 <= f, and the smallest fp16 >= f (f finite; results may be
// +-inf when f lies beyond +-65504).
inline std::uint16_t half_round_down(float f) {
  const std::uint16_t h = float_to_half(f);
  return half_to_float(h) > f ? half_detail::from_key(half_detail::order_key(h) - 1) : h;
}
inline std::uint16_t half_round_up(float f) {
  const std::uint16_t h = float_to_half(f);
  return half_to_float(h) < f ? half_detail::from_key(half_detail::order_key(h) + 1) : h;
}

// The row-wise quantizer's fp16 grids of up to 8 rows (finite lo <= hi):
// bias[j] = half_round_down(lo[j]) and scale[j] = half_round_up((hi[j] -
// b) / levels), b the fp16 value of bias[j], as fp16 bits. Where the CPU has
// F16C, 8 rows at once by VCVTPS2PH, which takes IEEE's directed rounding
// modes as an immediate; else row by row with the two above. The same bits
// either way (half_test.cc compares them).
void half_grids(const float* lo, const float* hi, std::size_t n, float levels, std::uint16_t* bias,
                std::uint16_t* scale);

// bfloat16: the top 16 bits of a float (same exponent range, 8-bit
// significand). Round-to-nearest-even; NaN stays a (quiet) NaN, and only
// values beyond the largest bf16 round to +-inf.
std::uint16_t float_to_bf16(float f);
inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// fp8 E4M3 (the OCP "FN" variant: bias 7, 3 mantissa bits, subnormals down
// to 2^-9, largest finite 448, no infinities, NaN = S.1111.111).
// Round-to-nearest-even; magnitudes above 448 saturate to 448, NaN stays NaN.
std::uint8_t float_to_e4m3(float f);
float e4m3_to_float(std::uint8_t q);

}  // namespace sparq::compress
