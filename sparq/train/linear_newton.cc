// Truncated Newton on the regularised logistic loss over every rank's rows
// (linear_trainer.h): an epoch is one Newton step, its direction from
// conjugate gradients on the Hessian, its length from the line search.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/sparse_allreduce.h"
#include "sparq/train/linear_second_order.h"

namespace sparq {

namespace {

using compress::SparseStream;

double dot(std::span<const double> a, std::span<const double> b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

class NewtonSteps final : public LinearSteps {
 public:
  NewtonSteps(Transport& t, const LinearModel& m, const SparseRows& rows, const LinearTrainOptions& o)
      : t_(t), rows_(rows), o_(o), clock_(t), dim_(rows.num_features), acc_(rows.num_features),
        margins_(margins_in_double(m, rows)), loss_(rows.rows()), curv_(rows.rows()), dz_(rows.rows()),
        all_rows_(rows.rows()) {
    std::iota(all_rows_.begin(), all_rows_.end(), 0u);
    double n = static_cast<double>(rows.rows());
    allreduce(t, std::span<double>(&n, 1));
    n_ = n;
  }

  std::string settings() const override {
    return fmt::format("newton: an epoch is one Newton step, its direction by diagonally preconditioned conjugate "
                       "gradients (to {:g} of the gradient's norm, at most {} Hessian products), its length by the "
                       "line search",
                       kCgTolerance, kMaxCg);
  }

  void epoch(LinearModel& m, std::size_t, EpochTally& tally) override {
    const double t0 = clock_.now();
    exchange_s_ = 0;
    std::vector<double> w(dim_), g(dim_);
    for (std::size_t j = 0; j < dim_; ++j) w[j] = m.weight(j);
    gradient(w, g, tally);  // also every row's loss and curvature p (1 - p)
    const std::vector<double> s = conjugate_gradients(g, tally);
    const double slope = dot(g, s);
    if (slope < 0) {
      for (std::size_t i = 0; i < rows_.rows(); ++i) dz_[i] = row_dot(i, s);
      const LineSearch ls{rows_, margins_, loss_, dz_, all_rows_, n_, o_.l2, slope, dot(w, s), dot(s, s)};
      const double alpha = armijo_step(t_, ls, o_.timeout, clock_, exchange_s_, tally);
      if (alpha > 0)
        for (std::size_t j = 0; j < dim_; ++j)
          if (s[j] != 0) m.add(j, alpha * s[j]);
      margins_ = margins_in_double(m, rows_);  // from the weights as stored: no drift
    }
    tally.compute_s += clock_.now() - t0 - exchange_s_;
    tally.exchange_s += exchange_s_;
    for (std::size_t i = 0; i < rows_.rows(); ++i) {
      tally.loss_sum += log_loss(label_sign(rows_.labels[i]) * margins_[i]);
      tally.correct += (margins_[i] > 0) == (rows_.labels[i] > 0);
    }
    tally.rows += rows_.rows();
    tally.pass_steps = tally.steps;
  }

 private:
  // Conjugate gradients on H s = -g from s = 0, preconditioned by the
  // diagonal M, until the residual is below kCgTolerance of |g|
  // (liblinear's trust-region Newton stops its CG there too) or after
  // kMaxCg products. H and M are positive definite (l2 > 0; with l2 = 0,
  // nearly so), so s is a descent direction.
  static constexpr double kCgTolerance = 0.1;
  static constexpr int kMaxCg = 100;
  std::vector<double> conjugate_gradients(std::span<const double> g, EpochTally& tally) {
    std::vector<double> s(dim_, 0.0), r(g.begin(), g.end()), z(dim_), d(dim_), hd(dim_);
    for (double& x : r) x = -x;
    for (std::size_t j = 0; j < dim_; ++j) z[j] = r[j] / precond_[j];
    d = z;
    double rr = dot(r, r), rz = dot(r, z);
    const double stop = kCgTolerance * kCgTolerance * rr;
    for (int k = 0; k < kMaxCg && rr > stop; ++k) {
      hessian_times(d, hd, tally);
      const double dhd = dot(d, hd);
      if (!(dhd > 0)) break;
      const double a = rz / dhd;
      for (std::size_t j = 0; j < dim_; ++j) s[j] += a * d[j], r[j] -= a * hd[j], z[j] = r[j] / precond_[j];
      const double next = dot(r, z);
      for (std::size_t j = 0; j < dim_; ++j) d[j] = z[j] + next / rz * d[j];
      rz = next;
      rr = dot(r, r);
    }
    return s;
  }

  // g = X^T (p - y) / n + l2 w over every rank's rows; my rows' loss and
  // curvature p (1 - p) at their margins on the way.
  void gradient(std::span<const double> w, std::span<double> g, EpochTally& tally) {
    for (std::size_t i = 0; i < rows_.rows(); ++i) {
      const double z = margins_[i], y = label_sign(rows_.labels[i]);
      const double p = 1 / (1 + std::exp(-z));
      loss_[i] = log_loss(y * z);
      curv_[i] = p * (1 - p);
      acc_.add_row(rows_.row_indices(i), rows_.row_values(i), static_cast<float>(p - (y > 0 ? 1 : 0)));
    }
    sum_over_ranks(g, tally);
    for (std::size_t j = 0; j < dim_; ++j) g[j] = g[j] / n_ + o_.l2 * w[j];
    preconditioner(tally);
  }

  // M = l2 I + kDiagonalShare (diag(H) - l2 I), H's diagonal mixed with the
  // penalty's: Hsia, Chiang and Lin (ACML 2018) mix 1 % of the diagonal with
  // the identity of their C-scaled objective, the same M here, because a
  // pure diagonal can be a worse preconditioner than none. On URL-like
  // rows, whose real-valued columns and binary ones differ in scale, it
  // takes a fraction of the products (docs/model.md). A feature no row
  // holds, with l2 = 0, keeps M = 1.
  static constexpr double kDiagonalShare = 0.01;
  void preconditioner(EpochTally& tally) {
    for (std::size_t i = 0; i < rows_.rows(); ++i)
      acc_.add_row_squares(rows_.row_indices(i), rows_.row_values(i), static_cast<float>(curv_[i]));
    precond_.resize(dim_);
    sum_over_ranks(precond_, tally);
    for (double& m : precond_) {
      m = o_.l2 + kDiagonalShare * m / n_;
      if (!(m > 0)) m = 1;
    }
  }

  // H v = X^T diag(p (1 - p)) X v / n + l2 v over every rank's rows.
  void hessian_times(std::span<const double> v, std::span<double> out, EpochTally& tally) {
    for (std::size_t i = 0; i < rows_.rows(); ++i)
      acc_.add_row(rows_.row_indices(i), rows_.row_values(i), static_cast<float>(curv_[i] * row_dot(i, v)));
    sum_over_ranks(out, tally);
    for (std::size_t j = 0; j < dim_; ++j) out[j] = out[j] / n_ + o_.l2 * v[j];
  }

  double row_dot(std::size_t i, std::span<const double> v) const {
    const auto idx = rows_.row_indices(i);
    const auto val = rows_.row_values(i);
    double s = 0;
    for (std::size_t k = 0; k < idx.size(); ++k) s += v[idx[k]] * val[k];
    return s;
  }

  // The accumulated X^T u summed over the ranks into out: a sparse allreduce
  // of my rows' features (auto: planned from the last sum, which fills
  // alike from one product to the next), or a dense one.
  void sum_over_ranks(std::span<double> out, EpochTally& tally) {
    const auto pairs = local_.start_pairs(dim_, acc_.capacity());
    local_.finish_pairs(acc_.drain(pairs.indices, pairs.values));
    const double t0 = clock_.now();
    dense_.resize(dim_);
    std::size_t nnz = 0;
    const CollStats st = sum_to_dense(t_, o_, local_, dense_, &history_, nnz);
    exchange_s_ += clock_.now() - t0;
    std::copy(dense_.begin(), dense_.end(), out.begin());
    tally.sent += st.wire.bytes_sent;
    const auto p = static_cast<std::uint64_t>(t_.size());
    tally.dense_sent += 2 * (p - 1) * dim_ * sizeof(float) / p;
    tally.summed_nnz += nnz;
    tally.summed_dim += dim_;
    ++tally.algos[st.algo];
    ++tally.steps;
  }

  Transport& t_;
  const SparseRows& rows_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  std::size_t dim_;
  double n_ = 0;                   // rows over every rank
  double exchange_s_ = 0;          // this epoch's time in exchanges
  SparseGradient acc_;             // X^T u over my rows
  SparseStream local_;
  SparseAutoHistory history_;
  std::vector<float> dense_;
  std::vector<double> margins_, loss_, curv_, dz_, precond_;
  std::vector<std::uint32_t> all_rows_;
};

}  // namespace

std::unique_ptr<LinearSteps> make_newton_steps(Transport& t, const LinearModel& m, const SparseRows& rows,
                                               const LinearTrainOptions& o) {
  return std::make_unique<NewtonSteps>(t, m, rows, o);
}

}  // namespace sparq
