#pragma once
// The per-row loops of the row-wise quantizer (rowwise_quant.h), compiled
// once per SimdLevel; rowwise_kernels() hands out the set for the level in
// use. All levels give identical bytes and floats (see rowwise_kernels.cc).
#include <cstddef>
#include <cstdint>

#include "sparq/compress/simd_level.h"

namespace sparq::compress {

// min and max of a row; a zero extreme is +0, whichever zero the row holds.
// A NaN or +-inf anywhere in the row leaves lo or hi not finite. (Two floats,
// no flag: returned in registers, where a bool would go through the stack.)
struct RowRange {
  float lo, hi;
};

struct RowwiseKernels {
  // min and max of x[0, n), n > 0. With `sum` (error compensation:
  // z = x + err in place), sum[i] += x[i] first and the range is of the sums.
  RowRange (*range)(const float* x, float* sum, std::size_t n);
  // Packed `bits`-wide codes rne(clamp((x - bias) / scale, 0, 2^bits - 1))
  // of x[0, n) (all 0 when scale == 0) into packed[0, packed_bytes(n, bits)).
  // With `left` (which may alias x): left = x - (bias + scale * code), what
  // the decoder will miss, in the same pass.
  void (*encode)(const float* x, std::size_t n, float scale, float bias, int bits, std::uint8_t* packed, float* left);
  // out = bias + scale * code for the n codes in packed.
  void (*decode)(const std::uint8_t* packed, std::size_t n, float scale, float bias, int bits, float* out);
};

const RowwiseKernels& rowwise_kernels(SimdLevel l);
inline const RowwiseKernels& rowwise_kernels() { return rowwise_kernels(simd_level()); }

}  // namespace sparq::compress
