#pragma once
// Shared by the training tests: a small DLRM, deterministic batches, and all
// of a model's parameters as one vector.
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "sparq/data/batch.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/loss.h"
#include "sparq/model/optimizer.h"

namespace sparq::test {

inline DlrmConfig small_config() {
  DlrmConfig c;
  c.bot_mlp = {5, 16, 8};
  c.top_mlp = {16, 1};
  c.emb_dim = 8;
  c.table_rows = {50, 7, 200};
  return c;
}

// Samples [first, first + n) of global batch `step`: each sample a pure
// function of (step, position), so a slice equals the batch's share.
inline Batch make_batch(const DlrmConfig& c, std::uint64_t step, std::size_t first, std::size_t n) {
  Batch b;
  b.reset_one_hot(n, c.num_dense(), c.num_tables());
  for (std::size_t i = 0; i < n; ++i) {
    std::mt19937_64 g(step * 100003 + first + i);
    std::uniform_real_distribution<float> u(0, 1);
    for (std::size_t d = 0; d < c.num_dense(); ++d) b.dense[i * c.num_dense() + d] = u(g);
    for (std::size_t t = 0; t < c.num_tables(); ++t)
      b.sparse[t].indices[i] = static_cast<std::uint32_t>(g() % c.table_rows[t]);
    b.labels[i] = u(g) < 0.3f ? 1.0f : 0.0f;
  }
  return b;
}

inline std::vector<float> all_params(Dlrm<float>& m) {
  std::vector<float> v(m.dense().params().begin(), m.dense().params().end());
  for (auto& t : m.tables()) v.insert(v.end(), t.weights().begin(), t.weights().end());
  return v;
}

// One rank training the whole model for `steps` SGD steps on batch_of(k):
// the reference every parallel plan must equal.
template <class BatchOf>
std::unique_ptr<Dlrm<float>> train_single(const DlrmConfig& cfg, std::uint64_t seed, std::size_t steps,
                                          BatchOf batch_of, double lr = 0.1) {
  auto model = std::make_unique<Dlrm<float>>(cfg, seed);
  Optimizer<float> opt({.lr = lr}, *model);
  std::vector<float> dl;
  for (std::size_t k = 0; k < steps; ++k) {
    const Batch b = batch_of(k);
    const auto z = model->forward(b);
    dl.resize(b.size);
    bce_with_logits<float>(z, b.labels, dl);
    model->backward(dl);
    opt.step();
  }
  return model;
}

// Largest absolute difference of two parameter vectors of the same size.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0 : INFINITY;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}

}  // namespace sparq::test
