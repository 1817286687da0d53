#pragma once
// Small random sparse rows for the linear-model tests: values in quarters
// (exact in float), labels from a planted linear teacher with 10 % flipped,
// so a model has something to learn.
#include <random>
#include <vector>

#include "sparq/data/sparse_rows.h"

namespace sparq::test {

inline SparseRows random_rows(std::size_t n, std::size_t dim, std::size_t max_nnz, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<float> teacher(dim);
  for (auto& w : teacher) w = static_cast<float>(static_cast<int>(g() % 9) - 4);
  SparseRows r;
  r.num_features = dim;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::uint32_t> idx;
    std::vector<float> val;
    const std::size_t k = 1 + g() % max_nnz;
    double m = 0;
    for (std::uint32_t j = 0; j < dim && idx.size() < k; ++j)
      if (g() % dim < 2 * k) {
        idx.push_back(j);
        val.push_back(static_cast<float>(static_cast<int>(g() % 17) - 8) / 4);
        m += teacher[j] * val.back();
      }
    const bool flip = g() % 10 == 0;
    r.add_row((m > 0) != flip ? 1.0f : -1.0f, idx, val);
  }
  return r;
}

// Rows [begin, end) of r.
inline SparseRows slice_rows(const SparseRows& r, std::size_t begin, std::size_t end) {
  SparseRows s;
  s.num_features = r.num_features;
  for (std::size_t i = begin; i < end; ++i) s.add_row(r.labels[i], r.row_indices(i), r.row_values(i));
  return s;
}

}  // namespace sparq::test
