// Dlrm<float>::forward against a plain, loop-only forward of the same tiny
// model written straight from the definition (no BLAS, no shared code).
#include <gtest/gtest.h>

#include <cmath>

#include "sparq/model/dlrm.h"
#include "sparq/model/loss.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

std::vector<double> naive_mlp(const DenseParams<float>& p, const std::string& prefix, const MlpSpec& s,
                              std::vector<double> x) {
  for (std::size_t l = 0; l < s.num_layers(); ++l) {
    const auto W = p.param(p.find(prefix + "." + std::to_string(l) + ".weight"));
    const auto b = p.param(p.find(prefix + "." + std::to_string(l) + ".bias"));
    std::vector<double> y(s.dims[l + 1]);
    for (std::size_t o = 0; o < y.size(); ++o) {
      double acc = b[o];
      for (std::size_t i = 0; i < s.dims[l]; ++i) acc += double(W[o * s.dims[l] + i]) * x[i];
      const bool relu = l + 1 < s.num_layers() || s.relu_last;
      y[o] = relu ? std::max(acc, 0.0) : acc;
    }
    x = y;
  }
  return x;
}

TEST(ReferenceForward, TinyModelMatchesNaive) {
  const DlrmConfig cfg = test::tiny_config();
  Dlrm<float> model(cfg, 11);
  test::liven(model);
  const Batch batch = test::tiny_batch(3);
  const auto logits = model.forward(batch);
  const std::size_t d = cfg.emb_dim;
  for (std::size_t s = 0; s < batch.size; ++s) {
    std::vector<double> x(batch.dense.begin() + s * 4, batch.dense.begin() + (s + 1) * 4);
    std::vector<std::vector<double>> V{naive_mlp(model.dense(), "bot", cfg.bot_spec(), x)};
    for (std::size_t t = 0; t < cfg.num_tables(); ++t) {
      std::vector<double> e(d, 0.0);
      const auto& bag = batch.sparse[t];
      for (auto i = bag.offsets[s]; i < bag.offsets[s + 1]; ++i)
        for (std::size_t j = 0; j < d; ++j) e[j] += model.tables()[t].row(bag.indices[i])[j];
      V.push_back(e);
    }
    std::vector<double> r = V[0];
    for (std::size_t i = 0; i < V.size(); ++i)
      for (std::size_t j = 0; j < i; ++j) {
        double dot = 0;
        for (std::size_t k = 0; k < d; ++k) dot += V[i][k] * V[j][k];
        r.push_back(dot);
      }
    ASSERT_EQ(r.size(), cfg.interaction_width());
    const double z = naive_mlp(model.dense(), "top", cfg.top_spec(), r)[0];
    // float forward vs double loops: a few ulps per accumulation level.
    EXPECT_NEAR(logits[s], z, 1e-5 * std::max(1.0, std::abs(z))) << "sample " << s;
  }
}

TEST(ReferenceForward, InitMatchesReferenceDistributions) {
  DlrmConfig cfg;
  cfg.table_rows = {1000};
  Dlrm<float> model(cfg, 1);
  const auto& p = model.dense();
  // bot.1.weight is 256 x 512: std sqrt(2/(512+256)).
  const auto w = p.param(p.find("bot.1.weight"));
  double s2 = 0;
  for (float v : w) s2 += double(v) * v;
  EXPECT_NEAR(std::sqrt(s2 / w.size()), std::sqrt(2.0 / 768), 0.01 * std::sqrt(2.0 / 768));
  const auto e = model.tables()[0].weights();
  const float a = std::sqrt(1.0f / 1000);
  float lo = 1, hi = -1;
  for (float v : e) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -a);
  EXPECT_LE(hi, a);
  EXPECT_LT(lo, -0.9f * a);
  EXPECT_GT(hi, 0.9f * a);
}

TEST(ReferenceForward, SameSeedSameModel) {
  const DlrmConfig cfg = test::tiny_config();
  Dlrm<float> a(cfg, 5), b(cfg, 5), c(cfg, 6);
  EXPECT_TRUE(std::equal(a.dense().params().begin(), a.dense().params().end(), b.dense().params().begin()));
  EXPECT_FALSE(std::equal(a.dense().params().begin(), a.dense().params().end(), c.dense().params().begin()));
}

}  // namespace
}  // namespace sparq
