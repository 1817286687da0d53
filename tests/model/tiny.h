#pragma once
// A tiny DLRM and a hand-built batch for the model tests: multi-hot bags, an
// empty bag and a repeated id, so every path of the embedding code is hit.
#include <cmath>
#include <vector>

#include "sparq/data/batch.h"
#include "sparq/core/rng.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/loss.h"
#include "sparq/model/optimizer.h"

namespace sparq::test {

inline DlrmConfig tiny_config() {
  DlrmConfig c;
  c.bot_mlp = {4, 8, 3};
  c.top_mlp = {8, 6, 1};
  c.table_rows = {7, 5, 11};
  c.emb_dim = 3;
  return c;
}

// Random init of so small a model often leaves whole ReLU layers dead for a
// 5-sample batch (then a gradient check checks zeros). Larger embeddings and
// positive biases keep every path alive.
template <class T>
void liven(Dlrm<T>& m) {
  for (auto& t : m.tables())
    for (auto& w : t.weights()) w *= T(5);
  for (const auto& v : m.dense().views())
    if (v.name.ends_with(".bias"))
      for (auto& b : m.dense().param(m.dense().find(v.name))) b = T(0.2) + std::abs(b);
}

inline Batch tiny_batch(std::uint64_t seed = 7) {
  Rng rng(seed);
  Batch b;
  b.size = 5;
  b.num_dense = 4;
  for (std::size_t i = 0; i < b.size * b.num_dense; ++i) b.dense.push_back(static_cast<float>(rng.uniform(0, 2)));
  b.labels = {1, 0, 0, 1, 0};
  const std::size_t rows[3] = {7, 5, 11};
  for (std::size_t t = 0; t < 3; ++t) {
    SparseBags s;
    s.offsets.push_back(0);
    for (std::size_t i = 0; i < b.size; ++i) {
      // table 0 one-hot; table 1 bags of 0..2 ids (sample 1 empty); table 2 with a repeat
      std::size_t n = t == 0 ? 1 : (t == 1 ? i % 3 : 2);
      for (std::size_t k = 0; k < n; ++k) s.indices.push_back(static_cast<std::uint32_t>(rng.below(rows[t])));
      if (t == 2 && i == 3) s.indices.back() = s.indices[s.indices.size() - 2];
      s.offsets.push_back(static_cast<std::uint32_t>(s.indices.size()));
    }
    b.sparse.push_back(s);
  }
  return b;
}

// `steps` SGD steps of `opt` on the tiny batches first, first + 1, ...
inline void train(Dlrm<float>& m, Optimizer<float>& opt, int steps, int first) {
  for (int s = first; s < first + steps; ++s) {
    const Batch b = tiny_batch(static_cast<std::uint64_t>(s));
    const auto z = m.forward(b);
    std::vector<float> dz(b.size);
    bce_with_logits<float>(z, b.labels, dz);
    m.backward(dz);
    opt.step();
  }
}

}  // namespace sparq::test
