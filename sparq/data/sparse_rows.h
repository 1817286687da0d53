#pragma once
// Labelled sparse rows (compressed sparse rows): the samples of a linear
// model on naturally sparse data (libsvm files, `gen-data --format libsvm`).
// Row i has the features indices[offsets[i] .. offsets[i+1]), 0-based,
// strictly increasing, each with its value; its label is -1 or +1.
// Memory: 8 bytes per non-zero (index + value) + 12 bytes per row.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparq {

struct SparseRows {
  std::vector<float> labels;                // -1 or +1, one per row
  std::vector<std::uint64_t> offsets{0};    // rows + 1 entries, offsets[0] = 0
  std::vector<std::uint32_t> indices;       // 0-based feature indices
  std::vector<float> values;                // one per index
  std::size_t num_features = 0;             // every index is below this

  std::size_t rows() const { return labels.size(); }
  std::size_t nnz() const { return indices.size(); }
  std::span<const std::uint32_t> row_indices(std::size_t i) const {
    return std::span(indices).subspan(offsets[i], offsets[i + 1] - offsets[i]);
  }
  std::span<const float> row_values(std::size_t i) const {
    return std::span(values).subspan(offsets[i], offsets[i + 1] - offsets[i]);
  }
  // Appends a row (indices already 0-based, sorted and unique; the caller checked).
  void add_row(float label, std::span<const std::uint32_t> idx, std::span<const float> val) {
    labels.push_back(label);
    indices.insert(indices.end(), idx.begin(), idx.end());
    values.insert(values.end(), val.begin(), val.end());
    offsets.push_back(indices.size());
  }
};

}  // namespace sparq
