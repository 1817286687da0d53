// The linear trainer against plain sequential references (full-batch
// gradient descent and AdaGrad; block coordinate descent with Armijo's line
// search), on 1-4 ranks in-process and under mpiexec; the sparse and dense
// exchanges against each other; the objective never rising on features that
// always appear together, where Jacobi Newton steps overshoot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "sparq/coll/broadcast.h"
#include "sparq/core/error.h"
#include "sparq/core/rng.h"
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
      o.sgd_step = SgdStep::Plain;
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
    o.exchange = parse_linear_exchange("dense:ring");
    const std::vector<float> dense = train_on(p, all, o);
    for (const char* x : {"ssar-recursive-double", "ssar-split-allgather", "dsar-split-allgather", "auto"}) {
      o.exchange = parse_linear_exchange(x);
      const std::vector<float> sparse = train_on(p, all, o);
      if (p == 2) {  // one addition per sum whichever the algorithm: the same bits
        EXPECT_EQ(sparse, dense) << x;
        continue;
      }
      for (std::size_t j = 0; j < kDim; ++j) EXPECT_NEAR(sparse[j], dense[j], 1e-5 * (1 + std::abs(dense[j]))) << x << " P=" << p;
    }
  }
}

TEST(LinearSgd, FullBatchAdagradEqualsTheSequentialAdagrad) {
  const SparseRows all = test::random_rows(kRows, kDim, 8, 16);
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    LinearTrainOptions o;
    o.batch = kRows / p, o.epochs = 5, o.lr = 0.5, o.l2 = 0.01;
    const std::vector<float> got = train_on(p, all, o);
    // The reference: g = mean_i dloss x_i, G += g^2, eta = lr / sqrt(G),
    // w = (w - eta g) / (1 + eta l2), in double.
    std::vector<double> w(kDim, 0.0), sq(kDim, 0.0);
    for (std::size_t e = 0; e < o.epochs; ++e) {
      std::vector<double> g(kDim, 0.0);
      std::vector<bool> held(kDim, false);
      for (std::size_t i = 0; i < all.rows(); ++i) {
        const auto idx = all.row_indices(i);
        const auto val = all.row_values(i);
        double z = 0;
        for (std::size_t k = 0; k < idx.size(); ++k) z += w[idx[k]] * val[k];
        const double d = linear_dloss(o.loss, all.labels[i], static_cast<float>(z));
        for (std::size_t k = 0; k < idx.size(); ++k) g[idx[k]] += d * val[k], held[idx[k]] = true;
      }
      for (std::size_t j = 0; j < kDim; ++j) {
        if (!held[j]) continue;
        const double gj = g[j] / kRows;
        sq[j] += gj * gj;
        const double eta = o.lr / (std::sqrt(sq[j]) + 1e-8);
        w[j] = (w[j] - eta * gj) / (1 + eta * o.l2);
      }
    }
    for (std::size_t j = 0; j < kDim; ++j) EXPECT_NEAR(got[j], w[j], 2e-5 * (1 + std::abs(w[j]))) << "P=" << p << " w" << j;
  }
}

// F(w) = mean logistic loss + l2/2 |w|^2, in double.
double objective(const SparseRows& all, std::span<const double> w, double l2) {
  double f = 0, sq = 0;
  for (std::size_t i = 0; i < all.rows(); ++i) {
    double z = 0;
    for (std::size_t k = 0; k < all.row_indices(i).size(); ++k) z += w[all.row_indices(i)[k]] * all.row_values(i)[k];
    const double m = (all.labels[i] > 0 ? 1 : -1) * z;
    f += m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m));
  }
  for (double x : w) sq += x * x;
  return f / static_cast<double>(all.rows()) + l2 / 2 * sq;
}

double row_dot(const SparseRows& all, std::size_t i, const std::vector<double>& v) {
  double z = 0;
  for (std::size_t k = 0; k < all.row_indices(i).size(); ++k) z += v[all.row_indices(i)[k]] * all.row_values(i)[k];
  return z;
}

