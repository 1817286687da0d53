#pragma once
// One row of the row-wise codec (compress/rowwise_quant.h's wire format),
// written once for a CUDA thread that owns the row (rowwise.cu) and for the
// host, where CI compares it with the CPU codec bit for bit
// (tests/cuda/rowwise_row_test.cc): everything but the thread mapping runs
// without a GPU.
//
// Bit for bit with the CPU means its float operations one at a time: on the
// device the _rn intrinsics (never contracted into a fused multiply-add, and
// an IEEE division), on the host plain operators under -ffp-contract=off.
//
//   quantize_row:   lo, hi of z = x (+ err); the grid (fp16: bias rounded
//                   down and scale up); code = rne(clamp((z - bias) / scale))
//   dequantize_row: bias + scale * code
//
// The division: q = fl(d * fl(1 / scale)) differs from fl(d / scale) by less
// than (levels + 1) * 2^-21, so rne(q) is the quotient's code unless q lies
// that close to a half-integer; those values (rare for real data) are
// divided in full, one by one.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "sparq/compress/half.h"  // the host's fp16 conversions

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define SPARQ_HD __host__ __device__ __forceinline__
#else
#define SPARQ_HD inline
#endif

namespace sparq::cuda_row {

// Row faults, as sparq.gpu's kernels number them (python/sparq/gpu/rowwise.py).
enum Fault : std::int8_t { kOk = 0, kNotFinite = 1, kRangeOverflow = 2, kBeyondFp16 = 3, kBadHeader = 4 };

SPARQ_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SPARQ_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
SPARQ_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SPARQ_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
SPARQ_HD std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
SPARQ_HD float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
SPARQ_HD std::uint16_t to_half(float f) {  // round to nearest even
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return compress::float_to_half(f);
#endif
}
SPARQ_HD float from_half(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return compress::half_to_float(h);
#endif
}

SPARQ_HD bool finite(float v) { return sub(v, v) == 0.0f; }  // NaN for NaN and +-inf

// The fp16 one step down or up from h, through the order of fp16 bit
// patterns on the integers (both zeros at 0), as half.h does.
SPARQ_HD std::uint16_t half_step(std::uint16_t h, int dir) {
  int key = (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h);
  key += dir;
  return static_cast<std::uint16_t>(key >= 0 ? key : (0x8000 | -key));
}

struct Grid {
  float scale, bias;
  std::uint32_t scale_bits, bias_bits;  // as the header carries them
  Fault fault;
};

SPARQ_HD Grid grid(float lo, float hi, int levels, bool f16) {
  Grid g;
  g.fault = kOk;
  if (f16) {
    std::uint16_t hb = to_half(lo);
    if (from_half(hb) > lo) hb = half_step(hb, -1);
    g.bias = from_half(hb);
    const float s = div(sub(hi, g.bias), static_cast<float>(levels));
    std::uint16_t hs = to_half(s);
    if (from_half(hs) < s) hs = half_step(hs, +1);
    g.scale = from_half(hs);
    if (!finite(g.bias) || !finite(g.scale)) g.fault = kBeyondFp16;
    g.scale_bits = hs;
    g.bias_bits = hb;
  } else {
    g.scale = div(sub(hi, lo), static_cast<float>(levels));
    if (g.scale == 0.0f && hi > lo) g.scale = float_of(1);  // a subnormal range underflowed: the smallest step
    g.bias = lo;
    if (!finite(g.scale)) g.fault = kRangeOverflow;
    g.scale_bits = bits_of(g.scale);
    g.bias_bits = bits_of(g.bias);
  }
  return g;
}

constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: z + it holds rne(z) in its low bits
constexpr std::uint32_t kMagicBits = 0x4B400000u;

// rne(clamp(fl((z - bias) / scale), 0, levels)) + kRoundMagic; inv = fl(1 /
// scale).
SPARQ_HD float rounded_code(float z, const Grid& g, float inv, float levels) {
  if (g.scale == 0.0f) return kRoundMagic;  // a constant row: every code 0
  const float d = sub(z, g.bias);
  float q = fminf(fmaxf(mul(d, inv), 0.0f), levels);
  const float edge = 0.5f - (levels + 1.0f) * 4.76837158203125e-07f;  // 2^-21
  if (fabsf(sub(q, sub(add(q, kRoundMagic), kRoundMagic))) > edge || !finite(inv))
    q = fminf(fmaxf(div(d, g.scale), 0.0f), levels);
  return add(q, kRoundMagic);
}

// Reads value j of a row through `at(j)` (x, or x + err), writes the row's
// bytes to `out` through put(byte offset, 32-bit word, bytes of it that
// belong to the row: 1-4), and with `left` writes each value's residual
// z - D(Q(z)) (or z on a faulty row) through left(j, value). Returns the fault.
template <class At, class Put, class Left>
SPARQ_HD Fault quantize_row(int cols, int bits, bool f16, At at, Put put, Left left) {
  const int levels = (1 << bits) - 1;
  float lo = INFINITY, hi = -INFINITY;
  bool ok = true;
  for (int j = 0; j < cols; ++j) {
    const float z = at(j);
    ok = ok && finite(z);
    lo = fminf(lo, z);
    hi = fmaxf(hi, z);
  }
  // + 0: a zero extreme is +0 whichever zero the row holds.
  Grid g = ok ? grid(add(lo, 0.0f), add(hi, 0.0f), levels, f16) : grid(0.0f, 0.0f, levels, f16);
  if (!ok) g.fault = kNotFinite;
  const int header = f16 ? 4 : 8;
  if (f16) {
    put(0, g.scale_bits | (g.bias_bits << 16), 4);
  } else {
    put(0, g.scale_bits, 4);
    put(4, g.bias_bits, 4);
  }
  const float inv = div(1.0f, g.scale == 0.0f ? 1.0f : g.scale);
  const int per_word = 32 / bits;
  const int code_bytes = (cols * bits + 7) / 8;
  for (int w = 0; w * per_word < cols; ++w) {
    std::uint32_t word = 0;
    for (int k = 0; k < per_word && w * per_word + k < cols; ++k) {
      const int j = w * per_word + k;
      const float z = at(j);
      const float r = rounded_code(z, g, inv, static_cast<float>(levels));
      const std::uint32_t code = bits_of(r) - kMagicBits;
      word |= (code & static_cast<std::uint32_t>(levels)) << (k * bits);
      left(j, g.fault != kOk ? z : sub(z, add(g.bias, mul(g.scale, sub(r, kRoundMagic)))));
    }
    const int n = code_bytes - 4 * w;
    put(header + 4 * w, word, n < 4 ? n : 4);
  }
  return g.fault;
}

// Decodes a row: its bytes through byte(k), value j through out(j, value).
template <class Byte, class Out>
SPARQ_HD Fault dequantize_row(int cols, int bits, bool f16, Byte byte, Out out) {
  float scale, bias;
  int header;
  if (f16) {
    scale = from_half(static_cast<std::uint16_t>(byte(0) | (byte(1) << 8)));
    bias = from_half(static_cast<std::uint16_t>(byte(2) | (byte(3) << 8)));
    header = 4;
  } else {
    scale = float_of(byte(0) | (byte(1) << 8) | (byte(2) << 16) | (static_cast<std::uint32_t>(byte(3)) << 24));
    bias = float_of(byte(4) | (byte(5) << 8) | (byte(6) << 16) | (static_cast<std::uint32_t>(byte(7)) << 24));
    header = 8;
  }
  const std::uint32_t mask = (1u << bits) - 1;
  const int per_byte = 8 / bits;
  for (int j = 0; j < cols; ++j) {
    const std::uint32_t code = (byte(header + j / per_byte) >> ((j % per_byte) * bits)) & mask;
    out(j, add(bias, mul(scale, static_cast<float>(code))));
  }
  return scale >= 0.0f && finite(scale) && finite(bias) ? kOk : kBadHeader;
}

// Staging a warp's 32 rows in shared memory (rowwise.cu): floats between
// the rows' starts, odd, so that 32 threads reading value j of their rows
// hit 32 different banks.
SPARQ_HD int pitch_of(int cols) { return cols % 2 ? cols : cols + 1; }

// f(i, s) for the values lane `lane` of a warp moves of the warp's n: i the
// value's place in the rows back to back, s its place in the padded rows.
// Consecutive lanes take consecutive values (coalesced loads and stores);
// rows and columns are stepped, not divided.
template <class F>
SPARQ_HD void for_warp_values(int lane, int n, int cols, F f) {
  const int pitch = pitch_of(cols), q = 32 / cols, rem = 32 % cols;
  int row = lane / cols, col = lane % cols;
  for (int i = lane; i < n; i += 32) {
    f(i, row * pitch + col);
    row += q, col += rem;
    if (col >= cols) col -= cols, ++row;
  }
}

}  // namespace sparq::cuda_row
