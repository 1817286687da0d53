#pragma once
// Embedding bags: a table of `rows` vectors of width `dim`; a sample's bag of
// row ids is pooled by summing the rows (multi-hot capable, empty bags give
// zeros). The gradient is sparse: only rows looked up in the batch get one,
// so the backward pass returns the touched rows, coalesced (each row once,
// sorted), and the optimizers update only those rows.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sparq/core/huge_pages.h"
#include "sparq/data/batch.h"

namespace sparq {

// Gradient of one table for one batch: values[i*dim .. (i+1)*dim) belongs to
// row rows[i]; rows ascending and unique.
template <class T>
struct SparseGrad {
  std::size_t dim = 0;
  std::vector<std::uint32_t> rows;
  std::vector<T> values;
};

template <class T>
class EmbeddingBag {
 public:
  // hold = false: a table of that shape without storage (weights() empty),
  // for a rank that never looks it up (table-wise placement: another rank
  // owns it). forward() and backward() need a held table. Its values are
  // zeros, or `drawn` as init() draws them (not zeroed first: the zeroing
  // was 7 % of `sparq plan`'s CPU, docs/data/plan/planning-time-memo).
  struct Drawn {
    std::uint64_t seed = 0, stream = 0;
  };
  EmbeddingBag(std::size_t rows, std::size_t dim, bool hold = true, std::optional<Drawn> drawn = std::nullopt);

  // The reference's initialisation: uniform in +-sqrt(1/rows), from
  // Rng(seed, stream).
  void init(std::uint64_t seed, std::uint64_t stream);

  // bags (B bags) -> out [B x dim] with row stride `ld` (>= dim), so the
  // pooled vectors can land directly in the interaction's input.
  // Throws sparq::Error on an id >= rows (ids are reduced upstream).
  void forward(const SparseBags& bags, std::size_t batch, T* out, std::size_t ld) const {
    forward(bags, batch, 0, batch, out, ld);
  }
  // Bags [first, first + count) of the B -> out [count x dim] (stride ld): a
  // table-wise owner pools each destination's share into its send block.
  void forward(const SparseBags& bags, std::size_t batch, std::size_t first, std::size_t count, T* out,
               std::size_t ld) const;

  // dout [B x dim] (stride ld) -> coalesced gradient of the rows the bags of
  // the last forward() looked up. Accumulation order is fixed (by row, then
  // by position in the batch), so results are bitwise repeatable.
  void backward(const SparseBags& bags, std::size_t batch, const T* dout, std::size_t ld, SparseGrad<T>& grad);
  // The same with bag b's output gradient at rows[b] (B of them): a
  // table-wise owner reads them where the alltoall put them.
  void backward(const SparseBags& bags, std::size_t batch, std::span<const T* const> rows, SparseGrad<T>& grad);

  std::size_t rows() const { return rows_; }
  std::size_t dim() const { return dim_; }
  bool held() const { return w_ != nullptr; }
  std::span<T> weights() { return {w_.get(), held() ? rows_ * dim_ : 0}; }
  std::span<const T> weights() const { return {w_.get(), held() ? rows_ * dim_ : 0}; }
  std::span<T> row(std::size_t r) { return {w_.get() + r * dim_, dim_}; }

  // Row lookups are random, so nearly every one misses the caches: forward
  // and the optimizers' row updates prefetch the row this many lookups ahead,
  // keeping that many misses in flight. prefetch() ignores a bad id.
  static constexpr std::size_t kPrefetchAhead = 8;
  void prefetch(std::uint32_t r) const {
    if (r < rows_) __builtin_prefetch(w_.get() + static_cast<std::size_t>(r) * dim_);
  }

 private:
  // backward()'s work, with bag b's output gradient at row(b).
  template <class Row>
  void coalesce(const SparseBags& bags, std::size_t batch, Row row, SparseGrad<T>& grad);

  std::size_t rows_, dim_;
  // [rows x dim], on huge pages from 2 MiB on (huge_pages.h): lookups hit
  // random rows (26 tables x 100000 rows x 64 B = 166 MB).
  RandomAccessArray<T> w_;
  std::vector<std::uint64_t> keys_, sort_tmp_;  // scratch for coalescing: (row << 32) | position
  std::vector<std::uint32_t> owner_;  // scratch: sample of each index position
};

}  // namespace sparq