// Over every row at w, by feature: sum (p - y01) x and sum p (1 - p) x^2;
// and each row's p (1 - p).
struct Sums {
  std::vector<double> g, h, curv;
};
Sums sums_at(const SparseRows& all, const std::vector<double>& w) {
  Sums s{std::vector<double>(all.num_features), std::vector<double>(all.num_features), {}};
  for (std::size_t i = 0; i < all.rows(); ++i) {
    const double p = 1 / (1 + std::exp(-row_dot(all, i, w))), y01 = all.labels[i] > 0 ? 1 : 0;
    s.curv.push_back(p * (1 - p));
    for (std::size_t k = 0; k < all.row_indices(i).size(); ++k) {
      const double x = all.row_values(i)[k];
      s.g[all.row_indices(i)[k]] += (p - y01) * x;
      s.h[all.row_indices(i)[k]] += p * (1 - p) * x * x;
    }
  }
  return s;
}

// w + alpha d for the largest alpha of 1, 1/2, ... with
// F(w + alpha d) - F(w) <= 0.01 alpha slope (w itself if none).
std::vector<double> armijo(const SparseRows& all, const std::vector<double>& w, const std::vector<double>& d,
                           double slope, double l2) {
  const double f0 = objective(all, w, l2);
  for (double alpha = 1; alpha > 1e-9; alpha /= 2) {
    std::vector<double> next(w);
    for (std::size_t j = 0; j < w.size(); ++j) next[j] += alpha * d[j];
    if (objective(all, next, l2) - f0 <= 0.01 * alpha * slope) return next;
  }
  return w;
}

// The reference: one rank, every block's Newton steps from all the rows,
// capped at 1, then the line search; the blocks in the order of the
// trainer's seed.
std::vector<double> sequential_scd(const SparseRows& all, const LinearTrainOptions& o) {
  std::vector<std::size_t> held;
  for (std::size_t j = 0; j < all.num_features; ++j)
    for (std::size_t i = 0; i < all.rows(); ++i)
      if (std::ranges::find(all.row_indices(i), j) != all.row_indices(i).end()) {
        held.push_back(j);
        break;
      }
  std::vector<double> w(all.num_features, 0.0);
  for (std::size_t e = 0; e < o.epochs; ++e) {
    Rng rng(o.seed, 0x5cd00000 + e);
    std::vector<std::size_t> order = held;
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    for (std::size_t a = 0; a < order.size(); a += o.coords) {
      const Sums s = sums_at(all, w);
      std::vector<double> d(all.num_features, 0.0);
      double slope = 0;
      for (std::size_t q = a; q < std::min(a + o.coords, order.size()); ++q) {
        const std::size_t j = order[q];
        const double gj = s.g[j] / kRows + o.l2 * w[j];
        d[j] = -std::clamp(gj / (s.h[j] / kRows + o.l2), -1.0, 1.0);
        slope += gj * d[j];
      }
      w = armijo(all, w, d, slope, o.l2);
    }
  }
  return w;
}

TEST(LinearScd, EqualsTheSequentialBlockCoordinateDescentAtEveryP) {
  const SparseRows all = test::random_rows(kRows, kDim, 8, 13);
  LinearTrainOptions o;
  o.algo = LinearAlgo::Scd, o.coords = 7, o.epochs = 3, o.l2 = 0.01;
  const std::vector<double> want = sequential_scd(all, o);
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    for (const char* x : {"auto", "dense"}) {
      o.exchange = parse_linear_exchange(x);
      const std::vector<float> got = train_on(p, all, o);
      for (std::size_t j = 0; j < kDim; ++j) EXPECT_NEAR(got[j], want[j], 1e-4 * (1 + std::abs(want[j]))) << x << " P=" << p << " w" << j;
    }
  }
}

