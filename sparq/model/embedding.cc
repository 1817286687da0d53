#include "sparq/model/embedding.h"

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/core/memo.h"
#include "sparq/core/rng.h"

namespace sparq {

template <class T>
EmbeddingBag<T>::EmbeddingBag(std::size_t rows, std::size_t dim, bool hold, std::optional<Drawn> drawn)
    : rows_(rows), dim_(dim) {
  SPARQ_CHECK(rows > 0 && rows <= (std::size_t{1} << 32), "embedding rows {} out of range (1 .. 2^32)", rows);
  SPARQ_CHECK(dim > 0, "embedding dim must be positive");
  if (!hold) return;
  w_ = make_random_access<T>(rows * dim);
  if (drawn) {
    init(drawn->seed, drawn->stream);
  } else {
    T* p = w_.get();
    std::fill(p, p + rows * dim, T(0));
  }
}

template <class T>
void EmbeddingBag<T>::init(std::uint64_t seed, std::uint64_t stream) {
  memo_fill<T>(fmt::format("embedding {} {} {} {}", seed, stream, rows_, dim_), weights(), [&](std::span<T> w) {
    Rng rng(seed, stream);
    const double a = std::sqrt(1.0 / static_cast<double>(rows_));
    for (auto& v : w) v = static_cast<T>(rng.uniform(-a, a));
  });
}

// out[b - first, :] = sum_{k in bag b} W[k, :]   for b in [first, first + count), out stride ld
template <class T>
void EmbeddingBag<T>::forward(const SparseBags& bags, std::size_t batch, std::size_t first, std::size_t count,
                              T* out, std::size_t ld) const {
  SPARQ_CHECK(held(), "lookup in an embedding table this rank does not hold");
  SPARQ_CHECK(bags.offsets.size() == batch + 1, "bag offsets {} for batch {}", bags.offsets.size(), batch);
  SPARQ_CHECK(first <= batch && count <= batch - first, "bags [{}, {}) of {}", first, first + count, batch);
  const std::size_t d = dim_, end = first + count;
  const std::uint32_t nnz = bags.offsets[batch];
  const ChargedKernel charged("emb_gather_per_value", Units{(bags.offsets[end] - bags.offsets[first]) * d}, d,
                              sizeof(T));
  for (std::size_t b = first; b < end; ++b) {
    if (b + kPrefetchAhead < end && bags.offsets[b + kPrefetchAhead] < nnz)
      prefetch(bags.indices[bags.offsets[b + kPrefetchAhead]]);
    T* o = out + (b - first) * ld;
    const std::uint32_t lo = bags.offsets[b], hi = bags.offsets[b + 1];
    if (hi - lo == 1) {  // one-hot: a copy
      const std::uint32_t k = bags.indices[lo];
      SPARQ_CHECK(k < rows_, "embedding id {} >= rows {}", k, rows_);
      const T* w = w_.get() + static_cast<std::size_t>(k) * d;
      for (std::size_t j = 0; j < d; ++j) o[j] = w[j];
      continue;
    }
    std::fill(o, o + d, T(0));
    for (std::uint32_t i = lo; i < hi; ++i) {
      const std::uint32_t k = bags.indices[i];
      SPARQ_CHECK(k < rows_, "embedding id {} >= rows {}", k, rows_);
      const T* w = w_.get() + static_cast<std::size_t>(k) * d;
      for (std::size_t j = 0; j < d; ++j) o[j] += w[j];
    }
  }
}

namespace {

// Sorts keys (row << 32 | position, positions ascending on entry) by row,
// keeping positions ascending within a row: the order std::sort gives, by a
// stable LSD radix sort over the row bits in use (a batch touches ~1000 rows
// of a table, where a comparison sort's log factor is most of the work).
void sort_by_row(std::vector<std::uint64_t>& keys, std::vector<std::uint64_t>& tmp) {
  std::uint64_t max_row = 0;
  for (std::uint64_t k : keys) max_row = std::max(max_row, k >> 32);
  constexpr int kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  tmp.resize(keys.size());
  for (int shift = 32; shift < 64 && (max_row >> (shift - 32)) != 0; shift += kBits) {
    std::size_t count[kBuckets + 1] = {};
    for (std::uint64_t k : keys) ++count[((k >> shift) & (kBuckets - 1)) + 1];
    for (std::size_t b = 1; b <= kBuckets; ++b) count[b] += count[b - 1];
    for (std::uint64_t k : keys) tmp[count[(k >> shift) & (kBuckets - 1)]++] = k;
    keys.swap(tmp);
  }
}

}  // namespace

// dW[k, :] = sum_{(b, i): indices[i] = k, i in bag b} dout[b, :]   -> SparseGrad
template <class T>
void EmbeddingBag<T>::backward(const SparseBags& bags, std::size_t batch, const T* dout, std::size_t ld,
                               SparseGrad<T>& grad) {
  coalesce(bags, batch, [dout, ld](std::uint32_t b) { return dout + b * ld; }, grad);
}

template <class T>
void EmbeddingBag<T>::backward(const SparseBags& bags, std::size_t batch, std::span<const T* const> rows,
                               SparseGrad<T>& grad) {
  SPARQ_CHECK(rows.size() == batch, "{} gradient rows for {} bags", rows.size(), batch);
  coalesce(bags, batch, [rows](std::uint32_t b) { return rows[b]; }, grad);
}

template <class T>
template <class Row>
void EmbeddingBag<T>::coalesce(const SparseBags& bags, std::size_t batch, Row row, SparseGrad<T>& grad) {
  SPARQ_CHECK(bags.offsets.size() == batch + 1, "bag offsets {} for batch {}", bags.offsets.size(), batch);
  const std::size_t nnz = bags.offsets[batch];
  const ChargedKernel charged("emb_coalesce_per_value", Units{nnz * dim_}, dim_, sizeof(T));
  owner_.resize(nnz);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::uint32_t i = bags.offsets[b]; i < bags.offsets[b + 1]; ++i) owner_[i] = static_cast<std::uint32_t>(b);
  keys_.resize(nnz);
  for (std::size_t i = 0; i < nnz; ++i) keys_[i] = (std::uint64_t{bags.indices[i]} << 32) | i;
  sort_by_row(keys_, sort_tmp_);
  const std::size_t d = dim_;
  grad.dim = d;
  grad.rows.clear();
  // Each row's first gradient is appended as it is, the others added to it:
  // resizing to the bound (every row distinct) would zero what was trimmed
  // the step before, a pass as long as the copies.
  grad.values.clear();
  grad.values.reserve(nnz * d);
  for (std::size_t i = 0; i < nnz;) {
    const std::uint32_t k = static_cast<std::uint32_t>(keys_[i] >> 32);
    grad.rows.push_back(k);
    const T* s = row(owner_[keys_[i] & 0xffffffffu]);
    grad.values.insert(grad.values.end(), s, s + d);
    T* g = grad.values.data() + grad.values.size() - d;
    for (++i; i < nnz && static_cast<std::uint32_t>(keys_[i] >> 32) == k; ++i) {
      s = row(owner_[keys_[i] & 0xffffffffu]);
      for (std::size_t j = 0; j < d; ++j) g[j] += s[j];
    }
  }
}

template class EmbeddingBag<float>;
template class EmbeddingBag<double>;

}  // namespace sparq
