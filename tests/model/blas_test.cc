// gemm() against a plain triple loop in double, for every transpose
// combination, on shapes split over the compute pool (by rows when M >= N,
// by columns otherwise, with ragged last blocks) and on shapes left whole.
#include "sparq/model/blas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sparq/model/parallel.h"

namespace sparq {
namespace {

TEST(Gemm, SplitAndWholeCallsMatchAPlainLoop) {
  struct Shape {
    std::size_t m, n, k;
  };
  // 300 x 200 x 100 = 6M and 90 x 700 x 100 = 6.3M multiply-adds are split
  // (>= 2^22); 20 x 30 x 40 is not.
  const Shape shapes[] = {{300, 200, 100}, {90, 700, 100}, {20, 30, 40}};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int threads : {1, 2, 3}) {
    set_blas_threads(threads);
    set_compute_threads(threads);
    for (const auto& [m, n, k] : shapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          SCOPED_TRACE(testing::Message() << threads << " threads, " << m << "x" << n << "x" << k << " ta=" << ta
                                          << " tb=" << tb);
          // Leading dimensions wider than the matrices, to catch offset mistakes.
          const std::size_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
          std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc, 0.5f);
          for (auto& x : a) x = u(rng);
          for (auto& x : b) x = u(rng);
          const std::vector<float> c0 = c;
          gemm<float>(ta, tb, m, n, k, 2.0f, a.data(), lda, b.data(), ldb, 0.5f, c.data(), ldc);
          for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              double want = 0.5 * c0[i * ldc + j];
              for (std::size_t p = 0; p < k; ++p)
                want += 2.0 * (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
              ASSERT_NEAR(c[i * ldc + j], want, 1e-4 * (1 + std::fabs(want))) << i << " " << j;
            }
          for (std::size_t i = 0; i < m; ++i)  // the padding between rows is untouched
            for (std::size_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], 0.5f);
        }
  }
  set_blas_threads(1);
  set_compute_threads(1);
}

// The core sparq asks OpenBLAS for: the widest kernels the CPU runs, never
// a narrower one than OpenBLAS chose itself.
TEST(BlasCore, BetterCoreFollowsTheInstructionSets) {
  const CpuIsa sse{}, avx2{true, false, false}, avx512{true, true, false}, bf16{true, true, true};
  EXPECT_EQ(better_blas_core("Prescott", sse), "");
  EXPECT_EQ(better_blas_core("Prescott", avx2), "Haswell");
  EXPECT_EQ(better_blas_core("Sandybridge", avx2), "Haswell");
  EXPECT_EQ(better_blas_core("Zen", avx2), "");
  EXPECT_EQ(better_blas_core("Haswell", avx2), "");
  EXPECT_EQ(better_blas_core("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(better_blas_core("Haswell", avx512), "SkylakeX");
  EXPECT_EQ(better_blas_core("Zen", bf16), "Cooperlake");
  EXPECT_EQ(better_blas_core("SkylakeX", bf16), "");
  EXPECT_EQ(better_blas_core("SapphireRapids", bf16), "");
  // What runs now is never weaker than what blas_core() suggests.
  const BlasCore c = blas_core();
  EXPECT_FALSE(c.running.empty());
  EXPECT_EQ(c.best, better_blas_core(c.running, cpu_isa()));
}

}  // namespace
}  // namespace sparq
