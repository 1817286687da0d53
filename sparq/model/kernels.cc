#include "sparq/model/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace sparq::kernels {

// Under ThreadSanitizer no clones: GCC instruments the clones' ifunc resolver,
// which the dynamic loader runs while relocating the executable, before the
// TSan runtime is initialised, and that crashes at load. The generic
// ("default") code is what such a build runs; races do not depend on the ISA.
#if defined(__SANITIZE_THREAD__)
#define SPARQ_CLONES
#else
#define SPARQ_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#define SPARQ_INLINE inline __attribute__((always_inline))

namespace {

template <class T>
SPARQ_INLINE void bias_act_impl(T* __restrict y, const T* __restrict b, std::size_t rows, std::size_t cols, bool relu) {
  for (std::size_t r = 0; r < rows; ++r) {
    T* __restrict row = y + r * cols;
    if (relu)
      for (std::size_t c = 0; c < cols; ++c) {
        const T v = row[c] + b[c];
        row[c] = v < T(0) ? T(0) : v;  // NaN passes, as in PyTorch: a NaN input shows at the next check
      }
    else
      for (std::size_t c = 0; c < cols; ++c) row[c] += b[c];
  }
}

template <class T>
SPARQ_INLINE void relu_grad_colsum_impl(const T* __restrict y, T* __restrict g, T* __restrict db, std::size_t rows,
                                        std::size_t cols, std::size_t ld) {
  std::fill(db, db + cols, T(0));
  for (std::size_t r = 0; r < rows; ++r) {
    const T* __restrict yr = y + r * ld;
    T* __restrict gr = g + r * ld;
    for (std::size_t c = 0; c < cols; ++c) {
      const T v = yr[c] > T(0) ? gr[c] : T(0);
      gr[c] = v;
      db[c] += v;
    }
  }
}

template <class T>
SPARQ_INLINE void colsum_impl(const T* __restrict g, T* __restrict db, std::size_t rows, std::size_t cols) {
  std::fill(db, db + cols, T(0));
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) db[c] += g[r * cols + c];
}

// Per sample: VT = V^T (d x np, columns zero-padded to np = a multiple of
// kLanes), then the dots of kRows rows i at once with rows j < i, accumulated
// over k in blocks of kLanes consecutive j: a fixed-width inner loop the
// compiler turns into whole vector multiply-adds (a loop over the i valid j
// would leave short, mostly scalar remainders), and kRows independent sums,
// so the adds do not wait on each other's latency (one row at a time ran at
// a tenth of the core's peak). Each dot is still summed in k order.
constexpr std::size_t kLanes = 16;
constexpr std::size_t kRows = 4;
constexpr std::size_t kMaxBlocks = 64 / kLanes;  // n <= 64

// kLanes values in one GCC vector: each clone maps it onto its widest
// registers (one zmm, two ymm or four xmm for float).
template <class T>
using Lanes [[gnu::vector_size(kLanes * sizeof(T))]] = T;

template <class L, class T>
SPARQ_INLINE void load_lanes(L& x, const T* p) {
  static_assert(sizeof(L) == kLanes * sizeof(T));
  std::memcpy(&x, p, sizeof x);
}

// Rows i0 .. i0 + kRows - 1 of an [n x stride] matrix; rows past n repeat
// the last one (their sums are computed but never stored). add(acc, k, x):
// acc[r] += row r's element k times the vector x, for the kRows rows.
template <class T>
struct RowGroup {
  const T* __restrict r0;
  const T* __restrict r1;
  const T* __restrict r2;
  const T* __restrict r3;
  SPARQ_INLINE RowGroup(const T* m, std::size_t i0, std::size_t n, std::size_t stride)
      : r0(m + std::min(i0, n - 1) * stride),
        r1(m + std::min(i0 + 1, n - 1) * stride),
        r2(m + std::min(i0 + 2, n - 1) * stride),
        r3(m + std::min(i0 + 3, n - 1) * stride) {}
  SPARQ_INLINE void add(Lanes<T> (&acc)[kRows], std::size_t k, const Lanes<T>& x) const {
    acc[0] += r0[k] * x;
    acc[1] += r1[k] * x;
    acc[2] += r2[k] * x;
    acc[3] += r3[k] * x;
  }
};
static_assert(kRows == 4, "RowGroup holds kRows rows");

