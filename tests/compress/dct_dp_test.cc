// DCT-DP (Algorithm 1) against a plain reference: dense W, full sort for tau,
// explicit mask.
#include "sparq/compress/dct_dp.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <optional>
#include <vector>

#include "sparq/compress/stream_codec.h"
#include "sparq/compress/topk.h"
#include "sparq/core/error.h"
#include "tests/compress/random_data.h"
#include "tests/core/with_costs.h"

namespace sparq::compress {
namespace {

using test::normal;

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// Algorithm 1 written out: W = g + E; sort |W| when L | k; mask; E = W - sent.
struct Reference {
  double eta;
  std::uint64_t life;
  std::vector<float> err;
  float tau = 0;
  bool started = false;
  std::vector<float> step(std::uint64_t k, const std::vector<float>& g) {
    std::vector<float> w(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) w[i] = g[i] + err[i];
    if (!started || k % life == 0) {
      std::vector<float> m(w.size());
      for (std::size_t i = 0; i < w.size(); ++i) m[i] = std::fabs(w[i]);
      std::sort(m.begin(), m.end());
      const auto pos = static_cast<std::size_t>(std::floor(w.size() * eta + 1e-9));
      tau = pos < m.size() ? m[pos] : INFINITY;
      started = true;
    }
    std::vector<float> sent(w.size(), 0.0f);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const bool keep = std::fabs(w[i]) >= tau;
      sent[i] = keep ? w[i] : 0.0f;
      err[i] = keep ? 0.0f : w[i];
    }
    return sent;
  }
};

TEST(DctDp, MatchesAlgorithmOneAndSplitsBitwise) {
  const std::size_t n = 5000;
  ErrorFeedbackStore store;
  DctDp dct({.eta = 0.95, .life_span = 4}, store);
  Reference ref{0.95, 4, std::vector<float>(n, 0.0f)};
  SparseStream out;
  for (std::uint64_t k = 1; k <= 13; ++k) {
    const auto g = normal(n, static_cast<unsigned>(k));
    const std::vector<float> old_err(store.find("fc").begin(), store.find("fc").end());
    const DctDpStep st = dct.step("fc", k, g, out);
    const std::vector<float> ref_sent = ref.step(k, g);
    std::vector<float> sent(n);
    out.to_dense(sent);
    ASSERT_EQ(st.tau, ref.tau) << k;
    ASSERT_EQ(sent, ref_sent) << k;
    const auto err = store.find("fc");
    for (std::size_t i = 0; i < n; ++i) {
      const float w = g[i] + (old_err.empty() ? 0.0f : old_err[i]);
      // Exactly one side carries W, bit for bit; the other is +0.
      const bool was_sent = std::fabs(w) >= st.tau;
      ASSERT_EQ(bits(was_sent ? sent[i] : err[i]), bits(w)) << k << " " << i;
      ASSERT_EQ(bits(was_sent ? err[i] : sent[i]), bits(0.0f)) << k << " " << i;
    }
  }
}

// bf16 / fp8 / fp4 values: the same mask as fp32, each sent value is W
// rounded to the format, and the residual keeps the rest, so sent + E == W
// still holds exactly; the rounding is to nearest (half an ulp: 2^-8 bf16,
// 2^-4 fp8, 1/5 fp4, or what flushes: fp8's below 2^-17 of the largest,
// fp4's below its group's scale, an error under 1/12 of the group's largest).
TEST(DctDp, LowPrecisionSendsRoundedValuesAndKeepsTheRest) {
  const std::size_t n = 5000;
  const auto g = normal(n, 3);
  for (ValueFormat vf : {ValueFormat::Bf16, ValueFormat::Fp8, ValueFormat::Fp4}) {
    ErrorFeedbackStore s32, slow;
    DctDp d32({.eta = 0.9, .life_span = 4}, s32), dlow({.eta = 0.9, .life_span = 4, .values = vf}, slow);
    SparseStream o32, olow;
    d32.step("fc", 1, g, o32);
    dlow.step("fc", 1, g, olow);
    ASSERT_TRUE(std::ranges::equal(o32.indices(), olow.indices()));
    SparseStream again = olow;
    round_values(again, vf);
    ASSERT_TRUE(std::ranges::equal(again.values(), olow.values())) << "sent values not in the format";
    const double rel = vf == ValueFormat::Bf16 ? 0x1p-8 : vf == ValueFormat::Fp8 ? 0x1p-4 : 0.2;
    const double flush = vf == ValueFormat::Fp4 ? 1.0 / 12 : 0x1p-16;
    float mx = 0;
    for (float v : olow.values()) mx = std::max(mx, std::fabs(v));
    std::vector<float> sent(n);
    olow.to_dense(sent);
    const auto err = slow.find("fc");
    std::size_t inexact = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(sent[i] + err[i], g[i]) << i;
      if (sent[i] == 0.0f && err[i] == g[i]) continue;
      ASSERT_LE(std::fabs(err[i]), std::max(std::fabs(g[i]) * rel, mx * flush)) << i;
      inexact += err[i] != 0.0f;
    }
    EXPECT_GT(inexact, 0u);
  }
}

