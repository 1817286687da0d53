#include "sparq/model/blas.h"

#include <cblas.h>

#include <atomic>

namespace sparq {

namespace {
CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }

// OpenBLAS splits every call over all its threads once it is above a tiny
// size; for DLRM's thin layers (13 -> 512, 64 -> 16, the logit) the thread
// hand-off costs more than the work (measured: a 128x512x13 sgemm runs at
// 50 GFLOP/s on one thread, 16 on two). Calls below kMinParallelMacs
// multiply-adds use one thread; the caller-set count applies above.
constexpr std::size_t kMinParallelMacs = std::size_t{1} << 22;  // e.g. 128 x 256 x 128
// Atomics because several model replicas may run as threads of one process
// (LocalTransport ranks); those should call set_blas_threads(1), after which
// no gemm() ever changes OpenBLAS's setting.
std::atomic<int> g_threads{1};   // what set_blas_threads asked for
std::atomic<int> g_current{-1};  // what OpenBLAS is set to now

void use_threads(std::size_t macs) {
  const int want = macs >= kMinParallelMacs ? g_threads.load(std::memory_order_relaxed) : 1;
  if (want != g_current.load(std::memory_order_relaxed)) {
    openblas_set_num_threads(want);
    g_current.store(want, std::memory_order_relaxed);
  }
}
}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                 const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
                 std::size_t ldc) {
  if (m == 0 || n == 0) return;
  use_threads(m * n * k);
  cblas_sgemm(CblasRowMajor, tr(trans_a), tr(trans_b), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
                  const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta, double* c,
                  std::size_t ldc) {
  if (m == 0 || n == 0) return;
  use_threads(m * n * k);
  cblas_dgemm(CblasRowMajor, tr(trans_a), tr(trans_b), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void set_blas_threads(int n) {
  n = n < 1 ? 1 : n;
  g_threads.store(n);
  openblas_set_num_threads(n);
  g_current.store(n);
}
int blas_threads() { return g_threads; }

}  // namespace sparq
