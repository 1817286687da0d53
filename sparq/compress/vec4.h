#pragma once
// A 4 x float vector in GCC/Clang's generic vector extension, for the loops
// GCC -O3 will not vectorize from plain code without -ffast-math: running
// min/max (a loop-carried select it refuses to reassociate) and compare-to-
// bitmask for the threshold packers. Element-wise operators and `c ? a : b`
// compile to SSE2 on x86-64 (minps, cmpleps, andps, ...) and to NEON on ARM;
// no -march flag is needed. The one SSE2 intrinsic (movemask) has a plain
// fallback.
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sparq::compress {

typedef float Vec4 __attribute__((vector_size(16)));
typedef std::int32_t Vec4i __attribute__((vector_size(16)));  // comparison results: -1 or 0 per lane

inline Vec4 load4(const float* p) {
  Vec4 v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
inline void store4(float* p, Vec4 v) { std::memcpy(p, &v, sizeof v); }
inline Vec4 splat4(float x) { return Vec4{x, x, x, x}; }
inline Vec4 min4(Vec4 a, Vec4 b) { return a < b ? a : b; }
inline Vec4 max4(Vec4 a, Vec4 b) { return a > b ? a : b; }
// |a|: clear the sign bits.
inline Vec4 abs4(Vec4 a) { return reinterpret_cast<Vec4>(reinterpret_cast<Vec4i>(a) & 0x7fffffff); }
// Lane j of a comparison result -> bit j. SSE2 has this as one instruction
// (movmskps); elsewhere four lane extractions.
inline unsigned lane_bits(Vec4i m) {
#if defined(__SSE2__)
  return static_cast<unsigned>(_mm_movemask_ps(reinterpret_cast<__m128>(m)));
#else
  return static_cast<unsigned>((m[0] & 1) | (m[1] & 2) | (m[2] & 4) | (m[3] & 8));
#endif
}

}  // namespace sparq::compress
