#include "sparq/model/blas.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <type_traits>

#include <fmt/format.h>

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/core/parallel_clock.h"
#include "sparq/model/bf16_matmul.h"
#include "sparq/model/parallel.h"

namespace sparq {

namespace {
CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }

// Threads for one large call. OpenBLAS's own threading (its worker threads
// share packed panels and wait on each other inside a call) measured slower
// on DLRM's layers than splitting the call ourselves: each of the
// compute_threads() pool threads runs one single-threaded sgemm on its own
// block of rows (or of columns, whichever dimension is larger) of C, with no
// synchronisation inside the call and no second set of threads competing
// with the pool's for the cores (batch 1024, 2 threads: 43.6k against 41.6k
// samples/s, median of 3 interleaved runs). Each element of C is still one
// sgemm's dot product over all of K. Calls below kMinParallelMacs
// multiply-adds run on the calling thread: for DLRM's thin layers (13 -> 512,
// 64 -> 16, the logit) a hand-off costs more than the work.
constexpr std::size_t kMinParallelMacs = std::size_t{1} << 22;  // e.g. 128 x 256 x 128
constexpr std::size_t kSplitBlock = 16;                         // rows / columns per unit of a split
// Atomics because several model replicas may run as threads of one process
// (LocalTransport ranks); those should call set_blas_threads(1), after which
// no gemm() is split.
std::atomic<int> g_threads{1};  // what set_blas_threads asked for
}  // namespace

// float GEMMs: oneDNN's sgemm unless SPARQ_GEMM=openblas. Read once.
FloatGemm read_float_gemm() {
  const char* e = std::getenv("SPARQ_GEMM");
  if (!e || std::string_view(e) == "onednn") return FloatGemm::onednn;
  if (std::string_view(e) == "openblas") return FloatGemm::openblas;
  SPARQ_THROW(InputError, "SPARQ_GEMM={}: expected onednn or openblas", e);
}

GemmPrecision parse_gemm_precision(std::string_view s) {
  if (s == "fp32") return GemmPrecision::fp32;
  if (s == "bf16") return GemmPrecision::bf16;
  SPARQ_THROW(InputError, "precision '{}': expected fp32 or bf16", s);
}

std::string_view to_string(GemmPrecision p) { return p == GemmPrecision::bf16 ? "bf16" : "fp32"; }

namespace {
void onednn_sgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                  std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  // Debian's oneDNN runs on OpenMP with omp_get_max_threads() threads, a
  // per-thread setting: one for every thread that calls it, since the split
  // over threads is ours (above).
  thread_local const bool one_thread = (omp_set_num_threads(1), true);
  (void)one_thread;
  const auto d = [](std::size_t x) { return static_cast<dnnl_dim_t>(x); };
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', d(m), d(n), d(k), alpha, a, d(lda), b,
                                      d(ldb), beta, c, d(ldc));
  if (st != dnnl_success)
    SPARQ_THROW(Error, "oneDNN sgemm {}x{}x{} (lda {}, ldb {}, ldc {}) failed with status {}", m, n, k, lda, ldb, ldc,
                static_cast<int>(st));
}
}  // namespace

namespace {
// Runs call(m1, n1, a1, b1, c1) on the whole product, or on blocks of rows
// (or columns, whichever dimension is larger) of C over the compute pool;
// a1 and b1 point at the block's part of the operands, which keep their
// leading dimensions.
template <class A, class B, class C, class Call>
void split_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, const A* a, std::size_t lda,
                const B* b, std::size_t ldb, C* c, std::size_t ldc, const Call& call) {
  const EmulatedThreads& e = emulated_threads();  // a rank on the virtual clock splits as its threads would
  if ((e.clock ? e.threads : g_threads.load(std::memory_order_relaxed)) < 2 || m * n * k < kMinParallelMacs) {
    call(m, n, a, b, c);
    return;
  }
  if (m >= n) {
    parallel_for((m + kSplitBlock - 1) / kSplitBlock, 1, [&](std::size_t i0, std::size_t i1) {
      const std::size_t r0 = i0 * kSplitBlock, r1 = std::min(m, i1 * kSplitBlock);
      call(r1 - r0, n, trans_a ? a + r0 : a + r0 * lda, b, c + r0 * ldc);
    });
  } else {
    parallel_for((n + kSplitBlock - 1) / kSplitBlock, 1, [&](std::size_t i0, std::size_t i1) {
      const std::size_t c0 = i0 * kSplitBlock, c1 = std::min(n, i1 * kSplitBlock);
      call(m, c1 - c0, a, trans_b ? b + c0 * ldb : b + c0, c + c0);
    });
  }
}
}  // namespace

