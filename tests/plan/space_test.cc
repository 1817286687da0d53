#include "sparq/plan/space.h"

#include <gtest/gtest.h>

#include <set>

#include "sparq/core/error.h"

namespace sparq::plan {

TEST(PlanSpace, OneRankHasNoExchangeOnlyTheMlpsPrecision) {
  const auto s = plan_space(1);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(s[0].fp32());
  EXPECT_EQ(s[1].mlp, "bf16");
  EXPECT_FALSE(s[1].fp32());  // bf16 MLPs are a codec of the computation
  EXPECT_EQ(s[1].dp_codec, "none");
}

TEST(PlanSpace, EveryPlanIsDistinctAndTheAlltoallCodecsAreTableWise) {
  const auto s = plan_space(8);
  std::set<std::string> labels;
  int fp32 = 0;
  for (const PlanKnobs& k : s) {
    EXPECT_TRUE(labels.insert(k.label()).second) << k.label();
    if (k.placement == "replicated") {
      EXPECT_TRUE(k.emb_fwd == "fp32" && (k.emb_bwd == "fp32" || k.emb_bwd == "bf16")) << k.label();
    } else {
      EXPECT_NE(k.emb_bwd, "bf16") << k.label();
    }
    fp32 += k.fp32();
  }
  // Data parallel: 8 dense choices x 3 fusions, x 2 gradient exchanges
  // (fp32, bf16) replicated, x 6 alltoall pairs table-wise; hybrid: the same
  // unfused, x 4 cuts; the parameter server: fp32 and DCT-DP's 4 pushes;
  // each with fp32 and bf16 MLPs.
  EXPECT_EQ(s.size(), 2 * (8u * 2 * 3 + 8u * 6 * 3 + 4 * (8u * 2 + 8u * 6) + 5));
  // none x {replicated, table-wise fp32/fp32}: x 3 fusions, and hybrid with nothing at the cut; fp32 MLPs.
  EXPECT_EQ(fp32, 6 + 2);
}

TEST(PlanSpace, HybridPlansNeedTwoReplicasOfTwoStagesAndTheServerTwoWorkers) {
  auto count = [](int ranks, const char* structure) {
    int n = 0;
    for (const PlanKnobs& k : plan_space(ranks)) n += k.structure() == structure;
    return n;
  };
  EXPECT_EQ(count(2, "hybrid"), 0);
  EXPECT_EQ(count(2, "ps"), 0);
  EXPECT_EQ(count(3, "hybrid"), 0);
  EXPECT_GT(count(3, "ps"), 0);
  EXPECT_GT(count(4, "hybrid"), 0);
  for (const PlanKnobs& k : plan_space(4)) {
    if (k.structure() == "hybrid") {
      EXPECT_EQ(k.fuse, "0") << k.label();  // the replicas exchange unfused after the pipeline
      EXPECT_EQ(k.micro_batches, 2) << k.label();
    }
    if (k.structure() == "ps") {
      EXPECT_TRUE(k.placement == "replicated" && k.dp_allreduce == "auto" && k.fuse == "0") << k.label();
      EXPECT_TRUE(k.dp_codec == "none" || k.dp_codec.starts_with("dct:")) << k.label();
    }
  }
}

TEST(PlanSpace, FlagsGiveTheKnobsBack) {
  for (const PlanKnobs& k : plan_space(4)) EXPECT_EQ(knobs_from_flags(k.flags()), k) << k.label();
}

TEST(PlanSpace, AFlagThatIsNotAKnobIsRefused) {
  EXPECT_THROW(knobs_from_flags({{"learning-rate", "0.1"}}), InputError);
  for (const char* bad : {"0", "two", "2x", ""}) EXPECT_THROW(knobs_from_flags({{"threads", bad}}), InputError) << bad;
  EXPECT_EQ(knobs_from_flags({{"threads", "4"}}).threads, 4);
  EXPECT_THROW(knobs_from_flags({{"mlp-precision", "fp16"}}), InputError);
  EXPECT_EQ(knobs_from_flags({{"mlp-precision", "bf16"}}).mlp, "bf16");
}

}  // namespace sparq::plan
