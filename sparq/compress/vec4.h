#pragma once
// A 4 x float vector in GCC/Clang's generic vector extension, for the few
// reductions (row min/max) that GCC -O3 will not vectorize from plain loops
// without -ffast-math: a running min is a loop-carried select it refuses to
// reassociate. Element-wise operators and `a < b ? a : b` compile to SSE2
// (minps/maxps) on x86-64 and to NEON on ARM; no -march flag is needed.
#include <cstring>

namespace sparq::compress {

typedef float Vec4 __attribute__((vector_size(16)));

inline Vec4 load4(const float* p) {
  Vec4 v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
inline Vec4 splat4(float x) { return Vec4{x, x, x, x}; }
inline Vec4 min4(Vec4 a, Vec4 b) { return a < b ? a : b; }
inline Vec4 max4(Vec4 a, Vec4 b) { return a > b ? a : b; }

}  // namespace sparq::compress
