#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "sparq/core/error.h"
#include "sparq/model/embedding.h"
#include "sparq/model/optimizer.h"

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
}

}  // namespace
}  // namespace sparq
