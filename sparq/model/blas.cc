#include "sparq/model/blas.h"

#include <cblas.h>

namespace sparq {

namespace {
CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }
}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                 const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
                 std::size_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, tr(trans_a), tr(trans_b), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
                  const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
                  std::size_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, tr(trans_a), tr(trans_b), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void set_blas_threads(int n) { openblas_set_num_threads(n); }
int blas_threads() { return openblas_get_num_threads(); }

}  // namespace sparq
