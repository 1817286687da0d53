#pragma once
// Linear classifiers on sparse rows (SparCML's MPI-OPT workload): logistic
// regression and a linear SVM (hinge loss), with an L2 penalty, trained by
// mini-batch SGD or stochastic coordinate descent (sparq/train/linear_*.h).
// Knows nothing of communication: the trainer sums the sparse gradients.
//
// The L2 step multiplies every weight by (1 - lr l2) each step; doing that on
// 3-17 million weights per mini-batch of ~100k non-zeros would cost more than
// the batch. The model keeps w = scale * v instead (Bottou's trick), so the
// decay is one multiplication and an update touches only the batch's
// features. `scale` is folded back into v before it underflows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sparq/data/sparse_rows.h"

namespace sparq {

enum class LinearLoss { Logistic, Hinge };
LinearLoss parse_linear_loss(std::string_view s);  // "logistic" | "hinge", else InputError
std::string_view linear_loss_name(LinearLoss l);

// The loss of a sample with label y (+-1) at margin z = w.x, and dloss/dz.
//   logistic: log(1 + exp(-y z)),  dz = -y sigmoid(-y z)
//   hinge:    max(0, 1 - y z),      dz = -y where y z < 1, else 0
double linear_loss(LinearLoss l, float y, float z);
float linear_dloss(LinearLoss l, float y, float z);

class LinearModel {
 public:
  explicit LinearModel(std::size_t dim = 0) : v_(dim, 0.0f) {}
  std::size_t dim() const { return v_.size(); }

  // w . x over a row's features (indices below dim, as the reader checked).
  float margin(std::span<const std::uint32_t> idx, std::span<const float> val) const;
  float weight(std::size_t j) const { return static_cast<float>(scale_ * v_[j]); }
  // w *= factor (factor > 0): the L2 step, O(1).
  void decay(double factor);
  // w_j += delta.
  void add(std::size_t j, double delta) { v_[j] += static_cast<float>(delta / scale_); }

  // |w|^2, summed in double.
  double squared_norm() const;
  // The weights with the scale applied (a copy: dim floats).
  std::vector<float> weights() const;
  void set_weights(std::span<const float> w);

 private:
  std::vector<float> v_;
  double scale_ = 1;
};

// Margins of rows [begin, begin + out.size()) of `rows`, split over the
// compute threads (sparq/model/parallel.h); each margin is summed in feature
// order, so the result does not depend on the thread count.
void linear_margins(const LinearModel& m, const SparseRows& rows, std::span<const std::size_t> order,
                    std::span<float> out);
// Every row's margin, in row order.
std::vector<float> linear_margins(const LinearModel& m, const SparseRows& rows);

// The loss gradient of a mini-batch, sum_i coeff_i x_i, as sorted (index,
// value) pairs. Accumulates into a dense scratch of the model's dimension
// and a bitmap of the touched features, so producing the sorted pairs costs
// one pass over the bitmap (dim/64 words) instead of a sort: 0.4 MB for URL's
// 3.2M features, 2 MB for Webspam's 16.6M. Rows are added in the order
// given, one thread: the sums do not depend on the thread count.
class SparseGradient {
 public:
  explicit SparseGradient(std::size_t dim);
  std::size_t dim() const { return acc_.size(); }
  void add_row(std::span<const std::uint32_t> idx, std::span<const float> val, float coeff);
  // coeff x_i^2, element-wise: a row's share of a Hessian's diagonal.
  void add_row_squares(std::span<const std::uint32_t> idx, std::span<const float> val, float coeff);
  // Writes the touched features' sums in index order (each at most once)
  // and clears the scratch for the next batch; returns how many were written.
  // `indices` and `values` must hold at least capacity() entries.
  std::size_t drain(std::span<std::uint32_t> indices, std::span<float> values);
  // A bound on the features touched since the last drain: the entries added,
  // at most dim (counting distinct ones would cost a test per entry).
  std::size_t capacity() const { return std::min(added_, acc_.size()); }

 private:
  std::vector<float> acc_;
  std::vector<std::uint64_t> bits_;
  std::size_t added_ = 0;
};

}  // namespace sparq
