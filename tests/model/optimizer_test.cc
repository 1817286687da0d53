#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "sparq/core/error.h"
#include "sparq/model/embedding.h"
#include "sparq/model/optimizer.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

TEST(EmbeddingBag, RepeatedIdsAreCoalescedAndSummed) {
  EmbeddingBag<float> t(6, 2);
  for (std::size_t i = 0; i < 12; ++i) t.weights()[i] = static_cast<float>(i);
  SparseBags bags{{0, 2, 2, 5}, {4, 1, 1, 4, 4}};  // sample 1 empty
  std::vector<float> out(3 * 2);
  t.forward(bags, 3, out.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{8 + 2, 9 + 3, 0, 0, 2 + 8 + 8, 3 + 9 + 9}));
  std::vector<float> dout{1, 2, 100, 200, 10, 20};
  SparseGrad<float> g;
  t.backward(bags, 3, dout.data(), 2, g);
  EXPECT_EQ(g.rows, (std::vector<std::uint32_t>{1, 4}));
  EXPECT_EQ(g.values, (std::vector<float>{1 + 10, 2 + 20, 1 + 10 + 10, 2 + 20 + 20}));
}

// Random multi-hot bags over 2^23 rows (three radix passes of the row sort):
// the coalesced gradient equals a map from row to the sum of its positions'
// gradients, added in position order (so bit for bit).
TEST(EmbeddingBag, BackwardMatchesAMapReference) {
  const std::size_t rows = std::size_t{1} << 23, batch = 300;
  EmbeddingBag<float> t(rows, 1);
  std::mt19937 rng(5);
  SparseBags bags;
  bags.offsets.push_back(0);
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t len = rng() % 4;  // empty bags too
    for (std::size_t i = 0; i < len; ++i)
      bags.indices.push_back(rng() % 3 == 0 ? static_cast<std::uint32_t>(rng() % 50) : static_cast<std::uint32_t>(rng() % rows));
    bags.offsets.push_back(static_cast<std::uint32_t>(bags.indices.size()));
  }
  std::vector<float> dout(batch);
  for (auto& v : dout) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::map<std::uint32_t, float> want;
  for (std::size_t b = 0; b < batch; ++b)
    for (std::uint32_t i = bags.offsets[b]; i < bags.offsets[b + 1]; ++i) {
      auto [it, fresh] = want.try_emplace(bags.indices[i], dout[b]);
      if (!fresh) it->second += dout[b];
    }
  SparseGrad<float> g;
  t.backward(bags, batch, dout.data(), 1, g);
  ASSERT_EQ(g.rows.size(), want.size());
  ASSERT_EQ(g.values.size(), want.size());
  std::size_t j = 0;
  for (const auto& [row, v] : want) {
    EXPECT_EQ(g.rows[j], row);
    EXPECT_EQ(g.values[j], v) << row;
    ++j;
  }
}

