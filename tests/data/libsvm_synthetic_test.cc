#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include "sparq/core/error.h"
#include "sparq/data/libsvm_synthetic.h"

namespace sparq {
namespace {

LibsvmSynthetic make(std::string_view like, double scale, std::uint64_t seed = 1, double zipf = 1.0) {
  return LibsvmSynthetic({.shape = libsvm_shape(like, scale), .seed = seed, .zipf = zipf});
}

struct Rows {
  std::vector<float> labels, probs;
  std::vector<std::vector<std::uint32_t>> idx;
  std::vector<std::vector<float>> val;
};

Rows rows(const LibsvmSynthetic& g, std::uint64_t first, std::size_t n) {
  Rows r;
  LibsvmRow row;
  for (std::size_t i = 0; i < n; ++i) {
    g.sample(first + i, row);
    r.labels.push_back(row.label);
    r.probs.push_back(row.probability);
    r.idx.push_back(row.indices);
    r.val.push_back(row.values);
  }
  return r;
}

// Generators and samples at scale 0.01, shared by the tests (a Webspam-like
// generator takes ~2 s to calibrate, its rows ~1 ms each): URL-like 20000
// test samples, Webspam-like 3000.
const LibsvmSynthetic& shared(std::string_view like) {
  static const LibsvmSynthetic url = make("url", 0.01), webspam = make("webspam", 0.01);
  return like == "url" ? url : webspam;
}
const Rows& shared_rows(std::string_view like) {
  static const Rows url = rows(shared("url"), std::uint64_t{1} << 40, 20000);
  static const Rows webspam = rows(shared("webspam"), std::uint64_t{1} << 40, 3000);
  return like == "url" ? url : webspam;
}

TEST(LibsvmSynthetic, ShapesMatchTheTable) {
  const LibsvmShape u = libsvm_shape("url", 1), w = libsvm_shape("webspam", 1);
  EXPECT_EQ(u.samples, 2396130u);
  EXPECT_EQ(u.features, 3231961u);
  EXPECT_NEAR(u.mean_nnz * u.samples, 277e6, 1e6);
  EXPECT_DOUBLE_EQ(u.positives, 0.33);
  EXPECT_TRUE(u.binary_values);
  EXPECT_EQ(w.samples, 350000u);
  EXPECT_EQ(w.features, 16609143u);
  EXPECT_NEAR(w.mean_nnz * w.samples, 1.3047e9, 1e6);
  EXPECT_DOUBLE_EQ(w.positives, 0.61);
  EXPECT_FALSE(w.binary_values);
  const LibsvmShape u1 = libsvm_shape("url", 0.01), w1 = libsvm_shape("webspam", 0.01);
  EXPECT_EQ(u1.samples, 23961u);
  EXPECT_EQ(u1.features, 32320u);
  EXPECT_DOUBLE_EQ(u1.mean_nnz, u.mean_nnz);  // nnz per sample kept
  EXPECT_EQ(w1.samples, 3500u);
  EXPECT_EQ(w1.features, 166091u);
  EXPECT_DOUBLE_EQ(w1.mean_nnz, w.mean_nnz);
  EXPECT_DOUBLE_EQ(libsvm_shape("webspam", 1e-4).mean_nnz, 1661 / 4);  // capped at features / 4
  EXPECT_THROW(libsvm_shape("rcv1", 1), InputError);
  EXPECT_THROW(libsvm_shape("url", 0), InputError);
  EXPECT_THROW(libsvm_shape("url", 1.5), InputError);
}

TEST(LibsvmSynthetic, DeterministicWhateverTheChunksAndThreads) {
  const auto a = make("url", 0.001, 3), b = make("url", 0.001, 3), c = make("url", 0.001, 4);
  const Rows ra = rows(a, 100, 300), rb = rows(b, 100, 300), rc = rows(c, 100, 300);
  EXPECT_EQ(ra.idx, rb.idx);
  EXPECT_EQ(ra.val, rb.val);
  EXPECT_EQ(ra.labels, rb.labels);
  EXPECT_NE(ra.idx, rc.idx);
  // generate() in two chunks, and on two threads, gives the same rows.
  std::vector<std::vector<std::uint32_t>> chunked, threaded(300);
  const auto keep = [&](float, std::span<const std::uint32_t> i, std::span<const float>) {
    chunked.emplace_back(i.begin(), i.end());
  };
  a.generate(100, 137, keep);
  a.generate(237, 163, keep);
  EXPECT_EQ(chunked, ra.idx);
  std::vector<std::thread> ts;
  for (std::size_t t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      LibsvmRow row;
      for (std::size_t i = t; i < 300; i += 2) {
        a.sample(100 + i, row);
        threaded[i] = row.indices;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(threaded, ra.idx);
}

TEST(LibsvmSynthetic, RowsAreSortedUniqueInRange) {
  for (auto [like, scale] : {std::pair{"url", 0.001}, std::pair{"webspam", 1e-4}}) {
    const auto g = make(like, scale);
    const LibsvmShape& s = g.options().shape;
    const Rows r = rows(g, 0, 200);
    for (std::size_t i = 0; i < r.idx.size(); ++i) {
      const auto& idx = r.idx[i];
      const auto& val = r.val[i];
      ASSERT_FALSE(idx.empty());
      ASSERT_EQ(idx.size(), val.size());
      ASSERT_TRUE(std::adjacent_find(idx.begin(), idx.end(), std::greater_equal<>()) == idx.end()) << like << " row " << i;
      ASSERT_LT(idx.back(), s.features);
      ASSERT_TRUE(r.labels[i] == 1 || r.labels[i] == -1);
      double sq = 0;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        ASSERT_GT(val[j], 0);
        ASSERT_LE(val[j], 1);
        if (s.binary_values && idx[j] >= s.real_features) {
          ASSERT_EQ(val[j], 1.0f);
        }
        sq += static_cast<double>(val[j]) * val[j];
      }
      if (!s.binary_values) {
        ASSERT_NEAR(sq, 1, 1e-5) << "unit L2 norm";
      }
    }
  }
}

// --cooccur 4: the binary features come in fixed groups of 4 that are all
// present or all absent in every row, and the non-zeros keep the shape's mean.
TEST(LibsvmSynthetic, CooccurringFeaturesAppearTogether) {
  LibsvmSyntheticOptions o{.shape = libsvm_shape("url", 0.001)};
  o.cooccur = 4;
  const LibsvmSynthetic g(o);
  const LibsvmShape& s = g.options().shape;
  const Rows r = rows(g, 0, 2000);
  std::map<std::uint32_t, std::vector<std::size_t>> rows_of;  // feature -> the rows holding it
  double nnz = 0;
  for (std::size_t i = 0; i < r.idx.size(); ++i) {
    nnz += static_cast<double>(r.idx[i].size());
    for (std::uint32_t j : r.idx[i])
      if (j >= s.real_features) rows_of[j].push_back(i);
  }
  std::map<std::vector<std::size_t>, int> features_with;  // a set of rows -> the features held by exactly it
  for (const auto& [j, held] : rows_of) ++features_with[held];
  for (const auto& [held, count] : features_with) EXPECT_EQ(count % 4, 0) << "a group split, " << held.size() << " rows";
  EXPECT_NEAR(nnz / static_cast<double>(r.idx.size()), s.mean_nnz, 0.05 * s.mean_nnz);
  o.cooccur = 0;
  EXPECT_THROW(LibsvmSynthetic{o}, InputError);
}

TEST(LibsvmSynthetic, MeanNonZerosAndPositivesMatchTheShape) {
  for (const char* like : {"url", "webspam"}) {
    const LibsvmShape& s = shared(like).options().shape;
    const Rows& r = shared_rows(like);
    const auto n = static_cast<double>(r.labels.size());
    double nnz = 0, pos = 0;
    for (std::size_t i = 0; i < r.idx.size(); ++i) {
      nnz += static_cast<double>(r.idx[i].size());
      pos += r.labels[i] > 0;
    }
    EXPECT_NEAR(nnz / n, s.mean_nnz, 0.03 * s.mean_nnz) << like;
    EXPECT_NEAR(pos / n, s.positives, 0.03) << like;
  }
}

// Accuracy of the teacher's own prediction (p > 1/2) on its labels: the
// ceiling of a linear student, calibrated to the shape's.
TEST(LibsvmSynthetic, TeacherAccuracyInTheStatedBand) {
  for (const char* like : {"url", "webspam"}) {
    const LibsvmSynthetic& g = shared(like);
    const Rows& r = shared_rows(like);
    const auto n = static_cast<double>(r.labels.size());
    double right = 0;
    for (std::size_t i = 0; i < r.labels.size(); ++i) right += (r.probs[i] > 0.5f) == (r.labels[i] > 0);
    const double target = g.options().shape.teacher_accuracy;
    EXPECT_NEAR(right / n, target, 0.01) << like;
    EXPECT_NEAR(g.calibration().expected_accuracy, target, 0.002) << like;
    EXPECT_LT(right / n, 1.0) << like;
  }
}

// Counts of the 1000 most frequent binary features against their rank: the
// log-log slope is -zipf (ranks 50..1000: below 50 the most frequent
// features are in nearly every row, which flattens the head).
TEST(LibsvmSynthetic, FeatureFrequenciesFollowThePowerLaw) {
  for (double zipf : {1.0, 1.3}) {
    const auto g = zipf == 1.0 ? shared("url") : make("url", 0.01, 1, zipf);
    const LibsvmShape& s = g.options().shape;
    std::vector<double> count(s.features);
    g.generate(0, 20000, [&](float, std::span<const std::uint32_t> idx, std::span<const float>) {
      for (auto i : idx)
        if (i >= s.real_features) ++count[i];
    });
    std::sort(count.begin(), count.end(), std::greater<>());
    double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
    for (std::size_t k = 50; k < 1000; ++k, ++m) {
      const double x = std::log(static_cast<double>(k + 1)), y = std::log(count[k]);
      sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
    EXPECT_NEAR(slope, -zipf, 0.1) << "zipf " << zipf;
  }
}

TEST(LibsvmSynthetic, ZipfSamplerHeadProbability) {
  for (double s : {0.8, 1.0, 1.5}) {
    ZipfSampler z(1000, s);
    Rng rng(5);
    const int n = 200000;
    int zero = 0, last = 0;
    for (int i = 0; i < n; ++i) {
      const std::size_t k = z(rng);
      ASSERT_LT(k, 1000u);
      zero += k == 0;
      last += k == 9;
    }
    double h = 0;
    for (int k = 1; k <= 1000; ++k) h += std::pow(k, -s);
    EXPECT_NEAR(static_cast<double>(zero) / n, 1 / h, 0.005) << s;
    EXPECT_NEAR(static_cast<double>(last) / n, std::pow(10, -s) / h, 0.002) << s;
  }
}

// Frequent features are spread over the id space, not packed at low ids.
TEST(LibsvmSynthetic, FrequentFeaturesAreSpreadOverTheIds) {
  const LibsvmShape& s = shared("url").options().shape;
  std::vector<std::pair<int, std::uint32_t>> count(s.features);
  for (std::uint32_t i = 0; i < s.features; ++i) count[i].second = i;
  for (const auto& idx : shared_rows("url").idx)
    for (auto i : idx)
      if (i >= s.real_features) --count[i].first;  // ascending order = most frequent first
  std::sort(count.begin(), count.end());
  std::size_t low_half = 0;
  for (std::size_t k = 0; k < 100; ++k) low_half += count[k].second < s.features / 2;
  EXPECT_GT(low_half, 30u);
  EXPECT_LT(low_half, 70u);
}

}  // namespace
}  // namespace sparq
