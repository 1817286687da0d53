#include "sparq/compress/error_feedback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

TEST(ErrorFeedback, ResidualsPersistByName) {
  ErrorFeedbackStore store;
  auto a = store.residual("fc1.w", 10);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float v) { return v == 0.0f; }));
  a[3] = 2.5f;
  store.residual("fc2.w", 6);
  EXPECT_EQ(store.residual("fc1.w", 10)[3], 2.5f);
  EXPECT_EQ(store.find("fc1.w")[3], 2.5f);
  EXPECT_TRUE(store.find("nope").empty());
  EXPECT_EQ(store.tensors(), 2u);
  EXPECT_EQ(store.bytes(), (10u + 6u) * sizeof(float));
  EXPECT_THROW(store.residual("fc1.w", 11), InputError);
  store.erase("fc2.w");
  EXPECT_EQ(store.bytes(), 10u * sizeof(float));
}

TEST(ErrorFeedback, DrainsOnlyOnDrainSteps) {
  ErrorFeedbackStore store({.every = 100, .fraction = 1.0});
  auto r = store.residual("t", 7);
  std::fill(r.begin(), r.end(), 1.0f);
  EXPECT_FALSE(store.maybe_drain(0));
  EXPECT_FALSE(store.maybe_drain(99));
  EXPECT_EQ(r[0], 1.0f);
  EXPECT_TRUE(store.maybe_drain(200));
  EXPECT_TRUE(std::all_of(r.begin(), r.end(), [](float v) { return v == 0.0f; }));
  EXPECT_EQ(store.drains(), 1u);
  ErrorFeedbackStore never;
  never.residual("t", 3)[0] = 1.0f;
  EXPECT_FALSE(never.maybe_drain(1000000));
}

TEST(ErrorFeedback, StochasticDrainIsSeededAndHitsTheFraction) {
  auto drained = [](std::uint64_t seed, std::uint64_t step) {
    ErrorFeedbackStore store({.every = 10, .fraction = 0.25, .seed = seed});
    auto r = store.residual("layer", 20000);
    std::fill(r.begin(), r.end(), 1.0f);
    store.maybe_drain(step);
    return std::vector<float>(r.begin(), r.end());
  };
  const auto a = drained(1, 10), b = drained(1, 10), c = drained(2, 10);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto zeros = static_cast<double>(std::count(a.begin(), a.end(), 0.0f));
  // Binomial(20000, 0.25): mean 5000, sd ~61; 6 sd.
  EXPECT_NEAR(zeros, 5000.0, 6 * std::sqrt(20000 * 0.25 * 0.75));
  EXPECT_THROW(ErrorFeedbackStore({.fraction = 1.5}), InputError);
}

}  // namespace
}  // namespace sparq::compress