// What a table-wise owner calls: a range of the bags pooled into a block of
// its own, and the gradient read through a pointer per bag. Both equal the
// whole-batch calls bit for bit, and a gradient with fewer rows than the
// call before carries nothing over.
TEST(EmbeddingBag, RangesAndRowPointersEqualTheWholeBatch) {
  const std::size_t rows = 1000, dim = 3, batch = 40;
  EmbeddingBag<float> t(rows, dim);
  t.init(7, 1);
  std::mt19937 rng(11);
  auto make_bags = [&](std::uint32_t id_range) {
    SparseBags bags;
    bags.offsets.push_back(0);
    for (std::size_t b = 0; b < batch; ++b) {
      for (std::size_t i = rng() % 3; i-- > 0;) bags.indices.push_back(static_cast<std::uint32_t>(rng() % id_range));
      bags.offsets.push_back(static_cast<std::uint32_t>(bags.indices.size()));
    }
    return bags;
  };
  const SparseBags many = make_bags(rows), few = make_bags(5);  // few: repeated rows
  std::vector<float> whole(batch * dim), part(9 * 4, -1.0f);
  t.forward(many, batch, whole.data(), dim);
  t.forward(many, batch, 17, 9, part.data(), 4);  // stride 4: the 4th column is not written
  for (std::size_t b = 0; b < 9; ++b) {
    for (std::size_t j = 0; j < dim; ++j) EXPECT_EQ(part[b * 4 + j], whole[(17 + b) * dim + j]) << b;
    EXPECT_EQ(part[b * 4 + dim], -1.0f);
  }
  EXPECT_THROW(t.forward(many, batch, 35, 6, part.data(), dim), Error);

  // The gradient of bag b at a scattered place: reversed order, stride 5.
  std::vector<float> dout(batch * dim), scattered(batch * 5);
  for (auto& v : dout) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<const float*> at(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    at[b] = scattered.data() + (batch - 1 - b) * 5;
    std::copy_n(dout.data() + b * dim, dim, scattered.data() + (batch - 1 - b) * 5);
  }
  SparseGrad<float> want, got;
  for (const SparseBags* bags : {&many, &few}) {
    EmbeddingBag<float> fresh(rows, dim);
    fresh.backward(*bags, batch, dout.data(), dim, want);
    t.backward(*bags, batch, at, got);  // after `many`, `few` coalesces into a shorter gradient
    EXPECT_EQ(got.rows, want.rows);
    EXPECT_EQ(got.values, want.values);
    EXPECT_EQ(got.values.size(), got.rows.size() * dim);
  }
  EXPECT_THROW(t.backward(few, batch, std::span<const float* const>(at).first(batch - 1), got), Error);
}

TEST(EmbeddingBag, IdOutOfRangeThrows) {
  EmbeddingBag<float> t(3, 2);
  SparseBags bags{{0, 1}, {3}};
  std::vector<float> out(2);
  EXPECT_THROW(t.forward(bags, 1, out.data(), 2), Error);
}

TEST(Optimizer, SgdRowsTouchOnlyGivenRows) {
  EmbeddingBag<float> t(4, 2);
  SparseGrad<float> g{2, {2}, {1.f, -2.f}};
  sgd_rows(t, g, 0.5f);
  EXPECT_EQ(std::vector<float>(t.weights().begin(), t.weights().end()),
            (std::vector<float>{0, 0, 0, 0, -0.5f, 1.f, 0, 0}));
}

TEST(Optimizer, RowwiseAdagradByHand) {
  EmbeddingBag<double> t(3, 2);
  std::vector<double> state(3, 0.0);
  SparseGrad<double> g{2, {1}, {3.0, 4.0}};
  rowwise_adagrad_rows<double>(t, state, g, 0.1, 0.0);
  EXPECT_DOUBLE_EQ(state[1], (9.0 + 16.0) / 2);
  const double s = 0.1 / std::sqrt(12.5);
  EXPECT_DOUBLE_EQ(t.row(1)[0], -3.0 * s);
  EXPECT_DOUBLE_EQ(t.row(1)[1], -4.0 * s);
  rowwise_adagrad_rows<double>(t, state, g, 0.1, 0.0);
  EXPECT_DOUBLE_EQ(state[1], 25.0);
  EXPECT_DOUBLE_EQ(t.row(1)[0], -3.0 * s - 3.0 * 0.1 / 5.0);
  EXPECT_EQ(state[0], 0.0);
}

TEST(Optimizer, ParseNames) {
  EXPECT_EQ(parse_embedding_optim("rowwise-adagrad"), EmbeddingOptim::RowwiseAdagrad);
  EXPECT_THROW(parse_embedding_optim("adam"), InputError);
  for (auto o : {DenseOptim::Sgd, DenseOptim::Adagrad, DenseOptim::Adam})
    EXPECT_EQ(parse_dense_optim(dense_optim_name(o)), o);
  EXPECT_THROW(parse_dense_optim("rowwise-adagrad"), InputError);
}

