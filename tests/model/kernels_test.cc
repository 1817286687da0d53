// The interaction kernels against plain loops written from the definition,
// summing in the same order (forward: each dot over k; backward: each dV
// element over j, starting from dout's bottom part or zero), so the float
// results must match bit for bit, for widths on and off the vector blocks.
#include "sparq/model/kernels.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sparq {
namespace {

std::vector<float> uniform(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

TEST(InteractionKernels, MatchPlainLoopsBitwise) {
  const std::size_t batch = 5;
  for (std::size_t d : {1u, 3u, 16u, 32u, 48u})
    for (std::size_t n : {1u, 2u, 16u, 17u, 27u, 33u, 64u}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " d=" << d);
      const std::size_t w = d + n * (n - 1) / 2;
      const auto v = uniform(batch * n * d, static_cast<unsigned>(n * 100 + d));
      const auto dout = uniform(batch * w, static_cast<unsigned>(n * 100 + d + 7));
      std::vector<float> out(batch * w), dv(batch * n * d);
      kernels::interaction_fwd(v.data(), batch, n, d, out.data());
      kernels::interaction_bwd(v.data(), dout.data(), batch, n, d, dv.data());
      for (std::size_t b = 0; b < batch; ++b) {
        const float* V = v.data() + b * n * d;
        const float* g = dout.data() + b * w;
        std::size_t p = 0;
        for (std::size_t k = 0; k < d; ++k, ++p) ASSERT_EQ(out[b * w + p], V[k]);
        for (std::size_t i = 1; i < n; ++i)
          for (std::size_t j = 0; j < i; ++j, ++p) {
            float dot = 0.0f;
            for (std::size_t k = 0; k < d; ++k) dot += V[i * d + k] * V[j * d + k];
            ASSERT_EQ(out[b * w + p], dot) << b << " " << i << " " << j;
          }
        // dV[i] = sum_j S[i, j] V[j], S symmetric from the pair gradients.
        auto pair_grad = [&](std::size_t i, std::size_t j) {
          if (i == j) return 0.0f;
          if (i < j) std::swap(i, j);
          return g[d + i * (i - 1) / 2 + j];
        };
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t k = 0; k < d; ++k) {
            float acc = i == 0 ? g[k] : 0.0f;
            for (std::size_t j = 0; j < n; ++j) acc += pair_grad(i, j) * V[j * d + k];
            ASSERT_EQ(dv[b * n * d + i * d + k], acc) << b << " " << i << " " << k;
          }
      }
    }
}

}  // namespace
}  // namespace sparq
