// gemm() against a plain triple loop in double, for every transpose
// combination, on shapes split over the compute pool (by rows when M >= N,
// by columns otherwise, with ragged last blocks) and on shapes left whole.
#include "sparq/model/blas.h"

#include <gtest/gtest.h>

#include "sparq/compress/half.h"
#include "sparq/core/error.h"
#include "sparq/model/mlp.h"

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "sparq/model/parallel.h"

namespace sparq {
namespace {

float bf16_round(float x) { return compress::bf16_to_float(compress::float_to_bf16(x)); }

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

// bf16 GEMMs: the same as a plain loop in double over the operands rounded
// to bf16 (each product of two bf16 values is exact in fp32, so only the
// fp32 accumulation differs), on split and whole calls, every transpose,
// with alpha and beta; measurably not the fp32 product; a matrix-vector
// product stays fp32 bit for bit.
TEST(Gemm, Bf16MatchesAPlainLoopOnRoundedOperands) {
  if (const std::string why = bf16_gemm_unavailable(); !why.empty()) GTEST_SKIP() << why;
  struct Shape {
    std::size_t m, n, k;
  };
  const Shape shapes[] = {{300, 200, 100}, {90, 700, 100}, {20, 30, 40}, {33, 17, 13}};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int threads : {1, 3}) {
    set_blas_threads(threads);
    set_compute_threads(threads);
    for (const auto& [m, n, k] : shapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (float beta : {0.0f, 0.5f}) {
            SCOPED_TRACE(testing::Message() << threads << " threads, " << m << "x" << n << "x" << k << " ta=" << ta
                                            << " tb=" << tb << " beta=" << beta);
            const std::size_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
            std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc, 0.5f);
            for (auto& x : a) x = u(rng);
            for (auto& x : b) x = u(rng);
            const std::vector<float> c0 = c;
            gemm<float>(ta, tb, m, n, k, 2.0f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc,
                        GemmPrecision::bf16);
            double off_fp32 = 0;  // largest distance from the fp32 product
            for (std::size_t i = 0; i < m; ++i)
              for (std::size_t j = 0; j < n; ++j) {
                double want = beta * c0[i * ldc + j], exact = want;
                for (std::size_t p = 0; p < k; ++p) {
                  const float x = ta ? a[p * lda + i] : a[i * lda + p], y = tb ? b[j * ldb + p] : b[p * ldb + j];
                  want += 2.0 * bf16_round(x) * bf16_round(y);
                  exact += 2.0 * x * y;
                }
                ASSERT_NEAR(c[i * ldc + j], want, 1e-5 * (1 + std::sqrt(static_cast<double>(k)))) << i << " " << j;
                off_fp32 = std::max(off_fp32, std::fabs(c[i * ldc + j] - exact));
              }
            EXPECT_GT(off_fp32, 1e-3);  // bf16 keeps 8 bits: sums of k products of [-1, 1] move by ~1e-2
            for (std::size_t i = 0; i < m; ++i)
              for (std::size_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], 0.5f);
          }
  }
  set_blas_threads(1);
  set_compute_threads(1);
  std::vector<float> x(64 * 32), w(32), y16(64), y32(64);
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  gemm<float>(false, false, 64, 1, 32, 1.0f, x.data(), 32, w.data(), 1, 0.0f, y16.data(), 1, GemmPrecision::bf16);
  gemm<float>(false, false, 64, 1, 32, 1.0f, x.data(), 32, w.data(), 1, 0.0f, y32.data(), 1);
  EXPECT_EQ(y16, y32);
}

// A bf16 MLP against the same MLP in fp32: outputs, input gradient and every
// parameter gradient within bf16's rounding, none made by a product
// identical (a product left in fp32 would be; operands swapped or stale
// would be far off).
TEST(Gemm, Bf16MlpTracksFp32) {
  if (const std::string why = bf16_gemm_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::size_t B = 40;
  DenseParams<float> s32, s16;
  Mlp<float> m32(MlpSpec{{13, 64, 48, 32, 1}, false}, s32, "m");
  Mlp<float> m16(MlpSpec{{13, 64, 48, 32, 1}, false, GemmPrecision::bf16}, s16, "m");
  m32.init(4, 0);
  m16.init(4, 0);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> x(B * 13), dy(B);
  for (auto& v : x) v = nd(rng);
  for (auto& v : dy) v = nd(rng);
  // Relative distance of two tensors in the 2-norm.
  const auto rel = [](std::span<const float> a, std::span<const float> b) {
    double d = 0, n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), n += b[i] * b[i];
    return std::sqrt(d / n);
  };
  const float* y32 = m32.forward(x.data(), B);
  const float* y16 = m16.forward(x.data(), B);
  const float* dx32 = m32.backward(dy.data(), true);
  const float* dx16 = m16.backward(dy.data(), true);
  std::vector<std::pair<std::string, double>> dist{{"y", rel({y16, B}, {y32, B})},
                                                    {"dx", rel({dx16, B * 13}, {dx32, B * 13})}};
  for (const auto& v : s32.views())
    dist.emplace_back(v.name, rel(s16.grad(s16.find(v.name)), s32.grad(s32.find(v.name))));
  for (const auto& [name, d] : dist) {
    // bf16 operands: 2^-9 relative each; measured 5e-4 (y) to 5e-2 (the
    // first layers' gradients, sums of many signed terms).
    EXPECT_LT(d, 0.1) << name;
    if (name != "m.3.bias") {  // that one is dy's column sum: no product
      EXPECT_GT(d, 0.0) << name;
    }
  }
}