// dlrm_s_pytorch.py's LRPolicyScheduler as it runs: get_lr() with its step
// count at 1 on construction, then after every optimizer step; it keeps the
// last rate it computed (where it has none and would fail, sparq holds the base).
struct ReferenceScheduler {
  double base;
  long w, s, d;
  std::optional<double> last;
  double get_lr(long c) {
    if (c < w) {
      last = base * (1.0 - static_cast<double>(w - c) / static_cast<double>(w));
    } else if (s <= c && c < s + d) {
      const double scale = std::pow(static_cast<double>(d - (c - s)) / static_cast<double>(d), 2);
      last = std::max(0.0000001, base * scale);
    } else {
      return d > 0 && last ? *last : base;
    }
    return *last;
  }
};

TEST(LrSchedule, MatchesTheReferenceSchedulerStepByStep) {
  for (long w : {0, 1, 2, 5})
    for (long s : {0L, w, w + 3})
      for (long d : {0, 1, 4}) {
        if ((d == 0 && s != 0) || (d > 0 && s < w)) continue;  // rejected (below)
        for (double base : {0.1, 3e-7}) {
          const LrSchedule sched{static_cast<std::uint64_t>(w), static_cast<std::uint64_t>(s),
                                 static_cast<std::uint64_t>(d)};
          ReferenceScheduler ref{base, w, s, d, {}};
          for (long c = 1; c < s + d + w + 5; ++c)
            EXPECT_EQ(sched.lr(base, static_cast<std::uint64_t>(c)), ref.get_lr(c))
                << "W " << w << " S " << s << " D " << d << " step " << c << " base " << base;
        }
      }
  // Some values by hand: W 4, S 6, D 2.
  const LrSchedule s{4, 6, 2};
  EXPECT_DOUBLE_EQ(s.lr(1.0, 1), 0.25);
  EXPECT_DOUBLE_EQ(s.lr(1.0, 3), 0.75);
  EXPECT_DOUBLE_EQ(s.lr(1.0, 4), 0.75);  // held between warmup and decay
  EXPECT_DOUBLE_EQ(s.lr(1.0, 6), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(1.0, 7), 0.25);
  EXPECT_DOUBLE_EQ(s.lr(1.0, 100), 0.25);  // held after the decay
  EXPECT_DOUBLE_EQ(s.lr(2e-7, 7), 1e-7);   // the floor
  EXPECT_THROW((LrSchedule{4, 3, 2}.validate()), InputError);  // decay before the warmup ends
  EXPECT_THROW((LrSchedule{0, 3, 0}.validate()), InputError);  // a start without a decay
  EXPECT_NO_THROW((LrSchedule{4, 0, 0}.validate()));
}

// Textbook Adagrad and Adam (bias-corrected moments), in double, one element
// after the other.
struct ReferenceDense {
  DenseOptim kind;
  std::vector<double> p, sum, m, v;
  long t = 0;
  void step(const std::vector<float>& g, double lr) {
    ++t;
    sum.resize(p.size()), m.resize(p.size()), v.resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i];
      if (kind == DenseOptim::Sgd) {
        p[i] -= lr * gi;
      } else if (kind == DenseOptim::Adagrad) {
        sum[i] += gi * gi;
        p[i] -= lr * gi / (std::sqrt(sum[i]) + 1e-10);
      } else {
        m[i] = 0.9 * m[i] + 0.1 * gi;
        v[i] = 0.999 * v[i] + 0.001 * gi * gi;
        const double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.999, t));
        p[i] -= lr * mhat / (std::sqrt(vhat) + 1e-8);
      }
    }
  }
};

// Gradients of update k: dense ones of every size (some zero), and one row of table 0.
void set_grads(Dlrm<float>& m, int k) {
  std::mt19937 rng(static_cast<unsigned>(k));
  const float scale = k % 3 == 0 ? 0.01f : 1.0f;
  for (float& g : m.dense().grads())
    g = rng() % 7 == 0 ? 0.0f : scale * std::uniform_real_distribution<float>(-1, 1)(rng);
  for (std::size_t t = 0; t < m.tables().size(); ++t) m.sparse_grad(t) = {m.config().emb_dim, {}, {}};
  m.sparse_grad(0).rows = {static_cast<std::uint32_t>(k % 7)};
  m.sparse_grad(0).values.assign(m.config().emb_dim, 0.5f);
}

