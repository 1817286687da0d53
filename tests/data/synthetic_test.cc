#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "sparq/data/synthetic.h"

namespace sparq {
namespace {

TEST(Synthetic, DeterministicBySeedAndIndex) {
  SyntheticFeatures a({.seed = 3}), b({.seed = 3}), c({.seed = 4});
  SyntheticSample x, y, z;
  a.sample(12345, x);
  b.sample(12345, y);
  c.sample(12345, z);
  EXPECT_EQ(std::memcmp(x.values, y.values, sizeof x.values), 0);
  EXPECT_EQ(std::memcmp(x.ints, y.ints, sizeof x.ints), 0);
  EXPECT_NE(std::memcmp(x.values, z.values, sizeof x.values), 0);
}

TEST(Synthetic, ZipfHeadAndHeavyTails) {
  SyntheticFeatures g({.seed = 1});
  const std::size_t n = 20000;
  std::size_t rank0 = 0, big = 0, missing0 = 0;
  SyntheticSample s;
  for (std::size_t i = 0; i < n; ++i) {
    g.sample(i, s);
    rank0 += s.ranks[2] == 0;  // a 100000-value table
    big += s.ints[4] > 10000;
    missing0 += !s.present[0];
    for (std::size_t t = 0; t < kCriteoSparse; ++t) ASSERT_LT(s.ranks[t], g.options().cardinalities[t]);
  }
  // Zipf(1.1) over 1e5 values: P(rank 0) = 1 / H(1e5, 1.1) (0.1347);
  // the estimate's std is ~0.0024.
  double h = 0;
  for (std::size_t k = 0; k < 100000; ++k) h += std::pow(static_cast<double>(k + 1), -1.1);
  EXPECT_NEAR(static_cast<double>(rank0) / n, 1 / h, 0.01);
  EXPECT_GT(big, 0u);  // heavy tail present
  EXPECT_NEAR(static_cast<double>(missing0) / n, 0.45, 0.02);
}

}  // namespace
}  // namespace sparq
