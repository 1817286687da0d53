#include "sparq/compress/half.h"

#include <bit>
#include <cmath>
#include <limits>

namespace sparq::compress {

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
