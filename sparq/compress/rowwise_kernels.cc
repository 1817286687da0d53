#include "sparq/compress/rowwise_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "sparq/compress/bitpack.h"

// The loops (rowwise_kernels_body.h) are written once over GCC/Clang generic
// vectors of W floats and compiled once per SimdLevel: W = 4 (SSE2), 8
// (AVX2), 16 (AVX-512); on AVX2 and AVX-512 the range and encoding loops
// are intrinsics (masked tails, narrowing reductions, VREDUCEPS on AVX-512),
// the same operations per element.

// Bit-exactness across levels: every float result is one IEEE operation
// (sub, mul, div, add, compare/select or MAXPS/MINPS, which select alike for
// finite values; VREDUCEPS's q - rne(q) is exact) applied per element in the same order
// on every level, and this file is compiled with -ffp-contract=off so that
// bias + scale * code is never fused into an FMA (the decoder, which is also
// scalar code elsewhere, rounds the product first). Only min/max reductions
// change order with W, and they are order-independent except for the sign of
// a zero, which range() normalizes.

namespace sparq::compress {

namespace {

// Adding 1.5 * 2^23 to a float in [0, 2^22) leaves the integer nearest to it
// (ties to even, the default rounding mode) in the low mantissa bits.
constexpr float kRoundMagic = 0x1.8p23f;

// One copy of the kernels per level. Targets come from pragmas (not function
// attributes) so that every helper of a copy is compiled for its level and
// inlines: GCC refuses to inline a target-specific intrinsic into a helper
// compiled for the baseline, and outlines lambdas for the baseline.
#define SPARQ_INLINE inline __attribute__((always_inline))
namespace level_base {
constexpr int kW = 4;
#include "sparq/compress/rowwise_kernels_body.h"
}  // namespace level_base
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SPARQ_HAVE_AVX_LEVELS 1
#pragma GCC push_options
// "avx2" without "fma": nothing to fuse, so no FMA can appear.
#pragma GCC target("avx2")
namespace level_avx2 {
constexpr int kW = 8;
#define SPARQ_KERNELS_AVX2 1  // its intrinsics paths (the pragma defines no __AVX2__ macro)
#include "sparq/compress/rowwise_kernels_body.h"
#undef SPARQ_KERNELS_AVX2
}  // namespace level_avx2
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
// GCC 12 warns that the AVX-512 intrinsics' own _mm512_undefined_ps() is
// uninitialized: a false positive of GCC 12 (the intrinsics leave those
// lanes undefined on purpose).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace level_avx512 {
constexpr int kW = 16;
#define SPARQ_KERNELS_AVX512 1  // its intrinsics paths (the pragma defines no __AVX512*__ macro)
#include "sparq/compress/rowwise_kernels_body.h"
#undef SPARQ_KERNELS_AVX512
}  // namespace level_avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#undef SPARQ_INLINE

}  // namespace

const RowwiseKernels& rowwise_kernels([[maybe_unused]] SimdLevel l) {  // one level only without SPARQ_HAVE_AVX_LEVELS
  static const RowwiseKernels base{level_base::range, level_base::encode, level_base::decode};
#if defined(SPARQ_HAVE_AVX_LEVELS)
  static const RowwiseKernels avx2{level_avx2::range, level_avx2::encode, level_avx2::decode};
  static const RowwiseKernels avx512{level_avx512::range, level_avx512::encode, level_avx512::decode};
  if (l == SimdLevel::Avx512) return avx512;
  if (l == SimdLevel::Avx2) return avx2;
#endif
  return base;
}

}  // namespace sparq::compress