TEST(Optimizer, DenseOptimizersAndScheduleMatchTheReference) {
  for (auto kind : {DenseOptim::Sgd, DenseOptim::Adagrad, DenseOptim::Adam}) {
    Dlrm<float> model(test::tiny_config(), 3);
    // Warmup, hold, decay, hold: 3 + 1 + 6 + 4 updates.
    const OptimizerOptions oo{.lr = 0.05, .embedding_lr = 0.2, .dense = kind, .schedule = {4, 5, 6}};
    Optimizer<float> opt(oo, model);
    ASSERT_EQ(opt.state().size(), dense_state_vectors(kind));
    ReferenceDense ref{kind, {model.dense().params().begin(), model.dense().params().end()}, {}, {}, {}};
    std::vector<double> table0(model.tables()[0].weights().begin(), model.tables()[0].weights().end());
    ReferenceScheduler dense_lr{0.05, 4, 5, 6, {}}, emb_lr{0.2, 4, 5, 6, {}};
    for (int k = 1; k <= 14; ++k) {
      set_grads(model, k);
      ref.step({model.dense().grads().begin(), model.dense().grads().end()}, dense_lr.get_lr(k));
      const double elr = emb_lr.get_lr(k);
      for (std::size_t j = 0; j < 3; ++j) table0[(k % 7) * 3 + j] -= elr * 0.5;
      opt.step();
      for (std::size_t i = 0; i < ref.p.size(); ++i)
        ASSERT_NEAR(model.dense().params()[i], ref.p[i], 2e-6) << dense_optim_name(kind) << " step " << k << " i " << i;
      for (std::size_t i = 0; i < table0.size(); ++i) ASSERT_NEAR(model.tables()[0].weights()[i], table0[i], 1e-6);
    }
    EXPECT_EQ(opt.steps(), 14u);
  }
}

// Stopping after k updates and going on from state() and steps() in a fresh
// optimizer is bit for bit the uninterrupted run.
TEST(Optimizer, ResumeFromStateIsBitwise) {
  const OptimizerOptions oo{
      .lr = 0.05, .embedding = EmbeddingOptim::RowwiseAdagrad, .dense = DenseOptim::Adam, .schedule = {3, 4, 5}};
  Dlrm<float> a(test::tiny_config(), 3);
  Optimizer<float> oa(oo, a);
  ASSERT_EQ(oa.state().size(), 3u + 2u);  // three tables' accumulators, then exp_avg and exp_avg_sq
  ASSERT_EQ(oa.table_state().size(), 3u);
  std::vector<float> dense_at_4, table_at_4;
  std::vector<std::vector<float>> state_at_4;
  for (int k = 1; k <= 10; ++k) {
    set_grads(a, k);
    oa.step();
    if (k == 4) {
      dense_at_4.assign(a.dense().params().begin(), a.dense().params().end());
      table_at_4.assign(a.tables()[0].weights().begin(), a.tables()[0].weights().end());
      state_at_4 = oa.state();
    }
  }
  for (bool restore_steps : {true, false}) {
    Dlrm<float> b(test::tiny_config(), 99);
    std::ranges::copy(dense_at_4, b.dense().params().begin());
    std::ranges::copy(table_at_4, b.tables()[0].weights().begin());
    Optimizer<float> ob(oo, b);
    ob.state() = state_at_4;
    if (restore_steps) ob.set_steps(4);
    for (int k = 5; k <= 10; ++k) {
      set_grads(b, k);
      ob.step();
    }
    const bool same = std::memcmp(a.dense().params().data(), b.dense().params().data(), a.dense().size() * 4) == 0 &&
                      std::memcmp(a.tables()[0].weights().data(), b.tables()[0].weights().data(),
                                  table_at_4.size() * 4) == 0;
    // Without the step count the schedule and Adam's bias correction start over.
    EXPECT_EQ(same, restore_steps);
  }
}

}  // namespace
}  // namespace sparq
