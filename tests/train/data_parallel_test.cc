// Data parallelism against single-rank training: with codec `none`, P ranks
// each training on 1/P of every global batch end with the parameters of one
// rank training on the whole batches (summation-order tolerance), and every
// rank holds bit-identical parameters.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "sparq/coll/patterns.h"
#include "sparq/core/blob.h"
#include "sparq/data/dataset.h"
#include "sparq/model/blas.h"
#include "sparq/model/loss.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/verify.h"
#include "tests/support/ranks.h"
#include "tests/train/fixtures.h"

namespace sparq {
namespace {

using test::all_params;
using test::make_batch;
using test::small_config;

struct Variant {
  EmbPlacement placement;
  bool overlap;
  std::size_t fuse_bytes;
};

TEST(DataParallel, EqualsSingleRankAtTheSameGlobalBatch) {
  set_blas_threads(1);  // ranks are threads here
  const DlrmConfig cfg = small_config();
  const std::size_t global = 24, steps = 50;
  OptimizerOptions oo;
  oo.lr = 0.1;
  auto size_of = [&](std::size_t k) { return k + 1 == steps ? std::size_t{2} : global; };
  const auto expect =
      all_params(*test::train_single(cfg, 7, steps, [&](std::size_t k) { return make_batch(cfg, k, 0, size_of(k)); }));
  // 24 samples over 5 ranks: shares of 5 and 4; the last batch has 2 samples for
  // up to 5 ranks, so some ranks get an empty share.
  for (const Variant v : {Variant{EmbPlacement::Replicated, true, 0}, Variant{EmbPlacement::Replicated, false, 0},
                          Variant{EmbPlacement::Replicated, true, 1000}, Variant{EmbPlacement::TableWise, true, 0},
                          Variant{EmbPlacement::TableWise, false, 1 << 20}})
    for (int p : {2, 3, 4, 5}) {
      if (!test::ranks_available(p)) continue;
      SCOPED_TRACE(fmt::format("{} ranks, {}, overlap {}, fuse {}", p, emb_placement_name(v.placement), v.overlap,
                               v.fuse_bytes));
      test::run_ranks(p, [&](Transport& t) {
        Dlrm<float> model(cfg, 7);
        Optimizer<float> opt(oo, model);
        compress::ErrorFeedbackStore store;
        DataParallel dp(t, model, opt,
                        {.codec = parse_dp_codec("none"), .placement = v.placement, .overlap = v.overlap,
                         .fuse_bytes = v.fuse_bytes},
                        store);
        for (std::size_t k = 0; k < steps; ++k) dp.step(make_batch(cfg, k, 0, size_of(k)), k);
        verify_replica_hash(t, dp.replica_hash(), steps);
        dp.gather_model(0);  // table-wise: rank 0 now holds every table
        if (t.rank() != 0 && v.placement == EmbPlacement::TableWise) return;
        EXPECT_LT(test::max_abs_diff(all_params(model), expect), 1e-6)
            << "largest parameter difference after " << steps << " steps";
      });
    }
}

// What a rank reads of a global batch (batch_part) is all its step needs:
// steps on batches holding only that part, the rest left from other batches,
// end with the parameters of steps on whole batches, bit for bit.
TEST(DataParallel, StepsOnItsBatchPartEqualStepsOnWholeBatches) {
  set_blas_threads(1);  // ranks are threads here
  DlrmConfig cfg;
  cfg.bot_mlp = {13, 16, 4};
  cfg.top_mlp = {8, 1};
  cfg.emb_dim = 4;
  cfg.table_rows.assign(kCriteoSparse, 0);
  for (std::size_t t = 0; t < kCriteoSparse; ++t) cfg.table_rows[t] = 20 + 7 * t;
  std::vector<CriteoRecord> recs(500);
  std::mt19937 g(3);
  for (CriteoRecord& r : recs) {
    r.label = static_cast<float>(g() % 2);
    for (float& x : r.dense) x = std::uniform_real_distribution<float>(0, 3)(g);
    for (std::uint32_t& id : r.sparse) id = g();
  }
  OptimizerOptions oo;
  oo.lr = 0.1;
  for (const EmbPlacement placement : {EmbPlacement::Replicated, EmbPlacement::TableWise})
    for (int p : {2, 3}) {
      if (!test::ranks_available(p)) continue;
      SCOPED_TRACE(fmt::format("{} ranks, {}", p, emb_placement_name(placement)));
      test::run_ranks(p, [&](Transport& t) {
        std::array<std::vector<float>, 2> params;
        for (const bool parts : {false, true}) {
          Dlrm<float> model(cfg, 7);
          Optimizer<float> opt(oo, model);
          compress::ErrorFeedbackStore store;
          DataParallel dp(t, model, opt, {.codec = parse_dp_codec("none"), .placement = placement}, store);
          BatchPlan plan(recs.size(), {.batch = 64, .seed = 9});  // 8 batches, the last of 52 samples
          Batch batch;
          for (std::size_t i = 0; i < plan.num_batches(); ++i) {
            const BatchPart part = dp.batch_part(plan.batch_size(i));
            plan.fill(i, recs, cfg.table_rows, batch, parts ? &part : nullptr);
            dp.step(batch, i);
          }
          params[parts] = all_params(model);
        }
        EXPECT_EQ(params[0], params[1]) << "rank " << t.rank();
      });
    }
}

TEST(TableWise, AssignsLargestTablesFirstToTheLeastLoadedRank) {
  SPARQ_LOCAL_ONLY();
  const std::vector<std::size_t> rows{10, 50, 20, 50, 5};
  // 50 (t1) -> 0, 50 (t3) -> 1, 20 (t2) -> 2, 10 (t0) -> 2 (load 20 < 50), 5 (t4) -> 2 (30 < 50).
  EXPECT_EQ(assign_tables(rows, 3), (std::vector<int>{2, 0, 2, 1, 2}));
  EXPECT_EQ(assign_tables(rows, 1), (std::vector<int>{0, 0, 0, 0, 0}));
  EXPECT_EQ(assign_tables(rows, 8), (std::vector<int>{3, 0, 2, 1, 4}));  // more ranks than tables: some own none
  EXPECT_THROW(parse_emb_placement("row-wise"), InputError);
}

// A quantization row covers consecutive samples of one table, also where a
// rank's share times the dimension does not fill whole rows: shares of 3
// samples, and 3 vectors of 4 values are a row of 8 and one of 4 (a block
// coded as one run would have a row mixing the last sample of one table
// with the first of the next). Reference: each table's
// share coded on its own, by the codec alone, and the tables' forward and
// backward of a separate model.
TEST(TableWise, QuantizationRowsStayInOneTableOnOddShares) {
  set_blas_threads(1);
  DlrmConfig cfg = small_config();
  cfg.emb_dim = 4;
  cfg.bot_mlp = {5, 8, 4};
  cfg.table_rows = {50, 70, 200, 30};
  const std::size_t d = cfg.emb_dim, m = cfg.num_tables(), row_len = 8;
  for (int p : {2, 3}) {
    const std::size_t G = 3 * static_cast<std::size_t>(p);
    if (!test::ranks_available(p)) continue;
    SCOPED_TRACE(fmt::format("{} ranks", p));
    test::run_ranks(p, [&](Transport& t) {
      const int r = t.rank();
      const pattern::Partition shares{G, p};
      auto codec = [&](const char* name) {
        Codec c = parse_codec(name);
        c.row_len = row_len;
        c.rowwise.scale = compress::ScaleType::F16;
        return c;
      };
      const Codec fwd = codec("q4"), bwd = codec("q2");
      auto coded = [](const Codec& c, std::vector<float> x) {  // one run: dec(enc(x))
        std::vector<std::byte> b(c.bytes(x.size()));
        c.encode(x, b, 0, 0);
        c.decode(b, x);
        return x;
      };
      Dlrm<float> model(cfg, 5), ref(cfg, 5);
      TableWise tw(t, model, fwd, bwd, row_len);
      const Batch global = make_batch(cfg, 3, 0, G);
      const std::size_t len = shares.len(r);
      ASSERT_NE(len * d % row_len, 0u);  // a table's share ends in a short row

      std::vector<float> pooled(len * m * d);
      tw.forward(global, pooled, 0);
      std::vector<float> all(G * d);
      for (std::size_t tb = 0; tb < m; ++tb) {  // EXPECT, not ASSERT: the other ranks go on to backward
        ref.tables()[tb].forward(global.sparse[tb], G, all.data(), d);
        std::vector<float> want(all.begin() + shares.offset(r) * d, all.begin() + (shares.offset(r) + len) * d);
        if (tw.owners()[tb] != r) want = coded(fwd, want);
        std::vector<float> got(len * d);
        for (std::size_t b = 0; b < len; ++b)
          std::copy_n(pooled.begin() + (b * m + tb) * d, d, got.begin() + b * d);
        EXPECT_EQ(got, want) << "lookups of table " << tb;
      }

      // Gradients of the lookups, tables at scales 1 to 1000 (a row mixing two would blur the smaller).
      auto dpooled_of = [&](std::size_t sample, std::size_t tb, std::size_t j) {
        return std::cos(0.9f * static_cast<float>(sample * d + j) + static_cast<float>(tb)) * std::pow(10.0f, float(tb));
      };
      std::vector<float> dpooled(len * m * d);
      for (std::size_t b = 0; b < len; ++b)
        for (std::size_t tb = 0; tb < m; ++tb)
          for (std::size_t j = 0; j < d; ++j) dpooled[(b * m + tb) * d + j] = dpooled_of(shares.offset(r) + b, tb, j);
      tw.backward({dpooled.data(), len, m * d}, 0);
      for (std::size_t tb = 0; tb < m; ++tb) {
        if (tw.owners()[tb] != r) continue;
        std::vector<float> grad(G * d);  // what the owner gets from each rank q, q's share coded as one run
        for (int q = 0; q < p; ++q) {
          std::vector<float> run;
          for (std::size_t b = 0; b < shares.len(q); ++b)
            for (std::size_t j = 0; j < d; ++j) run.push_back(dpooled_of(shares.offset(q) + b, tb, j));
          if (q != r) run = coded(bwd, run);
          std::copy(run.begin(), run.end(), grad.begin() + shares.offset(q) * d);
        }
        SparseGrad<float> want;
        ref.tables()[tb].backward(global.sparse[tb], G, grad.data(), d, want);
        for (float& v : want.values) v *= 1.0f / static_cast<float>(p);
        EXPECT_EQ(model.sparse_grad(tb).rows, want.rows) << "table " << tb;
        EXPECT_EQ(model.sparse_grad(tb).values, want.values) << "table " << tb;
      }
    });
  }
}

// Quantized lookups (fwd 4-bit) and gradients (bwd 2-bit): the counters show
// the bytes the codecs promise, the replicas stay identical, and training
// still tracks the fp32 alltoall closely.
TEST(TableWise, QuantizedAlltoallSendsFewerBytes) {
  set_blas_threads(1);
  const int p = 2;
  SPARQ_NEED_RANKS(p);
  DlrmConfig cfg = small_config();
  cfg.bot_mlp = {5, 16, 16};
  cfg.emb_dim = 16;
  cfg.table_rows = {50, 70, 200, 30, 90, 10};
  test::run_ranks(p, [&](Transport& t) {
    std::vector<float> params[2];
    DpStepStats total[2];
    for (int quantized : {0, 1}) {
      Dlrm<float> model(cfg, 5);
      Optimizer<float> opt({}, model);
      compress::ErrorFeedbackStore store;
      DataParallelOptions o{.codec = parse_dp_codec("none"), .placement = EmbPlacement::TableWise};
      if (quantized) o.emb_fwd = parse_codec("q4"), o.emb_bwd = parse_codec("q2");
      DataParallel dp(t, model, opt, o, store);
      for (std::size_t k = 0; k < 10; ++k) {
        const auto s = dp.step(make_batch(cfg, k, 0, 64), k);
        total[quantized].emb_fwd += s.emb_fwd;
        total[quantized].emb_bwd += s.emb_bwd;
      }
      verify_replica_hash(t, dp.replica_hash(), 10);
      dp.gather_model(0);
      params[quantized] = all_params(model);
    }
    // fp32: the counters equal 4 bytes a value; q4 / q2 rows of 32 values
    // carry 16 / 8 bytes plus a 4-byte fp16 scale and bias (6.4x, 10.7x).
    EXPECT_EQ(total[0].emb_fwd.bytes_sent, total[0].emb_fwd.dense_bytes);
    EXPECT_EQ(total[0].emb_bwd.bytes_sent, total[0].emb_bwd.dense_bytes);
    EXPECT_EQ(total[1].emb_fwd.dense_bytes, total[0].emb_fwd.dense_bytes);
    const auto ratio = [](const ExchangeStats& x) { return double(x.dense_bytes) / double(x.bytes_sent); };
    EXPECT_GT(ratio(total[1].emb_fwd), 6.0);
    EXPECT_GT(ratio(total[1].emb_bwd), 10.0);
    if (t.rank() == 0) {
      double worst = 0;
      for (std::size_t i = 0; i < params[0].size(); ++i)
        worst = std::max(worst, double(std::abs(params[0][i] - params[1][i])));
      EXPECT_GT(worst, 0.0);   // the codecs did change the numbers
      EXPECT_LT(worst, 0.05);  // ... but not the course of training
    }
  });
}

// With DCT-DP the ranks still stay identical (they apply the same averaged
// sparse update) while sending far less; bf16 values send less again.
TEST(DataParallel, DctKeepsReplicasIdenticalAndCompresses) {
  set_blas_threads(1);
  const int p = 3;
  SPARQ_NEED_RANKS(p);
  const DlrmConfig cfg = small_config();
  // ratio[rank][bf16]; under mpiexec a process fills only its own rank's row.
  std::vector<std::array<double, 2>> ratio(p, {0.0, 0.0});
  for (int bf16 : {0, 1})
  test::run_ranks(p, [&](Transport& t) {
    Dlrm<float> model(cfg, 11);
    OptimizerOptions oo;
    oo.lr = 0.05;
    Optimizer<float> opt(oo, model);
    compress::ErrorFeedbackStore store;
    DataParallel dp(t, model, opt, {.codec = parse_dp_codec(bf16 ? "dct:0.9,10+bf16" : "dct:0.9,10", "ssar-recursive-double")}, store);
    ExchangeStats w;
    for (std::size_t k = 0; k < 20; ++k) w += dp.step(make_batch(cfg, k, 0, 8 * p), k).w_grad;
    verify_replicas(t, all_params(model), 20);
    ratio[t.rank()][bf16] = static_cast<double>(w.dense_bytes) / static_cast<double>(w.bytes_sent);
  });
  for (const auto& r : ratio) {
    if (r[0] == 0.0) continue;  // another process's rank
    EXPECT_GT(r[0], 2.0);
    EXPECT_GT(r[1], 1.3 * r[0]);
  }
}

// A state saved before the row-sparse allreduce (format 1: it also held the
// replicated tables' sparse allreduce plan) still loads, and training goes on
// from it exactly as from the current format.
TEST(DataParallel, LoadsAFormatOneState) {
  SPARQ_LOCAL_ONLY();
  set_blas_threads(1);
  const DlrmConfig cfg = small_config();
  test::run_ranks(1, [&](Transport& t) {
    auto run = [&](const std::vector<std::byte>* state) {
      Dlrm<float> model(cfg, 5);
      Optimizer<float> opt(OptimizerOptions{}, model);
      compress::ErrorFeedbackStore store;
      DataParallel dp(t, model, opt, {.codec = parse_dp_codec("dct:0.9,10")}, store);
      if (state) dp.load_state(*state);
      for (std::size_t k = 0; k < 3; ++k) dp.step(make_batch(cfg, k, 0, 8), k);
      return std::pair(dp.save_state(), all_params(model));
    };
    const std::vector<std::byte> v2 = run(nullptr).first;
    BlobReader r(v2, "state");
    ASSERT_EQ(r.str(), "sparq data parallel state 2");
    BlobWriter w;
    w.str("sparq data parallel state 1");
    w.bytes(r.bytes());
    save_history(w, SparseAutoHistory{.dim = 1234, .nranks = 1, .result_nnz = 56});
    const std::vector<std::byte> v1 = w.take();
    EXPECT_EQ(run(&v1).second, run(&v2).second);
    std::vector<std::byte> truncated(v1.begin(), v1.end() - 1);
    EXPECT_THROW(run(&truncated), InputError);
  });
}

}  // namespace
}  // namespace sparq
