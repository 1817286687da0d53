#include "sparq/compress/threshold_pack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

struct Pairs {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  bool operator==(const Pairs&) const = default;
};

Pairs reference(const std::vector<float>& x, float tau) {
  Pairs p;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::fabs(x[i]) >= tau) p.idx.push_back(static_cast<std::uint32_t>(i)), p.val.push_back(x[i]);
  return p;
}

Pairs run(const std::vector<float>& x, float tau) {
  Pairs p{std::vector<std::uint32_t>(x.size()), std::vector<float>(x.size())};
  const std::size_t k = threshold_pack(x, tau, p.idx, p.val);
  p.idx.resize(k);
  p.val.resize(k);
  return p;
}

TEST(ThresholdPack, MatchesPlainLoop) {
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  for (std::size_t n : {0u, 1u, 15u, 16u, 17u, 33u, 1000u, 65541u})
    for (float tau : {0.0f, 0.5f, 2.5f, 10.0f}) {
      std::vector<float> x(n);
      for (auto& v : x) v = d(rng);
      ASSERT_EQ(run(x, tau), reference(x, tau)) << n << " " << tau;
    }
}

TEST(ThresholdPack, NanNeverPassesAndInfTauKeepsOnlyInf) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{1.0f, nan, -inf, 5.0f, inf};
  EXPECT_EQ(run(x, 0.0f), (Pairs{{0, 2, 3, 4}, {1.0f, -inf, 5.0f, inf}}));
  EXPECT_EQ(run(x, inf), (Pairs{{2, 4}, {-inf, inf}}));
}

TEST(ThresholdPack, FeedbackPackSplitsExactly) {
  std::mt19937 rng(4);
  std::normal_distribution<float> d;
  for (std::size_t n : {0u, 7u, 16u, 100u, 4099u}) {
    std::vector<float> g(n), e(n);
    for (auto& v : g) v = d(rng);
    for (auto& v : e) v = 0.3f * d(rng);
    std::vector<float> w(n);
    for (std::size_t i = 0; i < n; ++i) w[i] = g[i] + e[i];
    const Pairs ref = reference(w, 1.2f);
    Pairs p{std::vector<std::uint32_t>(n), std::vector<float>(n)};
    const std::size_t k = feedback_threshold_pack(g, e, 1.2f, p.idx, p.val);
    p.idx.resize(k);
    p.val.resize(k);
    ASSERT_EQ(p, ref);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(e[i], std::fabs(w[i]) >= 1.2f ? 0.0f : w[i]);
  }
}

TEST(ThresholdPack, RejectsSmallOutputs) {
  std::vector<float> x(10), val(9);
  std::vector<std::uint32_t> idx(10);
  EXPECT_THROW(threshold_pack(x, 1.0f, idx, val), InputError);
  std::vector<float> g(3), val10(10);
  EXPECT_THROW(feedback_threshold_pack(g, x, 1.0f, idx, val10), InputError);
}

}  // namespace
}  // namespace sparq::compress