template <class T>
SPARQ_INLINE void interaction_fwd_impl(const T* __restrict v, std::size_t batch, std::size_t n, std::size_t d,
                                       T* __restrict out) {
  const std::size_t w = d + n * (n - 1) / 2;
  const std::size_t np = (n + kLanes - 1) / kLanes * kLanes;
  alignas(64) T vt[64 * 64];  // d x np, d, n <= 64 (checked by the caller)
  std::fill(vt, vt + d * np, T(0));
  T* const end = out + batch * w;
  for (std::size_t b = 0; b < batch; ++b) {
    const T* __restrict V = v + b * n * d;
    T* __restrict o = out + b * w;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) vt[k * np + i] = V[i * d + k];
    for (std::size_t k = 0; k < d; ++k) o[k] = V[k];
    for (std::size_t i0 = 1; i0 < n; i0 += kRows) {
      const std::size_t rows = std::min(kRows, n - i0);
      const RowGroup<T> vi(V, i0, n, d);
      Lanes<T> acc[kMaxBlocks][kRows] = {};
      const std::size_t blocks = (i0 + rows - 1 + kLanes - 1) / kLanes;  // of kLanes values of j < i0 + rows - 1
      for (std::size_t bl = 0; bl < blocks; ++bl)
        for (std::size_t k = 0; k < d; ++k) {
          Lanes<T> col;
          load_lanes(col, vt + k * np + bl * kLanes);
          vi.add(acc[bl], k, col);
        }
      // Whole vectors, in ascending order of where they go: the lanes past
      // a row's end land on what a later store (or a later sample) writes.
      // A copy of the exact length is a call or a `rep movs`, which took
      // longer than the sums. Near the end of the output: exact lengths.
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t i = i0 + r;
        for (std::size_t j0 = 0, bl = 0; j0 < i; j0 += kLanes, ++bl) {
          T* dst = o + d + i * (i - 1) / 2 + j0;
          std::memcpy(dst, &acc[bl][r], dst + kLanes <= end ? sizeof acc[bl][r] : std::min(kLanes, i - j0) * sizeof(T));
        }
      }
    }
  }
}

// dV = (G + G^T) V per sample, G the strictly lower triangle of dout's pair
// part; plus dout's first d values into dV[0]. kRows rows of dV are built at
// once in registers (independent sums, as in the forward), kLanes values of k
// at a time when d is a multiple of kLanes, each summing over j in order from
// dout (i = 0) or zero.
template <class T>
SPARQ_INLINE void interaction_bwd_impl(const T* __restrict v, const T* __restrict dout, std::size_t batch,
                                       std::size_t n, std::size_t d, T* __restrict dv) {
  const std::size_t w = d + n * (n - 1) / 2;
  const bool blocked = d % kLanes == 0;
  T s[64 * 64];  // n x n symmetric
  for (std::size_t b = 0; b < batch; ++b) {
    const T* __restrict V = v + b * n * d;
    const T* __restrict g = dout + b * w;
    T* __restrict dV = dv + b * n * d;
    std::size_t p = d;
    for (std::size_t i = 0; i < n; ++i) s[i * n + i] = T(0);
    for (std::size_t i = 1; i < n; ++i)
      for (std::size_t j = 0; j < i; ++j, ++p) s[i * n + j] = s[j * n + i] = g[p];
    if (blocked) {
      for (std::size_t i0 = 0; i0 < n; i0 += kRows) {
        const std::size_t rows = std::min(kRows, n - i0);
        const RowGroup<T> si(s, i0, n, n);
        for (std::size_t k0 = 0; k0 < d; k0 += kLanes) {
          Lanes<T> acc[kRows] = {};
          if (i0 == 0) load_lanes(acc[0], g + k0);
          for (std::size_t j = 0; j < n; ++j) {
            Lanes<T> vj;
            load_lanes(vj, V + j * d + k0);
            si.add(acc, j, vj);
          }
          for (std::size_t r = 0; r < rows; ++r) std::memcpy(dV + (i0 + r) * d + k0, &acc[r], sizeof acc[r]);
        }
      }
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      T* __restrict di = dV + i * d;
      for (std::size_t k = 0; k < d; ++k) di[k] = i == 0 ? g[k] : T(0);
      for (std::size_t j = 0; j < n; ++j) {
        const T sij = s[i * n + j];
        const T* __restrict vj = V + j * d;
        for (std::size_t k = 0; k < d; ++k) di[k] += sij * vj[k];
      }
    }
  }
}

