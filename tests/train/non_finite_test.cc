// A NaN or inf entering a codec, on the step it enters:
//  - fail (the default): the exchange that meets it throws NonFiniteError
//    naming the rank, the step and the tensor, for every --dp-codec, the
//    table-wise alltoalls both ways, the replicated tables' exchange and
//    DCT-MP's cut; no residual takes it in first;
//  - skip: the step is skipped on every rank, and the run ends bit for bit
//    where a run without that batch ends (parameters and codec state), the
//    reference being that run itself.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

#include "sparq/model/blas.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/emb_grad_exchange.h"
#include "sparq/train/hybrid.h"
#include "sparq/train/pipeline.h"
#include "sparq/train/verify.h"
#include "tests/support/ranks.h"
#include "tests/train/fixtures.h"

namespace sparq {
namespace {

using test::all_params;
using test::make_batch;
using test::small_config;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::size_t kGlobal = 8;  // two ranks: rank 1 trains on samples 4..7

// Global batch k; at step `bad` sample 5 (rank 1's share) gets `v` as a dense feature.
Batch batch_at(const DlrmConfig& cfg, std::uint64_t k, std::uint64_t bad, float v) {
  Batch b = make_batch(cfg, k, 0, kGlobal);
  if (k == bad) b.dense[5 * cfg.num_dense() + 1] = v;
  return b;
}

// The message of the error `fn` throws on 2 in-process ranks (only one rank's
// data is bad, so the other is woken by the abort: in-process only).
template <class Fn>
std::string error_of(Fn fn) {
  try {
    test::run_ranks(2, fn);
  } catch (const NonFiniteError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a NonFiniteError: ") + e.what();
  }
  return "no error";
}

struct Case {
  const char* codec;
  EmbPlacement placement;
  float value;
};

TEST(NonFinite, FailsOnTheStepItEntersNamingRankStepAndTensor) {
  SPARQ_LOCAL_ONLY();
  set_blas_threads(1);
  const DlrmConfig cfg = small_config();
  const std::uint64_t bad = 3;
  // dct with L = 100: step 3 is not a threshold step, where a NaN used to
  // slip past the compare into the residual.
  for (const Case c : {Case{"none", EmbPlacement::Replicated, kNaN}, Case{"dct:0.9,100", EmbPlacement::Replicated, kNaN},
                       Case{"dct:0.9,100+bf16", EmbPlacement::TableWise, kInf},
                       Case{"topk:2/16", EmbPlacement::Replicated, kInf}, Case{"q8+ec", EmbPlacement::TableWise, kNaN},
                       Case{"q4+ec", EmbPlacement::Replicated, kNaN}, Case{"q2+ec", EmbPlacement::Replicated, kInf},
                       Case{"qsgd:4", EmbPlacement::TableWise, kNaN}}) {
    SCOPED_TRACE(fmt::format("{}, {}, {}", c.codec, emb_placement_name(c.placement), c.value));
    for (bool overlap : {true, false}) {
      std::vector<std::uint64_t> reached(2, 0);
      const std::string what = error_of([&](Transport& t) {
        Dlrm<float> model(cfg, 7);
        Optimizer<float> opt({.lr = 0.1}, model);
        compress::ErrorFeedbackStore store;
        DataParallelOptions o{.codec = parse_dp_codec(c.codec), .placement = c.placement, .overlap = overlap};
        if (c.placement == EmbPlacement::TableWise) o.emb_fwd = o.emb_bwd = parse_codec("q4");
        DataParallel dp(t, model, opt, o, store);
        for (std::uint64_t k = 0; k < 6; ++k) {
          reached[t.rank()] = k;
          dp.step(batch_at(cfg, k, bad, c.value), k);
        }
      });
      // The first exchange of rank 1's gradients on step 3 stops the run
      // (the lookups' gradients or a dense bucket, whichever goes first).
      EXPECT_THAT(what, testing::ContainsRegex(
                            "^rank 1: rank 1, step 3: the gradient of (table [0-9]+'s lookups \\(emb_bwd\\)|table [0-9]+ "
                            "\\(emb_grad\\)|'[a-z0-9.]+' \\(bucket '[a-z0-9.+]+'\\)) holds -?(nan|inf) at [0-9]+ of [0-9]+"));
      EXPECT_EQ(reached[1], bad);
    }
  }
}

// A table row turned NaN before step 3 (as a diverged update would leave it):
// its owner's lookups stop before the forward alltoall sends them.
TEST(NonFinite, TableWiseLookupsFailOnTheirOwner) {
  SPARQ_LOCAL_ONLY();
  set_blas_threads(1);
  const DlrmConfig cfg = small_config();
  const std::string what = error_of([&](Transport& t) {
    Dlrm<float> model(cfg, 7);
    Optimizer<float> opt({.lr = 0.1}, model);
    compress::ErrorFeedbackStore store;
    DataParallel dp(t, model, opt,
                    {.codec = parse_dp_codec("none"), .placement = EmbPlacement::TableWise, .emb_fwd = parse_codec("q4")},
                    store);
    for (std::uint64_t k = 0; k < 6; ++k) {
      if (k == 3)  // every row of table 1 (7 rows): some sample looks one up
        for (float& w : model.tables()[1].weights()) w = kNaN;
      dp.step(make_batch(cfg, k, 0, kGlobal), k);
    }
  });
  EXPECT_THAT(what, testing::ContainsRegex("rank [01], step 3: the lookup block of table 1 for rank [01] \\(emb_fwd\\) holds "
                                           "nan at [0-9]+ of [0-9]+"));
}

// The tables' gradients, replicated (row-sparse allreduce) and table-wise
// (the backward alltoall to the owners), stop before anything is sent.
// Every rank's are bad, so every rank stops: any transport.
TEST(NonFinite, TableGradientsFailBeforeTheirExchange) {
  set_blas_threads(1);
  SPARQ_NEED_RANKS(2);
  const DlrmConfig cfg = small_config();
  test::run_ranks(2, [&](Transport& t) {
    std::vector<SparseGrad<float>> g(2);
    std::vector<EmbGradRef> refs;
    for (std::size_t tb = 0; tb < 2; ++tb) {
      g[tb].dim = 4;
      g[tb].rows = {1, 3};
      g[tb].values.assign(8, 0.5f);
      refs.push_back({&g[tb], 10, 4});
    }
    g[1].values[6] = -kInf;
    EXPECT_THAT([&] { exchange_embedding_grads(t, refs, 7); },
                testing::ThrowsMessage<NonFiniteError>(testing::HasSubstr(
                    fmt::format("rank {}, step 7: the gradient of table 1 (emb_grad) holds -inf at 6 of 8", t.rank()))));

    Dlrm<float> model(cfg, 7);
    TableWise tw(t, model, parse_codec("q4"), parse_codec("q2"), 32);
    const Batch b = make_batch(cfg, 0, 0, kGlobal);
    std::vector<float> pooled(kGlobal / 2 * cfg.num_tables() * cfg.emb_dim);
    tw.forward(b, pooled, 5);
    std::vector<float> dpooled(pooled.size(), 0.25f);
    dpooled[2 * cfg.num_tables() * cfg.emb_dim + 2 * cfg.emb_dim + 1] = kNaN;  // sample 2, table 2
    const Dlrm<float>::PooledGrad pg{dpooled.data(), kGlobal / 2, cfg.num_tables() * cfg.emb_dim};
    EXPECT_THAT([&] { tw.backward(pg, 5); },
                testing::ThrowsMessage<NonFiniteError>(testing::HasSubstr(fmt::format(
                    "rank {}, step 5: the gradient of table 2's lookups (emb_bwd) holds nan at 17 of 32", t.rank()))));
  });
}

// DCT-MP's cut: a NaN in stage 0's activations stops it before the top-k,
// and one in stage 1's gradient before it goes back.
TEST(NonFinite, DctMpCutFailsNamingStageAndMicroBatch) {
  SPARQ_LOCAL_ONLY();
  set_blas_threads(1);
  const DlrmConfig cfg = small_config();
  const auto stages = plan_stages(cfg, "bot:1");
  const std::string what = error_of([&](Transport& t) {
    Dlrm<float> stage(cfg, 7, stages[static_cast<std::size_t>(t.rank())]);
    Optimizer<float> opt({.lr = 0.1}, stage);
    Pipeline pipe(t, stage, opt, 2, parse_mp_codec("dct:0.5"));
    for (std::uint64_t k = 0; k < 6; ++k) pipe.step(batch_at(cfg, k, 3, kNaN), k);
  });
  EXPECT_THAT(what, testing::ContainsRegex("rank 0: step 3, stage 0, micro-batch 1: the activation matrix for stage 1 "
                                           "\\(X_act\\) holds nan at [0-9]+ of [0-9]+"));
}

struct SkipCase {
  const char* codec;
  EmbPlacement placement;
  const char* emb_codecs;  // table-wise: fwd and bwd
};

// Skipping: the run with a NaN batch at step `bad` ends where the default
// run (overlapped exchanges, no skipping) without that batch ends, on every
// rank, parameters and codec state alike, and the replicas stay identical.
TEST(NonFinite, SkippedStepEqualsARunWithoutThatBatch) {
  set_blas_threads(1);
  SPARQ_NEED_RANKS(2);
  const DlrmConfig cfg = small_config();
  const std::uint64_t bad = 3, steps = 9;
  for (const SkipCase c : {SkipCase{"none", EmbPlacement::Replicated, ""}, SkipCase{"dct:0.9,4", EmbPlacement::Replicated, ""},
                           SkipCase{"dct:0.9,4+fp8", EmbPlacement::TableWise, "q4"},
                           SkipCase{"topk:2/16", EmbPlacement::TableWise, "q2+ec"},
                           SkipCase{"q4+ec", EmbPlacement::Replicated, ""}, SkipCase{"qsgd:4", EmbPlacement::TableWise, "q8"}}) {
    SCOPED_TRACE(fmt::format("{}, {} {}", c.codec, emb_placement_name(c.placement), c.emb_codecs));
    test::run_ranks(2, [&](Transport& t) {
      std::array<std::vector<float>, 2> params;
      std::array<std::vector<std::byte>, 2> state;
      for (const bool with_bad : {true, false}) {
        Dlrm<float> model(cfg, 7);
        Optimizer<float> opt({.lr = 0.1, .embedding = EmbeddingOptim::RowwiseAdagrad}, model);
        compress::ErrorFeedbackStore store;
        DataParallelOptions o{.codec = parse_dp_codec(c.codec), .placement = c.placement, .skip_non_finite = with_bad};
        if (c.placement == EmbPlacement::TableWise) o.emb_fwd = o.emb_bwd = parse_codec(c.emb_codecs);
        DataParallel dp(t, model, opt, o, store);
        std::uint64_t k = 0, skipped = 0;
        for (std::uint64_t i = 0; i < steps; ++i) {
          if (i == bad && !with_bad) continue;  // the reference run never sees the batch
          const DpStepStats s = dp.step(batch_at(cfg, i, bad, kNaN), k);
          skipped += s.skipped;
          if (!s.skipped) ++k;
        }
        EXPECT_EQ(skipped, with_bad ? 1u : 0u) << "rank " << t.rank();
        verify_replica_hash(t, dp.replica_hash(), steps);
        dp.gather_model(0);
        params[with_bad] = all_params(model);
        state[with_bad] = dp.save_state();
      }
      EXPECT_EQ(params[0], params[1]) << "rank " << t.rank();
      EXPECT_EQ(state[0], state[1]) << "rank " << t.rank();
      for (float v : params[1]) ASSERT_TRUE(std::isfinite(v));
    });
  }
}

struct HybridCase {
  const char* mp;
  EmbPlacement placement;
};

// Hybrid (2 replicas x 2 stages, the cut after the bottom MLP's first
// layer): the bad sample's replica sends its NaN activations as zeros, every
// rank agrees to skip, and the run ends where the default run without that
// batch ends: every rank's parameters and codec state (the cut's topk-grad
// residuals, DCT-DP's between the replicas), and the replicas agree.
TEST(NonFinite, HybridSkipsAsARunWithoutThatBatch) {
  set_blas_threads(1);
  SPARQ_NEED_RANKS(4);
  const DlrmConfig cfg = small_config();
  const auto stages = plan_stages(cfg, "bot:1");
  const std::uint64_t bad = 3, steps = 8;
  for (const HybridCase c : {HybridCase{"dct:0.5", EmbPlacement::Replicated}, HybridCase{"topk-grad:0.5", EmbPlacement::Replicated},
                             HybridCase{"dct:0.5", EmbPlacement::TableWise}, HybridCase{"sketch:0.5", EmbPlacement::Replicated}}) {
    SCOPED_TRACE(fmt::format("{}, {}", c.mp, emb_placement_name(c.placement)));
    test::run_ranks(4, [&](Transport& t) {
      std::array<std::vector<float>, 2> params;
      std::array<std::vector<std::byte>, 2> state;
      for (const bool with_bad : {true, false}) {
        Dlrm<float> stage(cfg, 7, stages[static_cast<std::size_t>(t.rank()) % stages.size()]);
        Optimizer<float> opt({.lr = 0.1}, stage);
        compress::ErrorFeedbackStore store;
        DataParallelOptions o{.codec = parse_dp_codec("dct:0.9,4"), .placement = c.placement,
                              .skip_non_finite = with_bad};
        if (c.placement == EmbPlacement::TableWise) o.emb_fwd = o.emb_bwd = parse_codec("q4");
        Hybrid hy(t, stages.size(), stage, opt, 2, parse_mp_codec(c.mp), o, store);
        std::uint64_t k = 0, skipped = 0;
        for (std::uint64_t i = 0; i < steps; ++i) {
          if (i == bad && !with_bad) continue;
          const HybridStepStats s = hy.step(batch_at(cfg, i, bad, kNaN), k);
          skipped += s.skipped;
          if (!s.skipped) ++k;
        }
        EXPECT_EQ(skipped, with_bad ? 1u : 0u) << "rank " << t.rank();
        hy.verify(steps);
        params[with_bad] = all_params(stage);
        state[with_bad] = hy.save_state();
      }
      EXPECT_EQ(params[0], params[1]) << "rank " << t.rank();
      EXPECT_EQ(state[0], state[1]) << "rank " << t.rank();
    });
  }
}

}  // namespace
}  // namespace sparq
