// Central finite differences against backward(), in fp64 (the layers are
// templates; Dlrm<double> runs the same code on cblas_dgemm). With h = 1e-6,
// truncation error is O(h^2 |f'''|) ~ 1e-12 and rounding O(eps |f| / h) ~
// 1e-10, so a tolerance of 1e-7 (relative, or absolute below 1) leaves
// three orders of margin and still catches any wrong term (errors of real
// bugs are O(gradient) ~ 1e-3 .. 1).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "sparq/model/dlrm.h"
#include "sparq/model/loss.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

constexpr double kH = 1e-6;
constexpr double kTol = 1e-7;

double loss_of(Dlrm<double>& m, const Batch& b) {
  auto logits = m.forward(b);
  return bce_with_logits<double>(logits, b.labels, {});
}

void expect_close(double analytic, double numeric, const std::string& what) {
  const double scale = std::max({1.0, std::abs(analytic), std::abs(numeric)});
  EXPECT_LE(std::abs(analytic - numeric), kTol * scale) << what << ": analytic " << analytic << " numeric " << numeric;
}

struct GradCheck : ::testing::Test {
  GradCheck() : model(test::tiny_config(), 42), batch(test::tiny_batch()) {
    test::liven(model);
    model.set_input_grad(true);
    auto logits = model.forward(batch);
    std::vector<double> dl(batch.size);
    base_loss = bce_with_logits<double>(logits, batch.labels, dl);
    model.backward(dl);
  }
  Dlrm<double> model;
  Batch batch;
  double base_loss = 0;
};

TEST_F(GradCheck, DenseParameters) {
  auto& dense = model.dense();
  const std::vector<double> grads(dense.grads().begin(), dense.grads().end());
  int checked = 0;
  for (const auto& v : dense.views()) {
    double l1 = 0;
    for (std::size_t i = 0; i < v.size; ++i) l1 += std::abs(grads[v.offset + i]);
    EXPECT_GT(l1, 1e-3) << v.name << ": a zero gradient would make this check vacuous";
    for (std::size_t i = 0; i < v.size; ++i) {
      double& p = dense.params()[v.offset + i];
      const double keep = p;
      p = keep + kH;
      const double up = loss_of(model, batch);
      p = keep - kH;
      const double down = loss_of(model, batch);
      p = keep;
      expect_close(grads[v.offset + i], (up - down) / (2 * kH), v.name + "[" + std::to_string(i) + "]");
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(dense.size()));
}

TEST_F(GradCheck, EmbeddingRowsIncludingUntouched) {
  for (std::size_t t = 0; t < model.tables().size(); ++t) {
    const SparseGrad<double> g = model.sparse_grad(t);
    double l1 = 0;
    for (double v : g.values) l1 += std::abs(v);
    EXPECT_GT(l1, 1e-3) << "table " << t << ": a zero gradient would make this check vacuous";
    auto& table = model.tables()[t];
    for (std::size_t r = 0; r < table.rows(); ++r) {
      const auto it = std::find(g.rows.begin(), g.rows.end(), static_cast<std::uint32_t>(r));
      for (std::size_t j = 0; j < table.dim(); ++j) {
        const double analytic = it == g.rows.end() ? 0.0 : g.values[(it - g.rows.begin()) * g.dim + j];
        double& w = table.row(r)[j];
        const double keep = w;
        w = keep + kH;
        const double up = loss_of(model, batch);
        w = keep - kH;
        const double down = loss_of(model, batch);
        w = keep;
        expect_close(analytic, (up - down) / (2 * kH), fmt::format("table {} row {} col {}", t, r, j));
      }
    }
    EXPECT_TRUE(std::is_sorted(g.rows.begin(), g.rows.end()));
    EXPECT_EQ(std::adjacent_find(g.rows.begin(), g.rows.end()), g.rows.end()) << "rows must be unique";
  }
}

TEST_F(GradCheck, DenseInputs) {
  const std::vector<double> din(model.input_grad().begin(), model.input_grad().end());
  ASSERT_EQ(din.size(), batch.dense.size());
  // Batch inputs are float: perturb in a double copy of the model input by
  // running the double model on a batch whose float input is exact, i.e.
  // compare against FD of the loss w.r.t. the value the model converts.
  for (std::size_t i = 0; i < batch.dense.size(); ++i) {
    Batch up = batch, down = batch;
    // float cannot carry a 1e-6 step exactly; use a float-representable step.
    const float h = 1.0f / 1024;
    up.dense[i] += h;
    down.dense[i] -= h;
    const double step = static_cast<double>(up.dense[i]) - static_cast<double>(down.dense[i]);
    const double numeric = (loss_of(model, up) - loss_of(model, down)) / step;
    // h ~ 1e-3: truncation O(h^2) ~ 1e-6 relative; use a looser bound here.
    const double scale = std::max({1.0, std::abs(din[i]), std::abs(numeric)});
    EXPECT_LE(std::abs(din[i] - numeric), 1e-4 * scale) << "dense input " << i;
  }
}

TEST(Loss, StableForLargeLogits) {
  std::vector<double> z{1000.0, -1000.0, 0.0}, dz(3);
  std::vector<float> y{0, 1, 1};
  const double l = bce_with_logits<double>(z, y, dz);
  EXPECT_NEAR(l, (1000.0 + 1000.0 + std::log(2.0)) / 3, 1e-9);
  EXPECT_NEAR(dz[0], 1.0 / 3, 1e-12);
  EXPECT_NEAR(dz[1], -1.0 / 3, 1e-12);
  EXPECT_NEAR(dz[2], -0.5 / 3, 1e-12);
}

TEST(Loss, GradientMatchesFiniteDifference) {
  std::vector<float> y{1, 0};
  for (double z0 : {-3.0, -0.1, 0.0, 0.7, 8.0}) {
    std::vector<double> z{z0, z0}, dz(2);
    bce_with_logits<double>(z, y, dz);
    for (int i = 0; i < 2; ++i) {
      auto zu = z, zd = z;
      zu[i] += kH;
      zd[i] -= kH;
      const double num = (bce_with_logits<double>(zu, y, {}) - bce_with_logits<double>(zd, y, {})) / (2 * kH);
      EXPECT_NEAR(dz[i], num, 1e-8);
    }
  }
}

}  // namespace
}  // namespace sparq
