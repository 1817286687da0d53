#pragma once
// One single-threaded GEMM with bfloat16 operands on oneDNN's matmul (its
// brgemm kernels on AVX512_BF16 or AMX): the products are accumulated and
// written in fp32. blas.cc splits a large call over the compute pool and
// calls this once per block; gemm_bf16 and gemm(..., GemmPrecision::bf16)
// are the API. Defined here too: round_to_bf16 and bf16_gemm_unavailable()
// (blas.h), which says whether this CPU can.
#include <cstddef>
#include <cstdint>

namespace sparq {

// C[M x N] = alpha * op(A) * op(B) + beta * C, row-major, as gemm(), on
// bf16 operands (as uint16 bit patterns).
void bf16_matmul(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                 const std::uint16_t* a, std::size_t lda, const std::uint16_t* b, std::size_t ldb, float beta,
                 float* c, std::size_t ldc);

}  // namespace sparq