// Decided on the whole product, not per block, so that the result does not
// depend on the number of threads.
bool bf16_product(std::size_t m, std::size_t n) { return m > 1 && n > 1; }

void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const Bf16Matrix& a, const Bf16Matrix& b, float beta, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  SPARQ_CHECK(bf16_product(m, n), "a bf16 GEMM of a {}x{} product (matrix-vector products stay fp32)", m, n);
  SPARQ_CHECK(a.rows == (trans_a ? k : m) && a.cols == (trans_a ? m : k) && b.rows == (trans_b ? n : k) &&
                  b.cols == (trans_b ? k : n),
              "bf16 GEMM {}x{}x{} (trans {}{}) on operands of {}x{} and {}x{}", m, n, k, trans_a ? 'T' : 'N',
              trans_b ? 'T' : 'N', a.rows, a.cols, b.rows, b.cols);
  split_gemm(trans_a, trans_b, m, n, k, a.v.data(), a.cols, b.v.data(), b.cols, c, ldc,
             [&](std::size_t m1, std::size_t n1, const std::uint16_t* a1, const std::uint16_t* b1, float* c1) {
               const ChargedKernel charged("bf16_gemm", m1, n1, k, 2 * trans_a + trans_b);
               bf16_matmul(trans_a, trans_b, m1, n1, k, alpha, a1, a.cols, b1, b.cols, beta, c1, ldc);
             });
}

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
          std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, GemmPrecision precision) {
  if (m == 0 || n == 0) return;
  SPARQ_CHECK((std::is_same_v<T, float> || precision == GemmPrecision::fp32), "bf16 GEMMs are for float operands");
  if constexpr (std::is_same_v<T, float>) {
    if (precision == GemmPrecision::bf16 && bf16_product(m, n)) {
      thread_local Bf16Matrix a16, b16;
      round_to_bf16(a, trans_a ? k : m, trans_a ? m : k, lda, a16);
      round_to_bf16(b, trans_b ? n : k, trans_b ? k : n, ldb, b16);
      return gemm_bf16(trans_a, trans_b, m, n, k, alpha, a16, b16, beta, c, ldc);
    }
  }
  [[maybe_unused]] static const bool single = (openblas_set_num_threads(1), true);  // parallelism is ours (see above)
  const auto gemm_fn = [] {
    if constexpr (std::is_same_v<T, float>) return cblas_sgemm;
    else return cblas_dgemm;
  }();
  static const FloatGemm lib = read_float_gemm();
  split_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
             [&](std::size_t m1, std::size_t n1, const T* a1, const T* b1, T* c1) {
               const ChargedKernel charged(lib == FloatGemm::onednn && sizeof(T) == 4 ? "onednn_sgemm"
                                           : sizeof(T) == 4                           ? "openblas_sgemm"
                                                                                      : "openblas_dgemm",
                                           m1, n1, k, 2 * trans_a + trans_b);
               if constexpr (std::is_same_v<T, float>)
                 if (lib == FloatGemm::onednn)
                   return onednn_sgemm(trans_a, trans_b, m1, n1, k, alpha, a1, lda, b1, ldb, beta, c1, ldc);
               gemm_fn(CblasRowMajor, tr(trans_a), tr(trans_b), static_cast<int>(m1), static_cast<int>(n1),
                       static_cast<int>(k), alpha, a1, static_cast<int>(lda), b1, static_cast<int>(ldb), beta, c1,
                       static_cast<int>(ldc));
             });
}
template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t, GemmPrecision);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t, GemmPrecision);

