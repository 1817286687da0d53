#pragma once
// A mini-batch as the model consumes it: dense features already transformed,
// one CSR bag of row ids per embedding table (ids already reduced to the
// table's size), labels in {0, 1}.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparq {

// The lookups of one table for a batch, in CSR form: the bag of sample b is
// indices[offsets[b] .. offsets[b+1]). Criteo is one-hot (one index per bag);
// multi-hot and empty bags are allowed.
struct SparseBags {
  std::vector<std::uint32_t> offsets;  // [B + 1], offsets[0] = 0
  std::vector<std::uint32_t> indices;  // [offsets[B]]
};

struct Batch {
  std::size_t size = 0;                // B
  std::size_t num_dense = 0;           // features per sample
  std::vector<float> dense;            // [B x num_dense], row-major
  std::vector<float> labels;           // [B]
  std::vector<SparseBags> sparse;      // one per table

  // Resize to B samples with one index per bag (the common one-hot case).
  void reset_one_hot(std::size_t b, std::size_t nd, std::size_t ntables) {
    size = b;
    num_dense = nd;
    dense.resize(b * nd);
    labels.resize(b);
    sparse.resize(ntables);
    for (auto& s : sparse) {
      s.offsets.resize(b + 1);
      for (std::size_t i = 0; i <= b; ++i) s.offsets[i] = static_cast<std::uint32_t>(i);
      s.indices.resize(b);
    }
  }
};

// The part of a global batch a rank reads: every field of samples [lo, hi)
// (its share) and, of every sample, the ids of the tables flagged in
// `tables` (the ones it pools for all ranks).
struct BatchPart {
  std::size_t lo = 0, hi = 0;
  std::vector<bool> tables;
};

// out <- samples [first, first + n) of b (a data-parallel rank's share).
inline void slice_batch(const Batch& b, std::size_t first, std::size_t n, Batch& out) {
  out.size = n;
  out.num_dense = b.num_dense;
  out.dense.assign(b.dense.begin() + static_cast<std::ptrdiff_t>(first * b.num_dense),
                   b.dense.begin() + static_cast<std::ptrdiff_t>((first + n) * b.num_dense));
  out.labels.assign(b.labels.begin() + static_cast<std::ptrdiff_t>(first),
                    b.labels.begin() + static_cast<std::ptrdiff_t>(first + n));
  out.sparse.resize(b.sparse.size());
  for (std::size_t t = 0; t < b.sparse.size(); ++t) {
    const SparseBags& in = b.sparse[t];
    SparseBags& o = out.sparse[t];
    const std::uint32_t lo = in.offsets[first], hi = in.offsets[first + n];
    o.offsets.resize(n + 1);
    for (std::size_t i = 0; i <= n; ++i) o.offsets[i] = in.offsets[first + i] - lo;
    o.indices.assign(in.indices.begin() + lo, in.indices.begin() + hi);
  }
}

}  // namespace sparq