// The reference: one rank, in double: g = X^T (p - y) / n + l2 w; s from
// conjugate gradients on H = X^T diag(p (1 - p)) X / n + l2, preconditioned
// by M = l2 + 0.01 sum p (1 - p) x^2 / n, from 0 until |r| <= 0.1 |g| (at
// most 100 products); w += alpha s, alpha the largest of 1, 1/2, ... with
// F(w + alpha s) - F(w) <= 0.01 alpha g.s.
std::vector<double> sequential_newton(const SparseRows& all, const LinearTrainOptions& o) {
  const std::size_t d = all.num_features;
  const auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double x = 0;
    for (std::size_t j = 0; j < a.size(); ++j) x += a[j] * b[j];
    return x;
  };
  std::vector<double> w(d, 0.0);
  for (std::size_t e = 0; e < o.epochs; ++e) {
    const Sums sums = sums_at(all, w);
    std::vector<double> g(d), s(d, 0.0), r(d), m(d), z(d), dir(d), hd(d);
    for (std::size_t j = 0; j < d; ++j) {
      g[j] = sums.g[j] / kRows + o.l2 * w[j], r[j] = -g[j];
      m[j] = o.l2 + 0.01 * sums.h[j] / kRows, z[j] = r[j] / m[j];
    }
    dir = z;
    double rr = dot(r, r), rz = dot(r, z);
    const double stop = 0.01 * rr;
    for (int k = 0; k < 100 && rr > stop; ++k) {
      std::fill(hd.begin(), hd.end(), 0.0);
      for (std::size_t i = 0; i < all.rows(); ++i) {
        const double u = sums.curv[i] * row_dot(all, i, dir);
        for (std::size_t q = 0; q < all.row_indices(i).size(); ++q) hd[all.row_indices(i)[q]] += u * all.row_values(i)[q];
      }
      for (std::size_t j = 0; j < d; ++j) hd[j] = hd[j] / kRows + o.l2 * dir[j];
      const double a = rz / dot(dir, hd);
      for (std::size_t j = 0; j < d; ++j) s[j] += a * dir[j], r[j] -= a * hd[j], z[j] = r[j] / m[j];
      const double next = dot(r, z);
      for (std::size_t j = 0; j < d; ++j) dir[j] = z[j] + next / rz * dir[j];
      rz = next, rr = dot(r, r);
    }
    w = armijo(all, w, s, dot(g, s), o.l2);
  }
  return w;
}

TEST(LinearNewton, EqualsTheSequentialTruncatedNewtonAtEveryP) {
  const SparseRows all = test::random_rows(kRows, kDim, 8, 17);
  LinearTrainOptions o;
  o.algo = LinearAlgo::Newton, o.epochs = 3, o.l2 = 0.01;
  const std::vector<double> want = sequential_newton(all, o);
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    for (const char* x : {"auto", "owner-alltoall", "ssar-split-allgather", "dense"}) {
      o.exchange = parse_linear_exchange(x);
      const std::vector<float> got = train_on(p, all, o);
      for (std::size_t j = 0; j < kDim; ++j)
        EXPECT_NEAR(got[j], want[j], 1e-4 * (1 + std::abs(want[j]))) << x << " P=" << p << " w" << j;
    }
  }
}

// Rows of words, each word a group of kGroup features that always appear
// together (a word and its n-grams), labels from the words.
SparseRows cooccurring_rows() {
  constexpr std::size_t kWords = 15, kGroup = 4;
  SparseRows r;
  r.num_features = kWords * kGroup;
  Rng rng(5, 0);
  for (std::size_t i = 0; i < kRows; ++i) {
    double margin = 0;
    for (std::size_t w = 0; w < kWords; ++w) {
      if (rng.uniform() >= 0.3) continue;
      margin += (w % 3 == 0 ? 2.0 : -1.0);
      for (std::size_t c = 0; c < kGroup; ++c) {
        r.indices.push_back(static_cast<std::uint32_t>(w * kGroup + c));
        r.values.push_back(1.0f);
      }
    }
    r.labels.push_back(margin + rng.normal() > 0 ? 1.0f : -1.0f);
    r.offsets.push_back(r.indices.size());
  }
  return r;
}

class LinearSecondOrder : public testing::TestWithParam<LinearAlgo> {};