void set_blas_threads(int n) { g_threads.store(n < 1 ? 1 : n); }

namespace {
// OpenBLAS 0.3.21's x86-64 cores by the widest kernels they run; unknown
// names (older or other vendors' cores) rank lowest.
int core_level(std::string_view core) {
  for (std::string_view c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core == c) return 2;
  for (std::string_view c : {"Haswell", "Zen"})
    if (core == c) return 1;
  return 0;
}
}  // namespace

CpuIsa cpu_isa() {
  CpuIsa isa;
  isa.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  isa.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
  isa.avx512_bf16 = isa.avx512 && __builtin_cpu_supports("avx512bf16");
  return isa;
}

std::string better_blas_core(std::string_view running, const CpuIsa& isa) {
  const std::string best = isa.avx512_bf16 ? "Cooperlake" : isa.avx512 ? "SkylakeX" : isa.avx2_fma ? "Haswell" : "";
  return !best.empty() && core_level(running) < core_level(best) ? best : "";
}

BlasCore blas_core() {
  BlasCore c{openblas_get_corename(), ""};
  c.best = better_blas_core(c.running, cpu_isa());
  return c;
}

namespace {
std::string pinned_by() {
  const char* pinned = std::getenv("OPENBLAS_CORETYPE");
  return pinned ? fmt::format("OPENBLAS_CORETYPE={}", pinned) : "OpenBLAS's detection";
}
bool keep_core() {
  const char* keep = std::getenv("SPARQ_KEEP_BLAS_CORE");
  return keep && std::string_view(keep) == "1";
}
}  // namespace

void ensure_best_blas_core(char** argv) {
  const char* lib = std::getenv("SPARQ_GEMM");
  if (!lib || std::string_view(lib) != "openblas") return;  // OpenBLAS runs only the fp64 checks
  const BlasCore c = blas_core();
  if (c.best.empty() || keep_core() || std::getenv("SPARQ_BLAS_CORE_WAS")) return;  // re-executed once at most
  setenv("SPARQ_BLAS_CORE_WAS", fmt::format("{} from {}", c.running, pinned_by()).c_str(), 1);
  setenv("OPENBLAS_CORETYPE", c.best.c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the core we have
}

namespace {
std::string openblas_core_line() {
  const BlasCore c = blas_core();
  const char* was = std::getenv("SPARQ_BLAS_CORE_WAS");
  if (!c.best.empty()) {
    if (keep_core())
      return fmt::format("OpenBLAS core {} (from {}; the CPU takes {}, kept by SPARQ_KEEP_BLAS_CORE=1)", c.running,
                         pinned_by(), c.best);
    return fmt::format("OpenBLAS core {} (from {}; the CPU takes {}, which this OpenBLAS did not load)", c.running,
                       pinned_by(), c.best);
  }
  if (was) return fmt::format("OpenBLAS core {} (chosen by sparq for this CPU; it had {})", c.running, was);
  return fmt::format("OpenBLAS core {} (from {})", c.running, pinned_by());
}

std::string_view onednn_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}
}  // namespace

std::string gemm_line(GemmPrecision mlp) {
  const dnnl_version_t* v = dnnl_version();
  const std::string fp32 =
      read_float_gemm() == FloatGemm::openblas
          ? openblas_core_line() + ", by SPARQ_GEMM=openblas"
          : fmt::format("oneDNN {}.{}.{} sgemm, {} kernels (generated for this CPU's instruction sets)", v->major,
                        v->minor, v->patch, onednn_isa_name(dnnl_get_effective_cpu_isa()));
  if (mlp == GemmPrecision::fp32) return "gemm: " + fp32;
  return fmt::format("gemm: MLPs in bf16 on oneDNN {}.{}.{} matmul (bf16 operands, fp32 accumulation); fp32: {}",
                     v->major, v->minor, v->patch, fp32);
}

}  // namespace sparq
