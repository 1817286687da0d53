#include "sparq/model/linear.h"

#include <bit>
#include <cmath>
#include <numeric>

#include "sparq/core/error.h"
#include "sparq/model/parallel.h"

namespace sparq {

LinearLoss parse_linear_loss(std::string_view s) {
  if (s == "logistic") return LinearLoss::Logistic;
  if (s == "hinge") return LinearLoss::Hinge;
  SPARQ_THROW(InputError, "--loss must be logistic or hinge, got '{}'", s);
}

std::string_view linear_loss_name(LinearLoss l) { return l == LinearLoss::Logistic ? "logistic" : "hinge"; }

double linear_loss(LinearLoss l, float y, float z) {
  const double yz = static_cast<double>(y) * z;
  if (l == LinearLoss::Hinge) return yz < 1 ? 1 - yz : 0;
  // log(1 + exp(-yz)) without overflow for large |yz|.
  return yz > 0 ? std::log1p(std::exp(-yz)) : -yz + std::log1p(std::exp(yz));
}

float linear_dloss(LinearLoss l, float y, float z) {
  const float yz = y * z;
  if (l == LinearLoss::Hinge) return yz < 1 ? -y : 0.0f;
  // -y sigmoid(-yz), computed on the side where exp cannot overflow.
  const float s = yz > 0 ? std::exp(-yz) / (1 + std::exp(-yz)) : 1 / (1 + std::exp(yz));
  return -y * s;
}

float LinearModel::margin(std::span<const std::uint32_t> idx, std::span<const float> val) const {
  // Four partial sums: one chain of dependent adds would wait on the add's
  // latency at every non-zero. The order is fixed, so the result is too.
  float s[4] = {0, 0, 0, 0};
  std::size_t k = 0;
  for (; k + 4 <= idx.size(); k += 4)
    for (int u = 0; u < 4; ++u) s[u] += v_[idx[k + u]] * val[k + u];
  for (; k < idx.size(); ++k) s[0] += v_[idx[k]] * val[k];
  return static_cast<float>(((s[0] + s[1]) + (s[2] + s[3])) * scale_);
}

void LinearModel::decay(double factor) {
  SPARQ_CHECK(factor > 0, "decay factor {}", factor);
  scale_ *= factor;
  if (scale_ > 1e-20) return;
  // Fold the scale in before v's updates (delta / scale) lose their range.
  for (float& x : v_) x = static_cast<float>(x * scale_);
  scale_ = 1;
}

double LinearModel::squared_norm() const {
  double s = 0;
  for (float x : v_) s += static_cast<double>(x) * x;
  return s * scale_ * scale_;
}

std::vector<float> LinearModel::weights() const {
  std::vector<float> w(v_.size());
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = static_cast<float>(scale_ * v_[j]);
  return w;
}

void LinearModel::set_weights(std::span<const float> w) {
  v_.assign(w.begin(), w.end());
  scale_ = 1;
}

void linear_margins(const LinearModel& m, const SparseRows& rows, std::span<const std::size_t> order,
                    std::span<float> out) {
  SPARQ_CHECK(order.size() == out.size(), "{} rows, {} margins", order.size(), out.size());
  parallel_for(out.size(), 64, [&](std::size_t b, std::size_t e) {
    for (std::size_t k = b; k < e; ++k) out[k] = m.margin(rows.row_indices(order[k]), rows.row_values(order[k]));
  });
}

std::vector<float> linear_margins(const LinearModel& m, const SparseRows& rows) {
  std::vector<std::size_t> all(rows.rows());
  std::iota(all.begin(), all.end(), std::size_t{0});
  std::vector<float> z(rows.rows());
  linear_margins(m, rows, all, z);
  return z;
}

SparseGradient::SparseGradient(std::size_t dim) : acc_(dim, 0.0f), bits_((dim + 63) / 64, 0) {}

void SparseGradient::add_row(std::span<const std::uint32_t> idx, std::span<const float> val, float coeff) {
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const std::uint32_t j = idx[k];
    bits_[j >> 6] |= std::uint64_t{1} << (j & 63);
    acc_[j] += coeff * val[k];
  }
  added_ += idx.size();
}

void SparseGradient::add_row_squares(std::span<const std::uint32_t> idx, std::span<const float> val, float coeff) {
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const std::uint32_t j = idx[k];
    bits_[j >> 6] |= std::uint64_t{1} << (j & 63);
    acc_[j] += coeff * val[k] * val[k];
  }
  added_ += idx.size();
}

std::size_t SparseGradient::drain(std::span<std::uint32_t> indices, std::span<float> values) {
  SPARQ_CHECK(indices.size() >= capacity() && values.size() >= capacity(), "room for {} of {} pairs",
              std::min(indices.size(), values.size()), capacity());
  std::size_t n = 0;
  for (std::size_t w = 0; w < bits_.size(); ++w) {
    for (std::uint64_t word = bits_[w]; word != 0; word &= word - 1) {
      const std::size_t j = w * 64 + static_cast<std::size_t>(std::countr_zero(word));
      indices[n] = static_cast<std::uint32_t>(j);
      values[n++] = acc_[j];
      acc_[j] = 0;
    }
    bits_[w] = 0;
  }
  added_ = 0;
  return n;
}

}  // namespace sparq
