// Selection against full sorts (the plain reference the DCT paper describes).
#include "tests/compress/random_data.h"
#include "sparq/compress/topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

using test::normal;

// Reference top-k: stable sort of indices by |x| descending, take k, sort.
std::vector<std::uint32_t> ref_topk(const std::vector<float>& x, std::size_t k) {
  std::vector<std::uint32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](auto a, auto b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  idx.resize(std::min(k, x.size()));
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(TopK, DroppedCountReadsEtaRobustly) {
  EXPECT_EQ(dropped_count(20, 0.95), 19u);
  EXPECT_EQ(kept_count(512, 0.95), 26u);  // ceil(0.05 * 512)
  EXPECT_EQ(dropped_count(1000, 0.0), 0u);
  EXPECT_EQ(dropped_count(1000, 1.0), 1000u);
  EXPECT_EQ(dropped_count(7, 0.5), 3u);
  EXPECT_THROW(dropped_count(10, 1.5), InputError);
  EXPECT_THROW(dropped_count(10, -0.1), InputError);
  EXPECT_THROW(dropped_count(10, std::numeric_limits<double>::quiet_NaN()), InputError);
}

TEST(TopK, ThresholdIsTheSortedMagnitudeAtFloorNEta) {
  std::vector<float> scratch;
  for (std::size_t n : {1u, 2u, 10u, 1000u, 4097u})
    for (double eta : {0.0, 0.5, 0.9, 0.99, 0.999}) {
      const auto x = normal(n, static_cast<unsigned>(n));
      std::vector<float> mags(n);
      for (std::size_t i = 0; i < n; ++i) mags[i] = std::fabs(x[i]);
      std::sort(mags.begin(), mags.end());
      const std::size_t pos = static_cast<std::size_t>(std::floor(n * eta + 1e-9));
      const float tau = sparsity_threshold(x, eta, scratch);
      if (pos >= n) {
        EXPECT_TRUE(std::isinf(tau));
        continue;
      }
      EXPECT_EQ(tau, mags[pos]) << n << " " << eta;
      // Distinct magnitudes: the mask keeps exactly n - floor(n*eta).
      const auto kept = std::count_if(x.begin(), x.end(), [&](float v) { return std::fabs(v) >= tau; });
      EXPECT_EQ(static_cast<std::size_t>(kept), kept_count(n, eta));
    }
  EXPECT_TRUE(std::isinf(sparsity_threshold(normal(10, 1), 1.0, scratch)));
  EXPECT_TRUE(std::isinf(sparsity_threshold({}, 0.5, scratch)));
}

TEST(TopK, ExactTopKMatchesFullSort) {
  std::vector<std::uint32_t> idx;
  std::vector<float> scratch;
  for (std::size_t n : {0u, 1u, 5u, 100u, 10007u})
    for (std::size_t k : {0u, 1u, 3u, 50u, 100000u}) {
      const auto x = normal(n, static_cast<unsigned>(n + k));
      topk_indices(x, k, idx, scratch);
      EXPECT_EQ(idx, ref_topk(x, k)) << n << " " << k;
    }
}

TEST(TopK, TiesGoToLowerIndices) {
  const std::vector<float> x{1, -3, 2, 3, -2, 3, 0, -3};
  std::vector<std::uint32_t> idx;
  std::vector<float> scratch;
  topk_indices(x, 2, idx, scratch);
  EXPECT_EQ(idx, (std::vector<std::uint32_t>{1, 3}));
  topk_indices(x, 5, idx, scratch);  // all four 3s, then the first 2
  EXPECT_EQ(idx, (std::vector<std::uint32_t>{1, 2, 3, 5, 7}));
  // Many ties: a quantized-looking input.
  std::vector<float> q(1000);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 7) % 5) - 2.0f;
  for (std::size_t k : {1u, 199u, 200u, 201u, 999u}) {
    topk_indices(q, k, idx, scratch);
    EXPECT_EQ(idx, ref_topk(q, k)) << k;
  }
}

TEST(TopK, NanIsRejected) {
  std::vector<float> x = normal(10, 2), scratch;
  x[4] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::uint32_t> idx;
  EXPECT_THROW(sparsity_threshold(x, 0.5, scratch), InputError);
  EXPECT_THROW(topk_indices(x, 3, idx, scratch), InputError);
}

TEST(TopK, BucketTopKKeepsKPerBucket) {
  const auto x = normal(512 * 3 + 100, 5);
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  bucket_topk(x, 512, 5, idx, val);
  std::vector<std::uint32_t> ref;
  for (std::size_t first = 0; first < x.size(); first += 512) {
    const std::vector<float> seg(x.begin() + first, x.begin() + std::min(x.size(), first + 512));
    for (auto i : ref_topk(seg, 5)) ref.push_back(static_cast<std::uint32_t>(first + i));
  }
  EXPECT_EQ(idx, ref);
  ASSERT_EQ(val.size(), idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(val[i], x[idx[i]]);
  bucket_topk(std::vector<float>(3, 1.0f), 512, 5, idx, val);  // short last bucket: all of it
  EXPECT_EQ(idx.size(), 3u);
  EXPECT_THROW(bucket_topk(x, 0, 5, idx, val), InputError);
}

}  // namespace
}  // namespace sparq::compress