template <class T>
SPARQ_INLINE void sub_scaled_impl(T* __restrict p, const T* __restrict g, T a, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] -= a * g[i];
}

template <class T>
SPARQ_INLINE void adagrad_impl(T* __restrict p, const T* __restrict g, T* __restrict s, T lr, T eps, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    s[i] += g[i] * g[i];
    p[i] -= lr * (g[i] / (std::sqrt(s[i]) + eps));
  }
}

template <class T>
SPARQ_INLINE void adam_impl(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                            const AdamCoeffs& k, std::size_t n) {
  const T b1 = static_cast<T>(k.beta1), c1 = static_cast<T>(k.c1), b2 = static_cast<T>(k.beta2),
          c2 = static_cast<T>(k.c2), step = static_cast<T>(k.step), bc2 = static_cast<T>(k.bc2),
          eps = static_cast<T>(k.eps);
  for (std::size_t i = 0; i < n; ++i) {
    m[i] = m[i] * b1 + c1 * g[i];
    v[i] = v[i] * b2 + c2 * (g[i] * g[i]);
    p[i] -= step * (m[i] / (std::sqrt(v[i]) / bc2 + eps));
  }
}

}  // namespace

SPARQ_CLONES void bias_act(float* y, const float* b, std::size_t rows, std::size_t cols, bool relu) {
  bias_act_impl(y, b, rows, cols, relu);
}
void bias_act(double* y, const double* b, std::size_t rows, std::size_t cols, bool relu) {
  bias_act_impl(y, b, rows, cols, relu);
}
SPARQ_CLONES void relu_grad_colsum(const float* y, float* g, float* db, std::size_t rows, std::size_t cols,
                                           std::size_t ld) {
  relu_grad_colsum_impl(y, g, db, rows, cols, ld);
}
void relu_grad_colsum(const double* y, double* g, double* db, std::size_t rows, std::size_t cols,
                              std::size_t ld) {
  relu_grad_colsum_impl(y, g, db, rows, cols, ld);
}
SPARQ_CLONES void colsum(const float* g, float* db, std::size_t rows, std::size_t cols) {
  colsum_impl(g, db, rows, cols);
}
void colsum(const double* g, double* db, std::size_t rows, std::size_t cols) { colsum_impl(g, db, rows, cols); }
SPARQ_CLONES void interaction_fwd(const float* v, std::size_t batch, std::size_t n, std::size_t d, float* out) {
  interaction_fwd_impl(v, batch, n, d, out);
}
void interaction_fwd(const double* v, std::size_t batch, std::size_t n, std::size_t d, double* out) {
  interaction_fwd_impl(v, batch, n, d, out);
}
SPARQ_CLONES void interaction_bwd(const float* v, const float* dout, std::size_t batch, std::size_t n, std::size_t d,
                                  float* dv) {
  interaction_bwd_impl(v, dout, batch, n, d, dv);
}
void interaction_bwd(const double* v, const double* dout, std::size_t batch, std::size_t n, std::size_t d,
                     double* dv) {
  interaction_bwd_impl(v, dout, batch, n, d, dv);
}
SPARQ_CLONES void sub_scaled(float* p, const float* g, float a, std::size_t n) { sub_scaled_impl(p, g, a, n); }
void sub_scaled(double* p, const double* g, double a, std::size_t n) { sub_scaled_impl(p, g, a, n); }
SPARQ_CLONES void adagrad(float* p, const float* g, float* s, float lr, float eps, std::size_t n) {
  adagrad_impl(p, g, s, lr, eps, n);
}
void adagrad(double* p, const double* g, double* s, double lr, double eps, std::size_t n) {
  adagrad_impl(p, g, s, lr, eps, n);
}
SPARQ_CLONES void adam(float* p, const float* g, float* m, float* v, const AdamCoeffs& k, std::size_t n) {
  adam_impl(p, g, m, v, k, n);
}
void adam(double* p, const double* g, double* m, double* v, const AdamCoeffs& k, std::size_t n) {
  adam_impl(p, g, m, v, k, n);
}

}  // namespace sparq::kernels
