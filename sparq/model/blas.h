#pragma once
// The one place that talks to BLAS. Row-major GEMM for float (training:
// oneDNN's sgemm, whose kernels are generated at run time for the CPU's
// instruction sets; OpenBLAS's cblas_sgemm with SPARQ_GEMM=openblas) and
// double (OpenBLAS cblas_dgemm: the fp64 gradient checks run the very same
// layer code), so layers are written once as templates. On the model's
// shapes oneDNN took 3-11 % less time than OpenBLAS, BLIS or libxsmm, and
// needs no table of CPU models (docs/results.md, "GEMM libraries").
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sparq {

// How a float GEMM multiplies: in fp32, or with its operands rounded to
// bfloat16 (nearest even) and the products accumulated in fp32 (bf16 is
// sparq's option, not the papers': --mlp-precision). bf16 runs on oneDNN
// whatever SPARQ_GEMM says, and only on CPUs with AVX512_BF16
// (bf16_gemm_unavailable()); a product with one row or one column (the
// logit layer) stays fp32, where oneDNN's bf16 kernels are slower.
enum class GemmPrecision { fp32, bf16 };
// "fp32" / "bf16"; throws InputError on anything else.
GemmPrecision parse_gemm_precision(std::string_view s);
std::string_view to_string(GemmPrecision p);
// Why bf16 GEMMs cannot run here ("" when they can).
std::string bf16_gemm_unavailable();

// C[M x N] = alpha * op(A) * op(B) + beta * C, all row-major.
// op(A) is [M x K] (A is [K x M] when trans_a), op(B) is [K x N].
// GemmPrecision::bf16 is for float only.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
          std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc,
          GemmPrecision precision = GemmPrecision::fp32);

// A float matrix rounded to bf16 (nearest even), rows x cols contiguous in
// the source's orientation. An operand that several bf16 GEMMs read is
// rounded once: an MLP layer's input and weights (its forward and both
// backward products), its output gradient (both backward products).
struct Bf16Matrix {
  std::vector<std::uint16_t> v;  // grows only: the shapes alternate
  std::size_t rows = 0, cols = 0;
  bool empty() const { return rows == 0; }
  void clear() { rows = cols = 0; }
};
// src is rows x cols with leading dimension ld. Only where
// bf16_gemm_unavailable() is "".
void round_to_bf16(const float* src, std::size_t rows, std::size_t cols, std::size_t ld, Bf16Matrix& out);
// Whether gemm(..., GemmPrecision::bf16) multiplies an m x n product in bf16:
// not a matrix-vector product.
bool bf16_product(std::size_t m, std::size_t n);
// gemm(..., GemmPrecision::bf16) on operands rounded before: a holds A
// ([m x k], or [k x m] when trans_a), b holds B ([k x n], or [n x k]).
// Requires bf16_product(m, n).
void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const Bf16Matrix& a, const Bf16Matrix& b, float beta, float* c, std::size_t ldc);

// n > 1 lets a large call be split over the compute pool (parallel.h:
// compute_threads() single-threaded sgemm calls on blocks of C, see blas.cc);
// 1 keeps every call on the calling thread. Process-wide: call it before the
// model runs. Several models running as threads of one process (one per
// LocalTransport rank) must use 1.
void set_blas_threads(int n);

// Which library runs the float GEMMs: SPARQ_GEMM=onednn (the default) or
// openblas. Throws InputError on any other value.
enum class FloatGemm { onednn, openblas };
FloatGemm read_float_gemm();

// Which OpenBLAS kernels run, and the best this CPU can take. Debian's
// OpenBLAS picks its kernels at load time from the CPU's model number, or
// from OPENBLAS_CORETYPE: on a CPU it does not know it falls back to SSE3
// ("Prescott"), and an environment may pin an older core. Either costs
// the model's GEMMs up to 1.5x (docs/results.md).
struct BlasCore {
  std::string running;  // openblas_get_corename()
  std::string best;     // for the CPU's instruction sets; empty if `running` is as good
};
BlasCore blas_core();
// The decision behind blas_core(), for a core name and what the CPU has.
struct CpuIsa {
  bool avx2_fma = false, avx512 = false, avx512_bf16 = false;  // avx512: F, CD, BW, DQ and VL
};
CpuIsa cpu_isa();
std::string better_blas_core(std::string_view running, const CpuIsa& isa);

// Called first thing in main(): when float GEMMs run on OpenBLAS
// (SPARQ_GEMM=openblas) and the kernels it loaded are weaker than the CPU,
// re-executes this program (once) with OPENBLAS_CORETYPE naming the best
// core, since OpenBLAS reads it only at load time. SPARQ_KEEP_BLAS_CORE=1
// keeps what OpenBLAS chose.
void ensure_best_blas_core(char** argv);
// "gemm: <library, kernels> (why)[, MLPs in bf16 ...]", for the start-up report.
std::string gemm_line(GemmPrecision mlp = GemmPrecision::fp32);

}  // namespace sparq
