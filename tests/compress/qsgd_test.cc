// QSGD against a plain reference of the same definition (one Philox block
// per 4 values, drawn in order), plus statistical unbiasedness.
#include "tests/compress/random_data.h"
#include "sparq/compress/qsgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "sparq/compress/counter_rng.h"
#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

using test::normal;

// Dequantized values straight from the definition (no packing).
std::vector<float> reference(const std::vector<float>& x, const QsgdOptions& o, std::uint64_t step,
                             std::uint64_t tensor) {
  const int s = (1 << (o.bits - 1)) - 1;
  std::vector<float> out(x.size());
  for (std::size_t b = 0; b * o.bucket < x.size(); ++b) {
    const std::size_t first = b * o.bucket, n = std::min(o.bucket, x.size() - first);
    double acc = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double v = x[first + i];
      acc = o.norm == QsgdNorm::L2 ? acc + v * v : std::max(acc, std::fabs(v));
    }
    const float norm = static_cast<float>(o.norm == QsgdNorm::L2 ? std::sqrt(acc) : acc);
    for (std::size_t i = 0; i < n; ++i) {
      const auto r = philox4x32({static_cast<std::uint32_t>(i / 4), static_cast<std::uint32_t>(b),
                                 static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(tensor ^ (tensor >> 32))},
                                o.seed);
      const float u = static_cast<float>(r[i % 4] >> 8) / 16777216.0f;
      const float v = x[first + i];
      const float a = norm > 0 ? std::min(static_cast<float>(s), std::fabs(v) / norm * static_cast<float>(s)) : 0.0f;
      const float fl = std::floor(a);
      const int level = static_cast<int>(fl) + (u < a - fl ? 1 : 0);
      out[first + i] = norm / static_cast<float>(s) * static_cast<float>(v < 0 ? -level : level);
    }
  }
  return out;
}

std::vector<float> round_trip(const std::vector<float>& x, const QsgdOptions& o, std::uint64_t step,
                              std::uint64_t tensor) {
  std::vector<std::byte> wire(qsgd_bytes(x.size(), o));
  qsgd_quantize(x, o, step, tensor, wire);
  std::vector<float> out(x.size());
  qsgd_dequantize(wire, o, out);
  return out;
}

TEST(Qsgd, MatchesReference) {
  for (int bits : {2, 4, 8})
    for (auto norm : {QsgdNorm::L2, QsgdNorm::Max})
      for (std::size_t n : {0u, 1u, 5u, 512u, 1300u}) {
        const QsgdOptions o{.bits = bits, .bucket = 512, .norm = norm, .seed = 42};
        const auto x = normal(n, static_cast<unsigned>(n + bits));
        ASSERT_EQ(round_trip(x, o, 3, 0x1234567890abcdefull), reference(x, o, 3, 0x1234567890abcdefull))
            << bits << " " << n;
      }
}

TEST(Qsgd, WireSizeIsNormPlusPackedCodesPerBucket) {
  EXPECT_EQ(qsgd_bytes(1300, {.bits = 4, .bucket = 512}), 2 * (4 + 256) + (4 + 138));
  EXPECT_EQ(qsgd_bytes(0, {.bits = 4, .bucket = 512}), 0u);
  EXPECT_EQ(qsgd_bytes(3, {.bits = 2, .bucket = 2}), (4 + 1) + (4 + 1));
}

