#pragma once
// One single-threaded GEMM with bfloat16 operands on oneDNN's matmul (its
// brgemm kernels on AVX512_BF16 or AMX): the operands are rounded to bf16
// (nearest even) into per-thread buffers, the products are accumulated and
// written in fp32. blas.cc splits a large call over the compute pool and
// calls this once per block; gemm(..., GemmPrecision::bf16) is the API, and
// bf16_gemm_unavailable() (blas.h, defined here) says whether this CPU can.
#include <cstddef>

namespace sparq {

// C[M x N] = alpha * op(A) * op(B) + beta * C, row-major, as gemm().
void bf16_matmul(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                 std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc);

}  // namespace sparq