TEST(DctDp, TauChangesOnlyWhenLDividesTheStep) {
  const std::size_t n = 2000;
  ErrorFeedbackStore store;
  DctDp dct({.eta = 0.9, .life_span = 5}, store);
  SparseStream out;
  float prev = 0;
  for (std::uint64_t k = 3; k <= 23; ++k) {
    const DctDpStep st = dct.step("w", k, normal(n, static_cast<unsigned>(k), 1.0f + 0.1f * k), out);
    const bool expected = k == 3 || k % 5 == 0;  // the first step always computes tau
    EXPECT_EQ(st.recomputed, expected) << k;
    if (expected) {
      EXPECT_EQ(st.kept, kept_count(n, 0.9)) << k;
    } else {
      EXPECT_EQ(st.tau, prev) << k;
    }
    prev = st.tau;
  }
  EXPECT_EQ(dct.stats().recomputes, 5u);  // k = 3, 5, 10, 15, 20
  EXPECT_EQ(dct.stats().adaptive_recomputes, 0u);
}

TEST(DctDp, AdaptiveRecomputesWhenKeptFractionDrifts) {
  const std::size_t n = 4000;
  ErrorFeedbackStore store;
  DctDp dct({.eta = 0.99, .life_span = 1000, .adaptive_tolerance = 0.5}, store);
  SparseStream out;
  dct.step("w", 1, normal(n, 1), out);  // tau for sd 1
  // Gradients 10x larger: far more than 1% pass the old tau.
  const DctDpStep drifted = dct.step("w", 2, normal(n, 2, 10.0f), out);
  EXPECT_FALSE(drifted.recomputed);
  EXPECT_GT(drifted.kept, 2 * kept_count(n, 0.99));
  const DctDpStep fixed = dct.step("w", 3, normal(n, 3, 10.0f), out);
  EXPECT_TRUE(fixed.recomputed);
  EXPECT_TRUE(fixed.adaptive);
  EXPECT_EQ(fixed.kept, kept_count(n, 0.99));
  EXPECT_EQ(dct.stats().adaptive_recomputes, 1u);
  // Without the option the stale tau stays.
  ErrorFeedbackStore store2;
  DctDp plain({.eta = 0.99, .life_span = 1000}, store2);
  plain.step("w", 1, normal(n, 1), out);
  plain.step("w", 2, normal(n, 2, 10.0f), out);
  EXPECT_FALSE(plain.step("w", 3, normal(n, 3, 10.0f), out).recomputed);
}

