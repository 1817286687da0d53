#include "sparq/model/blas.h"

#include <cblas.h>

#include <atomic>
#include <type_traits>

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

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
          std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  use_threads(m * n * k);
  const auto gemm_fn = [] {
    if constexpr (std::is_same_v<T, float>) return cblas_sgemm;
    else return cblas_dgemm;
  }();
  gemm_fn(CblasRowMajor, tr(trans_a), tr(trans_b), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
          alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t);

void set_blas_threads(int n) {
  n = n < 1 ? 1 : n;
  g_threads.store(n);
  openblas_set_num_threads(n);
  g_current.store(n);
}
int blas_threads() { return g_threads; }

}  // namespace sparq
