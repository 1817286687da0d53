#include "sparq/plan/bounds.h"

#include <gtest/gtest.h>

namespace sparq::plan {

// 1000 dense parameters, 26 tables of dimension 16, global batch 1024, 4 ranks.
const PlanShape kShape{1000, 26, 16, 1024, 4};

TEST(Bounds, Fp32ReplicatedIsTheRingsShare) {
  EXPECT_DOUBLE_EQ(min_bytes_sent(PlanKnobs{}, kShape), 2.0 * 3 / 4 * 1000 * 4);
}

TEST(Bounds, QuantizedRingsAndDctShrinkTheDenseBytes) {
  PlanKnobs q4{"replicated", "q4+ec", "ring", "fp32", "fp32", "0"};
  EXPECT_DOUBLE_EQ(min_bytes_sent(q4, kShape), 2.0 * 3 / 4 * 1000 * 0.5);
  PlanKnobs dct{"replicated", "dct:0.98,1000+bf16", "auto", "fp32", "fp32", "0"};
  EXPECT_NEAR(min_bytes_sent(dct, kShape), 0.02 * 1000 * 2, 1e-9);
}

TEST(Bounds, TableWiseAddsTheAlltoallsOfTheRankWithFewestTables) {
  // 26 tables on 4 ranks: rank with 6 sends 6 tables' lookups for the 3/4 of
  // the batch held elsewhere (q4: half a byte a value) and the gradients of
  // its 256 samples in the other 20 tables (q2: a quarter byte).
  PlanKnobs tw{"table-wise", "none", "auto", "q4", "q2", "0"};
  const double fwd = 6 * 1024 * 0.75 * 16 * 0.5, bwd = 20 * 256 * 16 * 0.25;
  EXPECT_DOUBLE_EQ(min_bytes_sent(tw, kShape), 2.0 * 3 / 4 * 1000 * 4 + fwd + bwd);
}

TEST(Bounds, OneRankSendsNothing) {
  EXPECT_EQ(min_bytes_sent(PlanKnobs{}, {1000, 26, 16, 1024, 1}), 0);
}

}  // namespace sparq::plan