// A bf16 MLP rounds each operand once and reuses it (a layer's input and
// weights from its forward, its output gradient in both backward products):
// bit for bit what one gemm(..., bf16) per product computes, which rounds its
// operands itself. Twice on one tape with new weights and inputs, so a copy
// kept from the pass before would show; and with a batch of one, where the
// forward multiplies in fp32 and the weight gradient in bf16.
TEST(Gemm, Bf16MlpEqualsOneGemmPerProduct) {
  if (const std::string why = bf16_gemm_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::vector<std::size_t> dims{13, 64, 48, 1};
  DenseParams<float> s;
  Mlp<float> mlp(MlpSpec{dims, false, GemmPrecision::bf16}, s, "m");
  mlp.init(4, 0);
  std::mt19937 rng(12);
  std::normal_distribution<float> nd;
  const auto bf16 = GemmPrecision::bf16;
  for (const std::size_t B : {40, 40, 1}) {
    for (const auto& v : s.views())
      for (auto& p : s.param(s.find(v.name))) p += 0.1f * nd(rng);
    std::vector<float> x(B * dims[0]), dy(B);
    for (auto& v : x) v = nd(rng);
    for (auto& v : dy) v = nd(rng);
    const float* y = mlp.forward(x.data(), B);
    const float* dx = mlp.backward(dy.data(), true);
    // The reference: layer by layer, plain loops around gemm(..., bf16).
    std::vector<std::vector<float>> in{x};
    for (std::size_t l = 0; l + 1 < dims.size(); ++l) {
      const auto w = s.param(s.find("m." + std::to_string(l) + ".weight"));
      const auto b = s.param(s.find("m." + std::to_string(l) + ".bias"));
      std::vector<float> out(B * dims[l + 1]);
      gemm<float>(false, true, B, dims[l + 1], dims[l], 1.0f, in[l].data(), dims[l], w.data(), dims[l], 0.0f,
                  out.data(), dims[l + 1], bf16);
      for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] += b[i % dims[l + 1]];
        if (l + 2 < dims.size()) out[i] = std::max(out[i], 0.0f);
      }
      in.push_back(out);
    }
    ASSERT_EQ(std::vector<float>(y, y + B), in.back()) << "y, batch " << B;
    std::vector<float> g = dy;
    for (std::size_t l = dims.size() - 1; l-- > 0;) {
      const std::size_t n_in = dims[l], n_out = dims[l + 1];
      if (l + 2 < dims.size())
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = in[l + 1][i] > 0 ? g[i] : 0.0f;
      std::vector<float> dw(n_out * n_in), dxl(B * n_in);
      gemm<float>(true, false, n_out, n_in, B, 1.0f, g.data(), n_out, in[l].data(), n_in, 0.0f, dw.data(), n_in, bf16);
      const auto grad = s.grad(s.find("m." + std::to_string(l) + ".weight"));
      ASSERT_EQ(std::vector<float>(grad.begin(), grad.end()), dw) << "layer " << l << ", batch " << B;
      gemm<float>(false, false, B, n_in, n_out, 1.0f, g.data(), n_out,
                  s.param(s.find("m." + std::to_string(l) + ".weight")).data(), n_in, 0.0f, dxl.data(), n_in, bf16);
      g = dxl;
    }
    ASSERT_EQ(std::vector<float>(dx, dx + B * dims[0]), g) << "dx, batch " << B;
  }
}

// Without AVX512_BF16, a bf16 MLP is refused with the reason, never run slowly
// by emulation; on any CPU a bf16 double model is refused.
TEST(Gemm, Bf16MlpRefusedWhereItCannotRun) {
  DenseParams<double> dstore;
  EXPECT_THROW(Mlp<double>(MlpSpec{{4, 3}, true, GemmPrecision::bf16}, dstore, "d"), InputError);
  DenseParams<float> store;
  const std::string why = bf16_gemm_unavailable();
  if (why.empty()) {
    EXPECT_NO_THROW(Mlp<float>(MlpSpec{{4, 3}, true, GemmPrecision::bf16}, store, "f"));
  } else {
    try {
      Mlp<float>(MlpSpec{{4, 3}, true, GemmPrecision::bf16}, store, "f");
      ADD_FAILURE() << "a bf16 MLP must be refused here";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_gemm_precision("bf16"), GemmPrecision::bf16);
  EXPECT_THROW(parse_gemm_precision("fp16"), InputError);
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