TEST(Qsgd, UnbiasedOverSeeds) {
  // Per element, the mean over S seeds must be within 6 standard errors of x;
  // one level step is norm/s, and a Bernoulli over one step has sd <= step/2.
  const std::size_t n = 64, seeds = 4000;
  const auto x = normal(n, 8);
  for (auto norm : {QsgdNorm::L2, QsgdNorm::Max}) {
    const QsgdOptions base{.bits = 4, .bucket = 32, .norm = norm};
    std::vector<double> mean(n, 0.0);
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
      QsgdOptions o = base;
      o.seed = seed;
      const auto y = round_trip(x, o, 0, 1);
      for (std::size_t i = 0; i < n; ++i) mean[i] += y[i] / static_cast<double>(seeds);
    }
    // A biased quantizer (round to nearest level) must fail the same bound
    // for some element: the test has the power to tell.
    bool nearest_fails = false;
    for (std::size_t b = 0; b < n / 32; ++b) {
      double acc = 0;
      for (std::size_t i = 0; i < 32; ++i)
        acc = norm == QsgdNorm::L2 ? acc + x[b * 32 + i] * x[b * 32 + i] : std::max(acc, std::fabs(double(x[b * 32 + i])));
      const double nv = norm == QsgdNorm::L2 ? std::sqrt(acc) : acc, step = nv / 7;
      const double bound = 6 * (step / 2) / std::sqrt(static_cast<double>(seeds));
      for (std::size_t i = 0; i < 32; ++i) {
        const double v = x[b * 32 + i];
        EXPECT_NEAR(mean[b * 32 + i], v, bound) << i;
        const double nearest = std::round(std::fabs(v) / step) * step * (v < 0 ? -1 : 1);
        nearest_fails = nearest_fails || std::fabs(nearest - v) > bound;
      }
    }
    EXPECT_TRUE(nearest_fails);
  }
}

TEST(Qsgd, SameSeedSameBytesOnOneOrTwoThreads) {
  const auto x = normal(10000, 2);
  QsgdOptions o{.bits = 4, .bucket = 512, .seed = 9};
  std::vector<std::byte> one(qsgd_bytes(x.size(), o)), two(one.size());
  qsgd_quantize(x, o, 17, 5, one);
  o.threads = 2;
  qsgd_quantize(x, o, 17, 5, two);
  EXPECT_EQ(one, two);
  std::vector<std::byte> other_step(one.size());
  qsgd_quantize(x, o, 18, 5, other_step);
  EXPECT_NE(one, other_step);
}

TEST(Qsgd, ZeroBucketAndBadInput) {
  const std::vector<float> zeros(40, 0.0f);
  EXPECT_EQ(round_trip(zeros, {.bits = 2, .bucket = 16}, 0, 0), zeros);
  // A subnormal norm: s / norm would be inf and 0 * inf NaN.
  const std::vector<float> tiny{1e-40f, 0.0f, -1e-40f, 0.0f};
  for (auto norm : {QsgdNorm::L2, QsgdNorm::Max}) {
    const QsgdOptions o{.bits = 8, .bucket = 4, .norm = norm};
    const auto y = round_trip(tiny, o, 0, 0);
    EXPECT_EQ(y, reference(tiny, o, 0, 0));
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_EQ(y[3], 0.0f);
  }
  std::vector<float> x(8, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::byte> wire(qsgd_bytes(8, {}));
  EXPECT_THROW(qsgd_quantize(x, {}, 0, 0, wire), InputError);
  EXPECT_THROW(qsgd_bytes(8, {.bits = 3}), InputError);
  EXPECT_THROW(qsgd_bytes(8, {.bucket = 0}), InputError);
}

TEST(Qsgd, DecoderRejectsBadMessages) {
  const QsgdOptions o{.bits = 4, .bucket = 8};
  const auto x = normal(12, 3);
  std::vector<std::byte> wire(qsgd_bytes(x.size(), o));
  qsgd_quantize(x, o, 0, 0, wire);
  std::vector<float> out(x.size());
  EXPECT_THROW(qsgd_dequantize(std::span(wire).first(wire.size() - 1), o, out), WireError);
  auto bad = wire;
  bad[5] = std::byte{0xF0};  // code 15 > 2s = 14
  EXPECT_THROW(qsgd_dequantize(bad, o, out), WireError);
  bad = wire;
  const float neg = -1.0f;
  std::memcpy(bad.data() + (4 + 4), &neg, 4);  // second bucket's norm
  EXPECT_THROW(qsgd_dequantize(bad, o, out), WireError);
}

}  // namespace
}  // namespace sparq::compress