// On a threshold step and between them (where |g + E| >= tau is false for
// NaN, so it would sit in E unsent): the step throws, E and tau unchanged.
TEST(DctDp, NonFiniteOnAnyStepLeavesStateUntouched) {
  for (const std::uint64_t k : {2, 3})
    for (const float v : {NAN, INFINITY, -INFINITY}) {
      SCOPED_TRACE(testing::Message() << "step " << k << ", " << v);
      ErrorFeedbackStore store;
      DctDp dct({.eta = 0.5, .life_span = 2}, store);
      SparseStream out;
      dct.step("w", 1, normal(64, 1), out);
      if (k == 3) dct.step("w", 2, normal(64, 2), out);
      const std::vector<float> err_before(store.find("w").begin(), store.find("w").end());
      const std::optional<float> tau_before = dct.threshold("w");
      auto bad = normal(64, 2);
      bad[10] = v;
      try {
        dct.step("w", k, bad, out);
        ADD_FAILURE() << "no error";
      } catch (const NonFiniteError& e) {
        EXPECT_NE(std::string(e.what()).find(fmt::format("DCT-DP: the gradient of 'w' at step {} holds", k)),
                  std::string::npos)
            << e.what();
      }
      EXPECT_EQ(std::vector<float>(store.find("w").begin(), store.find("w").end()), err_before);
      EXPECT_EQ(dct.threshold("w"), tau_before);
    }
  ErrorFeedbackStore store;
  DctDp dct({.eta = 0.5, .life_span = 2}, store);
  SparseStream out;
  auto bad = normal(64, 2);
  bad[10] = NAN;
  // A tensor whose very first step failed still gets its first threshold next time.
  EXPECT_THROW(dct.step("v", 1, bad, out), InputError);
  EXPECT_TRUE(dct.step("v", 3, normal(64, 3), out).recomputed);
}

TEST(DctDp, TensorsAreIndependentAndShapesFixed) {
  ErrorFeedbackStore store;
  DctDp dct({.eta = 0.5, .life_span = 10}, store);
  SparseStream out;
  dct.step("a", 1, normal(100, 1), out);
  dct.step("b", 1, normal(50, 2, 100.0f), out);
  EXPECT_NE(dct.threshold("a"), dct.threshold("b"));
  EXPECT_EQ(out.dim(), 50u);
  EXPECT_EQ(store.tensors(), 2u);
  EXPECT_THROW(dct.step("a", 2, normal(101, 3), out), InputError);
  EXPECT_FALSE(dct.threshold("none").has_value());
  dct.set_threshold("none", 0.25f);
  EXPECT_EQ(dct.threshold("none"), 0.25f);
  EXPECT_THROW(dct.set_threshold("none", NAN), InputError);
  EXPECT_THROW(dct.set_threshold("none", -1.0f), InputError);
  EXPECT_THROW(DctDp({.eta = 2.0}, store), InputError);
  EXPECT_THROW(DctDp({.life_span = 0}, store), InputError);
}

// On the virtual clock a step is charged by its count of values, a step that
// sets the threshold apart from one that applies it: a cost file's per-value
// costs (far above what 1000 values take, so only the charge reaches them).
TEST(DctDp, ChargedOnTheClockByItsCountOfValues) {
  const std::string path = ::testing::TempDir() + "dct_dp_costs.txt";
  // Shape: threshold step or not, the values' format (0 fp32), eta in
  // millionths, then the size class of 1000 values (std::bit_width 10).
  std::ofstream(path) << sparq::test::cost_file_header(path) << "dct_dp_step_per_value 1 0 990000 0 10 0.001\n"
                      << "dct_dp_step_per_value 0 0 990000 0 10 0.0001\n";
  KernelCosts costs;
  costs.load(path);
  const sparq::test::WithCosts with(costs);
  ErrorFeedbackStore store;
  DctDp dct({.eta = 0.99, .life_span = 10}, store);
  SparseStream out;
  const std::vector<float> g = normal(1000, 4);
  for (const auto& [k, want] : {std::pair{0, 1.0}, std::pair{1, 0.1}, std::pair{10, 1.0}}) {
    const double charged = sparq::test::charged_for([&] { dct.step("w", k, g, out); });
    EXPECT_GE(charged, want - 1e-9) << "step " << k;
    EXPECT_LT(charged, want + 5e-3) << "step " << k;  // the test's own CPU around the step
  }
}

}  // namespace
}  // namespace sparq::compress
