#include <gtest/gtest.h>

#include <cmath>

#include "sparq/core/rng.h"
#include "sparq/model/metrics.h"

namespace sparq {
namespace {

// O(n^2) definition: P(score_pos > score_neg) + 0.5 P(equal).
double pairwise_auc(const std::vector<float>& s, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = 0; j < s.size(); ++j)
      if (y[i] > 0.5f && y[j] < 0.5f) {
        den += 1;
        num += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
      }
  return den == 0 ? 0.5 : num / den;
}

TEST(Auc, MatchesPairwiseDefinitionWithTies) {
  Rng rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> s(200), y(200);
    for (std::size_t i = 0; i < s.size(); ++i) {
      y[i] = rng.uniform() < 0.3 ? 1.f : 0.f;
      s[i] = static_cast<float>(rng.below(12)) / 11.f + 0.1f * y[i] * static_cast<float>(trial % 3);  // many ties
    }
    EXPECT_NEAR(roc_auc(s, y), pairwise_auc(s, y), 1e-12);
  }
}

TEST(Auc, EdgeCases) {
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.1f, 0.9f}, std::vector<float>{0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.9f, 0.1f}, std::vector<float>{0, 1}), 0.0);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.5f, 0.5f}, std::vector<float>{0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.5f, 0.2f}, std::vector<float>{1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{}, std::vector<float>{}), 0.5);
}

TEST(Accuracy, Threshold) {
  EXPECT_DOUBLE_EQ(accuracy(std::vector<float>{0.2f, 0.7f, 0.6f}, std::vector<float>{0, 1, 0}), 2.0 / 3);
}

// The training accuracy counts on logits what the test accuracy counts on probabilities.
TEST(Accuracy, CorrectPredictionsOnLogits) {
  const std::vector<float> z{-2.f, 0.5f, 3.f, -0.1f, 0.f}, y{0, 0, 1, 1, 0};
  EXPECT_EQ(correct_predictions(z, y), 3u);  // -2 -> 0 right, 0.5 -> 1 wrong, 3 right, -0.1 wrong, 0 -> 0 right
  std::vector<float> p;
  for (float v : z) p.push_back(1.f / (1.f + std::exp(-v)));
  EXPECT_DOUBLE_EQ(accuracy(p, y), 3.0 / 5);
}

}  // namespace
}  // namespace sparq
