// Data parallelism against single-rank training: with codec `none`, P ranks
// each training on 1/P of every global batch end with the parameters of one
// rank training on the whole batches (summation-order tolerance), and every
// rank holds bit-identical parameters.
#include <gtest/gtest.h>

#include <random>

#include "sparq/coll/patterns.h"
#include "sparq/model/blas.h"
#include "sparq/model/loss.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/verify.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

DlrmConfig small_config() {
  DlrmConfig c;
  c.bot_mlp = {5, 16, 8};
  c.top_mlp = {16, 1};
  c.emb_dim = 8;
  c.table_rows = {50, 7, 200};
  return c;
}

// Samples [first, first + n) of global batch `step` (a pure function of both).
Batch make_batch(const DlrmConfig& c, std::uint64_t step, std::size_t first, std::size_t n) {
  Batch b;
  b.reset_one_hot(n, c.num_dense(), c.num_tables());
  for (std::size_t i = 0; i < n; ++i) {
    std::mt19937_64 g(step * 100003 + first + i);
    std::uniform_real_distribution<float> u(0, 1);
    for (std::size_t d = 0; d < c.num_dense(); ++d) b.dense[i * c.num_dense() + d] = u(g);
    for (std::size_t t = 0; t < c.num_tables(); ++t) b.sparse[t].indices[i] = static_cast<std::uint32_t>(g() % c.table_rows[t]);
    b.labels[i] = u(g) < 0.3f ? 1.0f : 0.0f;
  }
  return b;
}

std::vector<float> all_params(Dlrm<float>& m) {
  std::vector<float> v(m.dense().params().begin(), m.dense().params().end());
  for (auto& t : m.tables()) v.insert(v.end(), t.weights().begin(), t.weights().end());
  return v;
}

TEST(DataParallel, EqualsSingleRankAtTheSameGlobalBatch) {
  set_blas_threads(1);  // ranks are threads here
  const DlrmConfig cfg = small_config();
  const std::size_t global = 24, steps = 50;
  OptimizerOptions oo;
  oo.lr = 0.1;
  Dlrm<float> single(cfg, 7);
  Optimizer<float> sopt(oo, single);
  std::vector<float> dl;
  auto size_of = [&](std::size_t k) { return k + 1 == steps ? std::size_t{2} : global; };
  for (std::size_t k = 0; k < steps; ++k) {
    const Batch b = make_batch(cfg, k, 0, size_of(k));
    const auto z = single.forward(b);
    dl.resize(b.size);
    bce_with_logits<float>(z, b.labels, dl);
    single.backward(dl);
    sopt.step();
  }
  const auto expect = all_params(single);
  // 24 samples over 5 ranks: shares of 5 and 4; the last batch has 2 samples for
  // up to 5 ranks, so some ranks get an empty share.
  for (int p : {2, 3, 4, 5}) {
    if (!test::ranks_available(p)) continue;
    SCOPED_TRACE(p);
    test::run_ranks(p, [&](Transport& t) {
      Dlrm<float> model(cfg, 7);
      Optimizer<float> opt(oo, model);
      compress::ErrorFeedbackStore store;
      DataParallel dp(t, model, opt, parse_dp_codec("none"), store);
      for (std::size_t k = 0; k < steps; ++k) {
        const pattern::Partition shares{size_of(k), p};
        dp.step(make_batch(cfg, k, shares.offset(t.rank()), shares.len(t.rank())), size_of(k), k);
      }
      const auto got = all_params(model);
      ASSERT_EQ(got.size(), expect.size());
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::abs(got[i] - expect[i])));
      EXPECT_LT(worst, 1e-6) << "largest parameter difference after " << steps << " steps";
      verify_replicas(t, got, steps);
    });
  }
}

// With DCT-DP the ranks still stay identical (they apply the same averaged
// sparse update) while sending far less.
TEST(DataParallel, DctKeepsReplicasIdenticalAndCompresses) {
  set_blas_threads(1);
  const int p = 3;
  SPARQ_NEED_RANKS(p);
  const DlrmConfig cfg = small_config();
  test::run_ranks(p, [&](Transport& t) {
    Dlrm<float> model(cfg, 11);
    OptimizerOptions oo;
    oo.lr = 0.05;
    Optimizer<float> opt(oo, model);
    compress::ErrorFeedbackStore store;
    DataParallel dp(t, model, opt, parse_dp_codec("dct:0.9,10"), store);
    ExchangeStats w;
    for (std::size_t k = 0; k < 20; ++k) w += dp.step(make_batch(cfg, k, t.rank() * 8, 8), 8 * p, k).w_grad;
    verify_replicas(t, all_params(model), 20);
    EXPECT_GT(static_cast<double>(w.dense_bytes) / static_cast<double>(w.bytes_sent), 2.0);
  });
}

}  // namespace
}  // namespace sparq
