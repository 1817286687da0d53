#pragma once
// The one place that talks to BLAS. Row-major GEMM for float (OpenBLAS
// cblas_sgemm: training) and double (cblas_dgemm: the fp64 gradient checks run
// the very same layer code), so layers are written once as templates.
#include <cstddef>

namespace sparq {

// C[M x N] = alpha * op(A) * op(B) + beta * C, all row-major.
// op(A) is [M x K] (A is [K x M] when trans_a), op(B) is [K x N].
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

// n > 1 lets a large call be split over the compute pool (parallel.h:
// compute_threads() single-threaded sgemm calls on blocks of C, see blas.cc);
// 1 keeps every call on the calling thread. Process-wide: call it before the
// model runs. Several models running as threads of one process (one per
// LocalTransport rank) must use 1.
void set_blas_threads(int n);

}  // namespace sparq