TEST_P(LinearSecondOrder, TheObjectiveNeverRisesOnFeaturesThatAppearTogether) {
  SPARQ_NEED_RANKS(4);
  const SparseRows all = cooccurring_rows();
  LinearTrainOptions o;
  o.algo = GetParam(), o.coords = 100, o.epochs = 1, o.l2 = 1.0 / kRows;
  std::vector<double> seen;
  test::run_ranks(4, [&](Transport& t) {
    const SparseRows mine = my_shard(t, all);
    LinearModel m(all.num_features);
    NullSink sink;
    for (int e = 0; e < 8; ++e) {  // an epoch a call, the model carried over
      train_linear(t, m, mine, SparseRows{}, o, sink);
      const std::vector<float> w = m.weights();
      if (t.rank() == 0) seen.push_back(objective(all, std::vector<double>(w.begin(), w.end()), o.l2));
    }
  });
  if (seen.empty()) return;  // under mpiexec, another rank's process
  double before = objective(all, std::vector<double>(all.num_features, 0.0), o.l2);
  for (std::size_t e = 0; e < seen.size(); ++e) {
    EXPECT_LE(seen[e], before * (1 + 1e-12)) << "epoch " << e + 1 << " raised the objective";
    before = seen[e];
  }
  EXPECT_LT(seen.back(), 0.9 * seen.front()) << "it learns";
}

// With the owner exchange a rank's model is exact only on its own train and
// test rows' features until training ends: the test scores printed after
// an epoch must still be the whole model's, and the objective's |w|^2 too.
class LastEpoch final : public TrainerSink {
 public:
  void line(const std::string&) override {}
  void event(const nlohmann::json& e) override {
    if (e.value("event", "") == "epoch") last = e;
  }
  nlohmann::json last;
};

TEST(LinearNewton, ScoresAnEpochWithTheWholeModel) {
  SPARQ_NEED_RANKS(4);
  // 2000 features, 8 a row: each rank's rows hold a fraction of them, and its test rows others.
  const SparseRows train = test::random_rows(kRows, 2000, 8, 21), test_rows = test::random_rows(kRows, 2000, 8, 22);
  LinearTrainOptions o;
  o.algo = LinearAlgo::Newton, o.epochs = 2, o.l2 = 0.01;
  test::run_ranks(4, [&](Transport& t) {
    LinearModel m(train.num_features);
    LastEpoch sink;
    const SparseRows mine = my_shard(t, train), my_test = my_shard(t, test_rows);
    const LinearTrainResult r = train_linear(t, m, mine, my_test, o, sink);
    const LinearScore whole = evaluate_linear(t, m, LinearLoss::Logistic, my_test);
    const LinearScore on_train = evaluate_linear(t, m, LinearLoss::Logistic, mine);
    if (t.rank() != 0) return;
    EXPECT_DOUBLE_EQ(sink.last.at("test_loss").get<double>(), whole.loss);
    EXPECT_DOUBLE_EQ(sink.last.at("test_accuracy").get<double>(), whole.accuracy);
    EXPECT_NEAR(r.objective, on_train.loss + o.l2 / 2 * m.squared_norm(), 1e-6 * r.objective);
  });
}

INSTANTIATE_TEST_SUITE_P(ScdAndNewton, LinearSecondOrder, testing::Values(LinearAlgo::Scd, LinearAlgo::Newton));

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
  EXPECT_TRUE(parse_linear_exchange("dense:native").dense);
  EXPECT_EQ(parse_linear_exchange("ssar-split-allgather").sparse, SparseAlgo::SsarSplitAllgather);
  EXPECT_EQ(linear_exchange_name(parse_linear_exchange("dense:ring")), "dense:ring");
  EXPECT_TRUE(parse_linear_exchange("owner-alltoall").owners);
  EXPECT_EQ(linear_exchange_name(parse_linear_exchange("owner-alltoall")), "owner-alltoall");
  EXPECT_THROW(parse_linear_exchange("sparse"), InputError);
  EXPECT_THROW(parse_linear_exchange("bogus"), InputError);
  EXPECT_THROW(parse_linear_algo("lbfgs"), InputError);
  EXPECT_THROW(parse_sgd_step("adam"), InputError);
}

}  // namespace
}  // namespace sparq
