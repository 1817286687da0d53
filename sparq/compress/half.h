#pragma once
// IEEE 754 binary16 ("fp16") conversions for the row-wise quantizer's optional
// half-precision scale/bias, and bfloat16 and fp8 (E4M3) for sparse-stream
// values. Written out in integer arithmetic because the
// quantizer needs *directed* rounding (round the bias down and the scale up so
// that every input stays inside the dequantized grid), which no standard
// conversion offers, and so that results do not depend on the target's F16C.
#include <bit>
#include <cstdint>

namespace sparq::compress {

// Round-to-nearest-even float -> fp16 bits. Overflow gives +-inf, NaN stays NaN.
std::uint16_t float_to_half(float f);
// Exact fp16 bits -> float (every fp16 value is a float).
float half_to_float(std::uint16_t h);
// The largest fp16 <= f, and the smallest fp16 >= f (f finite; results may be
// +-inf when f lies beyond +-65504).
std::uint16_t half_round_down(float f);
std::uint16_t half_round_up(float f);

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
