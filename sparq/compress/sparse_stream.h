#pragma once
// Sparse streams (SparCML, Renggli et al., SC'19, sec. 5.1): a float vector of
// dimension N held either as sorted unique (index, value) pairs or densely,
// whichever is smaller on the wire. Sums pick the representation of their
// result:
//   sparse + sparse  merge, unless |H1| + |H2| > delta: then dense result
//                    (the paper's cheap upper bound on |H1 u H2|);
//   sparse + dense   scatter-add into the dense one;
//   dense  + dense   element-wise (vectorized) add, in place for add_into.
// delta = sparse_capacity(N, vf) (stream_size.h): the most pairs whose
// encoding, in the value format vf the sum's result is sent in and with the
// index run the encoder writes, is no larger than the dense encoding;
// floor(N * v / (1 + v)) for v value bytes. The decision looks at the two
// counts only, which both partners of an exchange hold alike.
//
// Values that cancel to zero in a merge stay as explicit entries (as in the
// paper): deciding sparsity by value would make the result's size data-
// dependent in a way no sender can bound. A dense stream never goes back to
// sparse on its own. Limits: N < 2^32.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/compress/stream_size.h"

namespace sparq::compress {

class SparseStream {
 public:
  // The all-zero sparse stream of dimension dim.
  explicit SparseStream(std::size_t dim = 0);
  // Copies carry the live entries only, not spare start_pairs capacity (a
  // DCT-DP output keeps room for every value of its tensor).
  SparseStream(const SparseStream& o);
  SparseStream& operator=(const SparseStream& o);
  SparseStream(SparseStream&&) noexcept = default;
  SparseStream& operator=(SparseStream&&) noexcept = default;

  // Sparse stream from pairs; throws InputError unless indices are strictly
  // increasing and < dim, sizes match, and dim < 2^32. Does not switch to dense.
  static SparseStream sparse(std::size_t dim, std::vector<std::uint32_t> indices, std::vector<float> values);
  // Dense stream holding `values` (dimension values.size()).
  static SparseStream dense(std::vector<float> values);

  std::size_t dim() const { return dim_; }
  bool is_dense() const { return dense_; }
  // Stored entries: pairs if sparse, dim if dense.
  std::size_t nnz() const { return count_; }
  // Sparse only: the sorted indices (empty for a dense stream).
  std::span<const std::uint32_t> indices() const { return std::span(indices_).first(dense_ ? 0 : count_); }
  // Sparse: the pair values; dense: all dim values.
  std::span<const float> values() const { return std::span(values_).first(count_); }
  // The same values, writable in place (a sender rounding to its wire precision).
  std::span<float> mutable_values() { return std::span(values_).first(count_); }

  // For selectors that produce pairs in index order without a copy: makes
  // this an empty sparse stream of dimension dim whose buffers hold at least
  // `capacity` pairs (kept across calls, so a per-step producer allocates
  // once), and returns them. The producer writes pairs [0, count) and calls
  // finish_pairs(count). These pairs are trusted, not re-validated: only
  // library code that is tested to emit sorted in-range indices uses this.
  struct PairBuffers {
    std::span<std::uint32_t> indices;
    std::span<float> values;
  };
  PairBuffers start_pairs(std::size_t dim, std::size_t capacity);
  void finish_pairs(std::size_t count);

  // Replaces the content by sparse pairs (validated as in sparse()), reusing
  // this stream's memory.
  void assign_sparse(std::size_t dim, std::span<const std::uint32_t> indices, std::span<const float> values);
  // Switches to the dense representation (no-op if dense).
  void make_dense();
  // Writes all dim values (zeros where no pair) into out (size dim), each
  // times `scale`: an average over ranks costs no pass of its own.
  void to_dense(std::span<float> out, float scale = 1.0f) const;

 private:
  friend void add_into(SparseStream& acc, const SparseStream& b, ValueFormat vf);
  friend SparseStream sum(const SparseStream& a, const SparseStream& b, ValueFormat vf);
  friend SparseStream decode_stream(std::span<const std::byte> in);
  std::size_t dim_ = 0;
  bool dense_ = false;
  std::size_t count_ = 0;  // live entries; the vectors may be longer (start_pairs capacity)
  std::vector<std::uint32_t> indices_;
  std::vector<float> values_;
};

// a + b (same dim, else InputError), representation chosen as above for
// values sent as vf.
SparseStream sum(const SparseStream& a, const SparseStream& b, ValueFormat vf = ValueFormat::F32);
// acc += b; a dense acc is updated in place without allocating.
void add_into(SparseStream& acc, const SparseStream& b, ValueFormat vf = ValueFormat::F32);

}  // namespace sparq::compress
