// Linear models on sparse rows against plain references: the losses and
// their derivatives against closed forms and central differences, the
// lazily scaled model against a plain weight vector, the sparse gradient
// against a dense sum, margins against plain dot products.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sparq/core/error.h"
#include "sparq/model/linear.h"
#include "sparq/model/parallel.h"
#include "tests/support/sparse_rows_fixture.h"

namespace sparq {
namespace {

using test::random_rows;

TEST(LinearLoss, MatchesClosedFormsAndCentralDifferences) {
  for (float y : {-1.0f, 1.0f})
    for (float z : {-30.0f, -2.5f, -0.3f, 0.0f, 0.7f, 1.0f, 4.0f, 40.0f}) {
      EXPECT_NEAR(linear_loss(LinearLoss::Logistic, y, z), std::log1p(std::exp(-static_cast<double>(y) * z)), 1e-12);
      EXPECT_DOUBLE_EQ(linear_loss(LinearLoss::Hinge, y, z), std::max(0.0, 1.0 - static_cast<double>(y) * z));
      const float h = 0x1p-8f;  // exact next to every z here, so z +- h is what the difference divides by
      const double fd = (linear_loss(LinearLoss::Logistic, y, z + h) - linear_loss(LinearLoss::Logistic, y, z - h)) / (2 * h);
      EXPECT_NEAR(linear_dloss(LinearLoss::Logistic, y, z), fd, 1e-3) << y << " " << z;
      EXPECT_FLOAT_EQ(linear_dloss(LinearLoss::Hinge, y, z), y * z < 1 ? -y : 0.0f);
    }
  EXPECT_EQ(parse_linear_loss("hinge"), LinearLoss::Hinge);
  EXPECT_THROW(parse_linear_loss("squared"), InputError);
}

TEST(LinearModel, LazyDecayEqualsScalingEveryWeight) {
  // 2000 decays by (1 - 0.05) take the scale below its fold-in point.
  LinearModel m(50);
  std::vector<double> plain(50, 0.0);
  std::mt19937_64 g(3);
  for (int step = 0; step < 2000; ++step) {
    m.decay(0.95);
    for (double& w : plain) w *= 0.95;
    const std::size_t j = g() % 50;
    const double d = static_cast<double>(g() % 1000) / 500 - 1;
    m.add(j, d);
    plain[j] += d;
  }
  const auto w = m.weights();
  for (std::size_t j = 0; j < w.size(); ++j) {
    EXPECT_NEAR(w[j], plain[j], 1e-5 * (1 + std::abs(plain[j]))) << j;
    EXPECT_EQ(m.weight(j), w[j]);
  }
}

TEST(LinearModel, MarginsAreDotProductsOnAnyThreadCount) {
  const SparseRows r = random_rows(300, 40, 12, 5);
  LinearModel m(40);
  std::vector<float> w(40);
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = static_cast<float>(j % 7) * 0.25f - 0.5f;
  m.set_weights(w);
  std::vector<std::size_t> order(r.rows());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;
  std::vector<float> one(order.size()), two(order.size());
  set_compute_threads(1);
  linear_margins(m, r, order, one);
  set_compute_threads(2);
  linear_margins(m, r, order, two);
  set_compute_threads(1);
  EXPECT_EQ(one, two);
  for (std::size_t k = 0; k < order.size(); ++k) {
    double dot = 0;
    const auto idx = r.row_indices(order[k]);
    const auto val = r.row_values(order[k]);
    for (std::size_t i = 0; i < idx.size(); ++i) dot += w[idx[i]] * static_cast<double>(val[i]);
    EXPECT_NEAR(one[k], dot, 1e-5) << k;  // quarters and halves: exact in float, up to the sum's order
  }
}

TEST(SparseGradient, EqualsTheDenseSumAndClearsForTheNextBatch) {
  const SparseRows r = random_rows(200, 3000, 20, 9);  // 47 words of bitmap, most untouched
  SparseGradient g(3000);
  for (std::size_t batch = 0; batch < 3; ++batch) {
    std::vector<double> dense(3000, 0.0);
    std::vector<bool> hit(3000, false);
    for (std::size_t i = batch * 50; i < batch * 50 + 50; ++i) {
      const float c = static_cast<float>(i % 5) - 2;
      g.add_row(r.row_indices(i), r.row_values(i), c);
      for (std::size_t k = 0; k < r.row_indices(i).size(); ++k) {
        dense[r.row_indices(i)[k]] += c * static_cast<double>(r.row_values(i)[k]);
        hit[r.row_indices(i)[k]] = true;
      }
    }
    std::vector<std::uint32_t> idx(g.capacity());
    std::vector<float> val(g.capacity());
    const std::size_t n = g.drain(idx, val);
    ASSERT_LE(n, idx.size());
    idx.resize(n);
    std::size_t k = 0;
    for (std::uint32_t j = 0; j < 3000; ++j) {
      if (!hit[j]) continue;
      ASSERT_LT(k, idx.size());
      EXPECT_EQ(idx[k], j);
      EXPECT_EQ(val[k], static_cast<float>(dense[j])) << j;  // small integers and quarters: exact
      ++k;
    }
    EXPECT_EQ(k, idx.size());
    EXPECT_EQ(g.capacity(), 0u);
  }
}

}  // namespace
}  // namespace sparq
