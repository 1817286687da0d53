#include "sparq/plan/evidence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace sparq::plan {

namespace {

PlanKnobs knobs(std::string placement, std::string dp, std::string allreduce, std::string fwd, std::string bwd) {
  return {placement, dp, allreduce, fwd, bwd, "0"};
}

// The rows of a codec measured at `ranks`, one a data set.
std::vector<const EvidenceRow*> rows(const std::string& codec, int ranks) {
  std::vector<const EvidenceRow*> out;
  for (const EvidenceRow& r : evidence_rows())
    if (codec == r.codec && r.ranks == ranks) out.push_back(&r);
  if (out.empty()) throw std::runtime_error("no row " + codec);
  return out;
}

const EvidenceRow& row(const std::string& codec, int ranks) { return *rows(codec, ranks).front(); }

// Of those, the one of the data set where the codec cost most.
const EvidenceRow& worst(const std::string& codec, int ranks) {
  const auto r = rows(codec, ranks);
  return **std::max_element(r.begin(), r.end(), [](auto* a, auto* b) { return a->mean_change < b->mean_change; });
}

}  // namespace

TEST(Evidence, Fp32NeedsNone) {
  const Verdict v = judge(PlanKnobs{}, 128, 0);
  EXPECT_TRUE(v.admitted);
  EXPECT_EQ(v.expected_change, 0);
}

TEST(Evidence, ACodecIsBackedByItsStoredRunsWithinTwiceTheRanks) {
  const PlanKnobs dct = knobs("replicated", "dct:0.98,1000", "auto", "fp32", "fp32");
  for (int p : {2, 4, 8}) {
    const Verdict v = judge(dct, p, 0.1);
    EXPECT_TRUE(v.admitted) << p << ": " << v.why;
    EXPECT_NE(v.why.find("docs/data/dp/t2_dct0.98_s*.jsonl"), std::string::npos) << v.why;
  }
  const Verdict far = judge(dct, 16, 0.1);  // measured at 4 ranks only
  EXPECT_FALSE(far.admitted);
  EXPECT_NE(far.why.find("no stored run within 2x of 16 ranks"), std::string::npos) << far.why;
}

TEST(Evidence, OneSeedIsNotEnough) {
  ASSERT_EQ(row("q8/q8", 4).seeds, 1);
  const Verdict v = judge(knobs("table-wise", "none", "auto", "q8", "q8"), 4, 1.0);
  EXPECT_FALSE(v.admitted);
  EXPECT_NE(v.why.find("1 seed"), std::string::npos) << v.why;
}

TEST(Evidence, TheCodecsChangesAddUpAgainstTheBudget) {
  // q4+ec on the ring at 8 ranks and q4/q2 alltoalls (their worst data set): both above zero.
  const double ring = row("q4+ec@ring", 8).mean_change, emb = worst("q4/q2", 4).mean_change;
  ASSERT_GT(ring, 0);
  ASSERT_GT(emb, 0);
  const PlanKnobs k = knobs("table-wise", "q4+ec", "ring", "q4", "q2");
  const Verdict in = judge(k, 8, ring + emb + 1e-6);
  EXPECT_TRUE(in.admitted) << in.why;
  EXPECT_NEAR(in.expected_change, ring + emb, 1e-12);
  const Verdict out = judge(k, 8, ring + emb - 1e-6);
  EXPECT_FALSE(out.admitted);
  EXPECT_NE(out.why.find("over the budget"), std::string::npos) << out.why;
}

TEST(Evidence, Bf16MlpsAreACodecWithTheirOwnRuns) {
  PlanKnobs k = knobs("table-wise", "none", "auto", "fp32", "fp32");
  k.mlp = "bf16";
  const EvidenceRow& most = worst("bf16", 4);  // data/synth and the maps' four sets: the costliest decides
  ASSERT_EQ(rows("bf16", 4).size(), 5u);
  const double mlp = most.mean_change;
  ASSERT_GT(mlp, 0);
  const Verdict in = judge(k, 8, mlp + 1e-6);
  EXPECT_TRUE(in.admitted) << in.why;
  EXPECT_NE(in.why.find(most.runs), std::string::npos) << in.why;
  EXPECT_FALSE(judge(k, 8, mlp - 1e-6).admitted);
  EXPECT_FALSE(judge(k, 16, 1.0).admitted);  // measured at 4 ranks only
  k.emb_fwd = "q4", k.emb_bwd = "q2";      // with the alltoall's codecs, the changes add up
  EXPECT_NEAR(judge(k, 4, 1.0).expected_change, mlp + std::max(0.0, worst("q4/q2", 4).mean_change), 1e-12);
}

TEST(Evidence, ANegativeChangeEarnsNoCredit) {
  ASSERT_LT(row("dct:0.98,1000", 4).mean_change, 0);
  const Verdict v = judge(knobs("replicated", "dct:0.98,1000", "auto", "fp32", "fp32"), 4, 0.0);
  EXPECT_TRUE(v.admitted) << v.why;  // within a budget of 0: its negative change counts as 0
  EXPECT_EQ(v.expected_change, 0);
}

// q4 dense gradients by recursive doubling were measured on data/synth (at
// 8-128 ranks) and alone on each of the DP/MP maps' four sets (4 ranks): at
// 4 ranks the set where they cost most decides, not the synthetic set.
TEST(Evidence, ACodecIsAsGoodAsItsWorstDataSet) {
  const std::string codec = "q4@recursive-doubling";
  const auto maps = rows(codec, 4);
  ASSERT_EQ(maps.size(), 4u);
  const EvidenceRow* w = &row(codec, 8);
  for (const EvidenceRow* r : maps)
    if (r->mean_change > w->mean_change) w = r;
  const PlanKnobs k = knobs("table-wise", "q4", "recursive-doubling", "fp32", "fp32");
  const Verdict v = judge(k, 4, 1.0);
  EXPECT_NEAR(v.expected_change, std::max(0.0, w->mean_change), 1e-12);
  EXPECT_NE(v.why.find(w->runs), std::string::npos) << v.why;
  // At 16 ranks the maps' runs (4) are out of reach: the synthetic set's at 8 and 32 decide.
  EXPECT_EQ(judge(k, 16, 1.0).why.find("docs/data/plan/accuracy-codecs"), std::string::npos);
}

// The replicated tables' gradients in bf16 are a codec of the tables (fwd
// fp32, bwd bf16), judged by their own replicated runs on the maps' sets.
TEST(Evidence, TheReplicatedTablesBf16GradientsHaveTheirOwnRuns) {
  const EvidenceRow& w = worst("fp32/bf16", 4);
  EXPECT_EQ(std::string(w.placement), "replicated");
  const PlanKnobs k = knobs("replicated", "none", "auto", "fp32", "bf16");
  const Verdict v = judge(k, 4, 1.0);
  EXPECT_NEAR(v.expected_change, std::max(0.0, w.mean_change), 1e-12);
  EXPECT_NE(v.why.find("docs/data/plan/accuracy-codecs/"), std::string::npos) << v.why;
  EXPECT_NE(v.why.find("_embbf16_s*.jsonl"), std::string::npos) << v.why;
  EXPECT_FALSE(judge(k, 16, 1.0).admitted);  // measured at 4 ranks only
}

}  // namespace sparq::plan
