// The linear trainer against plain sequential references (full-batch
// gradient descent; Jacobi coordinate Newton steps), on 1-4 ranks in-process
// and under mpiexec; the sparse and dense exchanges against each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sparq/coll/broadcast.h"
#include "sparq/core/error.h"
#include "sparq/model/metrics.h"
#include "sparq/train/linear_trainer.h"
#include "tests/support/ranks.h"
#include "tests/support/sparse_rows_fixture.h"

namespace sparq {
namespace {

class NullSink final : public TrainerSink {
 public:
  void line(const std::string&) override {}
  void event(const nlohmann::json&) override {}
};

constexpr std::size_t kRows = 240, kDim = 60;  // 240 rows divide among 1-4 ranks evenly

SparseRows my_shard(const Transport& t, const SparseRows& all) {
  const std::size_t n = all.rows() / t.size();
  return test::slice_rows(all, n * t.rank(), n * (t.rank() + 1));
}

// P ranks train on their shards; returns the weights (rank 0's in-process,
// this process's under mpiexec), having checked that every rank holds rank 0's.
std::vector<float> train_on(int p, const SparseRows& all, const LinearTrainOptions& o) {
  std::vector<float> out;
  test::run_ranks(p, [&](Transport& t) {
    const SparseRows mine = my_shard(t, all);
    LinearModel m(all.num_features);
    NullSink sink;
    train_linear(t, m, mine, SparseRows{}, o, sink);
    std::vector<float> w = m.weights(), w0 = w;
    broadcast(t, std::span<float>(w0), 0);
    EXPECT_EQ(w, w0) << "rank " << t.rank() << " holds another model";
    if (t.rank() == 0 || test::under_mpi()) out = w;
  });
  return out;
}

TEST(LinearSgd, FullBatchEqualsPlainGradientDescent) {
  const SparseRows all = test::random_rows(kRows, kDim, 8, 11);
  for (LinearLoss loss : {LinearLoss::Logistic, LinearLoss::Hinge})
    for (int p : {1, 2, 3, 4}) {
      if (!test::ranks_available(p)) continue;
      LinearTrainOptions o;
      o.loss = loss, o.batch = kRows / p, o.epochs = 6, o.lr = 0.5, o.l2 = 0.01, o.lr_decay = 0.5;
      const std::vector<float> got = train_on(p, all, o);
      // The reference: w <- (1 - lr l2) w - lr mean_i dloss(y_i, w.x_i) x_i, in double.
      std::vector<double> w(kDim, 0.0);
      for (std::size_t e = 0; e < o.epochs; ++e) {
        const double lr = o.lr / (1 + o.lr_decay * static_cast<double>(e));
        std::vector<double> g(kDim, 0.0);
        for (std::size_t i = 0; i < all.rows(); ++i) {
          double z = 0;
          for (std::size_t k = 0; k < all.row_indices(i).size(); ++k) z += w[all.row_indices(i)[k]] * all.row_values(i)[k];
          const double d = linear_dloss(loss, all.labels[i], static_cast<float>(z));
          for (std::size_t k = 0; k < all.row_indices(i).size(); ++k) g[all.row_indices(i)[k]] += d * all.row_values(i)[k];
        }
        for (std::size_t j = 0; j < kDim; ++j) w[j] = (1 - lr * o.l2) * w[j] - lr * g[j] / kRows;
      }
      for (std::size_t j = 0; j < kDim; ++j)
        EXPECT_NEAR(got[j], w[j], 2e-5 * (1 + std::abs(w[j]))) << linear_loss_name(loss) << " P=" << p << " w" << j;
    }
}

TEST(LinearSgd, SparseAndDenseExchangesGiveTheSameModel) {
  const SparseRows all = test::random_rows(kRows, kDim, 8, 12);
  for (int p : {2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    LinearTrainOptions o;
    o.batch = 7, o.epochs = 2, o.lr = 0.3, o.l2 = 0.001;
    o.exchange = parse_linear_exchange("dense:ring", o.algo);
    const std::vector<float> dense = train_on(p, all, o);
    for (const char* x : {"ssar-recursive-double", "ssar-split-allgather", "dsar-split-allgather", "auto"}) {
      o.exchange = parse_linear_exchange(x, o.algo);
      const std::vector<float> sparse = train_on(p, all, o);
      if (p == 2) {  // one addition per sum whichever the algorithm: the same bits
        EXPECT_EQ(sparse, dense) << x;
        continue;
      }
      for (std::size_t j = 0; j < kDim; ++j) EXPECT_NEAR(sparse[j], dense[j], 1e-5 * (1 + std::abs(dense[j]))) << x << " P=" << p;
    }
  }
}

TEST(LinearScd, SparseAndDenseAllgatherGiveTheSameModelBitForBit) {
  const SparseRows all = test::random_rows(kRows, kDim, 8, 13);
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    LinearTrainOptions o;
    o.algo = LinearAlgo::Scd, o.coords = 4, o.epochs = 3, o.l2 = 0.01;
    o.exchange = parse_linear_exchange("dense", o.algo);
    const std::vector<float> dense = train_on(p, all, o);
    o.exchange = parse_linear_exchange("sparse", o.algo);
    EXPECT_EQ(train_on(p, all, o), dense) << "P=" << p;
  }
}

TEST(LinearScd, AWholeBlockEqualsJacobiNewtonSteps) {
  // One rank, every feature in one block: each epoch is one Newton step per
  // feature from the same margins, whatever the permutation, each at most 1.
  SPARQ_NEED_RANKS(1);
  const SparseRows all = test::random_rows(kRows, kDim, 8, 14);
  LinearTrainOptions o;
  o.algo = LinearAlgo::Scd, o.coords = kDim, o.epochs = 4, o.l2 = 0.05, o.lr = 0.5;
  const std::vector<float> got = train_on(1, all, o);
  std::vector<double> w(kDim, 0.0);
  for (std::size_t e = 0; e < o.epochs; ++e) {
    std::vector<double> g(kDim, 0.0), h(kDim, 0.0);
    std::vector<bool> seen(kDim, false);
    for (std::size_t i = 0; i < all.rows(); ++i) {
      double z = 0;
      for (std::size_t k = 0; k < all.row_indices(i).size(); ++k) z += w[all.row_indices(i)[k]] * all.row_values(i)[k];
      const double prob = 1 / (1 + std::exp(-z)), y01 = all.labels[i] > 0 ? 1 : 0;
      for (std::size_t k = 0; k < all.row_indices(i).size(); ++k) {
        const std::uint32_t j = all.row_indices(i)[k];
        const double x = all.row_values(i)[k];
        g[j] += (prob - y01) * x;
        h[j] += prob * (1 - prob) * x * x;
        seen[j] = true;
      }
    }
    for (std::size_t j = 0; j < kDim; ++j)
      if (seen[j]) w[j] -= o.lr * std::clamp((g[j] / kRows + o.l2 * w[j]) / (h[j] / kRows + o.l2), -1.0, 1.0);
  }
  for (std::size_t j = 0; j < kDim; ++j) EXPECT_NEAR(got[j], w[j], 1e-4 * (1 + std::abs(w[j]))) << "w" << j;
}

TEST(LinearEvaluate, EqualsTheSequentialScoresOverEveryRanksRows) {
  const SparseRows all = test::random_rows(kRows, kDim, 8, 15);
  LinearModel m(kDim);
  std::vector<float> w(kDim);
  for (std::size_t j = 0; j < kDim; ++j) w[j] = static_cast<float>(j % 5) - 2;
  m.set_weights(w);
  std::vector<float> z(kRows), y(kRows);
  double loss = 0, correct = 0;
  for (std::size_t i = 0; i < kRows; ++i) {
    z[i] = m.margin(all.row_indices(i), all.row_values(i));
    y[i] = all.labels[i] > 0 ? 1.0f : 0.0f;
    loss += linear_loss(LinearLoss::Logistic, all.labels[i], z[i]);
    correct += (z[i] > 0) == (all.labels[i] > 0);
  }
  for (int p : {1, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      const LinearScore s = evaluate_linear(t, m, LinearLoss::Logistic, my_shard(t, all));
      EXPECT_EQ(s.rows, kRows);
      EXPECT_NEAR(s.loss, loss / kRows, 1e-12);
      EXPECT_DOUBLE_EQ(s.accuracy, correct / kRows);
      EXPECT_DOUBLE_EQ(s.auc, roc_auc(z, y));
    });
  }
}

TEST(LinearExchange, NamesAndRefusals) {
  EXPECT_TRUE(parse_linear_exchange("dense:native", LinearAlgo::Sgd).dense);
  EXPECT_EQ(parse_linear_exchange("ssar-split-allgather", LinearAlgo::Sgd).sparse, SparseAlgo::SsarSplitAllgather);
  EXPECT_THROW(parse_linear_exchange("dense:ring", LinearAlgo::Scd), InputError);
  EXPECT_THROW(parse_linear_exchange("ssar-recursive-double", LinearAlgo::Scd), InputError);
  EXPECT_THROW(parse_linear_exchange("sparse", LinearAlgo::Sgd), InputError);
  EXPECT_THROW(parse_linear_exchange("bogus", LinearAlgo::Sgd), InputError);
  EXPECT_THROW(parse_linear_algo("newton"), InputError);
}

}  // namespace
}  // namespace sparq
