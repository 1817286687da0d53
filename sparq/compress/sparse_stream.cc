#include "sparq/compress/sparse_stream.h"

#include <algorithm>
#include <limits>

#include "sparq/core/error.h"

namespace sparq::compress {

namespace {

constexpr std::size_t kMaxDim = std::numeric_limits<std::uint32_t>::max();

void check_pairs(std::size_t dim, std::span<const std::uint32_t> idx, std::span<const float> val) {
  SPARQ_CHECK_AS(InputError, dim <= kMaxDim, "sparse stream: dimension {} exceeds 2^32 - 1", dim);
  SPARQ_CHECK_AS(InputError, idx.size() == val.size(), "sparse stream: {} indices but {} values", idx.size(),
                 val.size());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    SPARQ_CHECK_AS(InputError, idx[i] < dim, "sparse stream: index {} at {} out of range [0, {})", idx[i], i, dim);
    SPARQ_CHECK_AS(InputError, i == 0 || idx[i - 1] < idx[i], "sparse stream: index {} at {} not above {}", idx[i],
                   i, idx[i - 1]);
  }
}

void check_same_dim(const SparseStream& a, const SparseStream& b) {
  SPARQ_CHECK_AS(InputError, a.dim() == b.dim(), "sparse stream sum: dimensions {} and {} differ", a.dim(), b.dim());
}

void scatter_add(float* dense, std::span<const std::uint32_t> idx, std::span<const float> val) {
  for (std::size_t i = 0; i < idx.size(); ++i) dense[idx[i]] += val[i];
}

}  // namespace

SparseStream::SparseStream(std::size_t dim) : dim_(dim) {
  SPARQ_CHECK_AS(InputError, dim <= kMaxDim, "sparse stream: dimension {} exceeds 2^32 - 1", dim);
}

SparseStream::SparseStream(const SparseStream& o)
    : dim_(o.dim_),
      dense_(o.dense_),
      count_(o.count_),
      indices_(o.indices().begin(), o.indices().end()),
      values_(o.values().begin(), o.values().end()) {}

SparseStream& SparseStream::operator=(const SparseStream& o) {
  if (this != &o) {
    dim_ = o.dim_;
    dense_ = o.dense_;
    count_ = o.count_;
    indices_.assign(o.indices().begin(), o.indices().end());
    values_.assign(o.values().begin(), o.values().end());
  }
  return *this;
}

SparseStream SparseStream::sparse(std::size_t dim, std::vector<std::uint32_t> indices, std::vector<float> values) {
  check_pairs(dim, indices, values);
  SparseStream s(dim);
  s.count_ = indices.size();
  s.indices_ = std::move(indices);
  s.values_ = std::move(values);
  return s;
}

SparseStream SparseStream::dense(std::vector<float> values) {
  SparseStream s(values.size());
  s.dense_ = true;
  s.count_ = values.size();
  s.values_ = std::move(values);
  return s;
}

void SparseStream::assign_sparse(std::size_t dim, std::span<const std::uint32_t> indices,
                                 std::span<const float> values) {
  check_pairs(dim, indices, values);
  dim_ = dim;
  dense_ = false;
  count_ = indices.size();
  indices_.assign(indices.begin(), indices.end());
  values_.assign(values.begin(), values.end());
}

SparseStream::PairBuffers SparseStream::start_pairs(std::size_t dim, std::size_t capacity) {
  SPARQ_CHECK_AS(InputError, dim <= kMaxDim, "sparse stream: dimension {} exceeds 2^32 - 1", dim);
  dim_ = dim;
  dense_ = false;
  count_ = 0;
  if (indices_.size() < capacity) indices_.resize(capacity);
  if (values_.size() < capacity) values_.resize(capacity);
  return {indices_, values_};
}

void SparseStream::finish_pairs(std::size_t count) {
  SPARQ_CHECK(!dense_ && count <= indices_.size() && count <= values_.size() && count <= dim_,
              "finish_pairs({}) beyond the started buffers", count);
  count_ = count;
}

void SparseStream::make_dense() {
  if (dense_) return;
  std::vector<float> d(dim_, 0.0f);
  scatter_add(d.data(), indices(), values());
  values_ = std::move(d);
  indices_.clear();
  dense_ = true;
  count_ = dim_;
}

void SparseStream::to_dense(std::span<float> out, float scale) const {
  SPARQ_CHECK_AS(InputError, out.size() == dim_, "sparse stream: output size {} != dimension {}", out.size(), dim_);
  if (dense_) {
    for (std::size_t i = 0; i < dim_; ++i) out[i] = values_[i] * scale;
    return;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (std::size_t i = 0; i < count_; ++i) out[indices_[i]] = values_[i] * scale;
}

SparseStream sum(const SparseStream& a, const SparseStream& b, ValueFormat vf) {
  check_same_dim(a, b);
  if (a.dense_ || b.dense_) {
    // Copy a dense operand, then add the other into it.
    SparseStream r = a.dense_ ? a : b;
    add_into(r, a.dense_ ? b : a, vf);
    return r;
  }
  SparseStream r(a.dim_);
  const std::size_t na = a.nnz(), nb = b.nnz();
  if (na + nb > sparse_capacity(a.dim_, vf)) {
    // Fill-in may exceed delta: the upper bound decides, before any merging.
    r.dense_ = true;
    r.count_ = a.dim_;
    r.values_.assign(a.dim_, 0.0f);
    scatter_add(r.values_.data(), a.indices(), a.values());
    scatter_add(r.values_.data(), b.indices(), b.values());
    return r;
  }
  r.indices_.resize(na + nb);
  r.values_.resize(na + nb);
  const std::uint32_t *ia = a.indices_.data(), *ib = b.indices_.data();
  const float *va = a.values_.data(), *vb = b.values_.data();
  std::uint32_t* io = r.indices_.data();
  float* vo = r.values_.data();
  std::size_t i = 0, j = 0, k = 0;
  while (i < na && j < nb) {
    if (ia[i] < ib[j]) {
      io[k] = ia[i], vo[k++] = va[i++];
    } else if (ib[j] < ia[i]) {
      io[k] = ib[j], vo[k++] = vb[j++];
    } else {
      io[k] = ia[i], vo[k++] = va[i++] + vb[j++];
    }
  }
  for (; i < na; ++i) io[k] = ia[i], vo[k++] = va[i];
  for (; j < nb; ++j) io[k] = ib[j], vo[k++] = vb[j];
  r.count_ = k;
  return r;
}

void add_into(SparseStream& acc, const SparseStream& b, ValueFormat vf) {
  check_same_dim(acc, b);
  if (!acc.dense_ && !b.dense_) {
    acc = sum(acc, b, vf);
    return;
  }
  acc.make_dense();
  float* d = acc.values_.data();
  if (b.dense_) {
    const float* s = b.values_.data();
    for (std::size_t i = 0; i < acc.dim_; ++i) d[i] += s[i];
  } else {
    scatter_add(d, b.indices(), b.values());
  }
}

}  // namespace sparq::compress
