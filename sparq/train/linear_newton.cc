// Truncated Newton on the regularised logistic loss over every rank's rows
// (linear_trainer.h): an epoch is one Newton step, its direction from
// conjugate gradients on the Hessian, its length from the line search. The
// vectors live on the owned ranges of linear_owned_sums.h: with the owner
// layout (the default) each rank does 1/P of the vector work and sends only
// values, to and from the owners of its rows' features.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparq/train/linear_owned_sums.h"
#include "sparq/train/linear_second_order.h"

namespace sparq {

namespace {

double dot(std::span<const double> a, std::span<const double> b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

class NewtonSteps final : public LinearSteps {
 public:
  NewtonSteps(Transport& t, const LinearModel& m, const SparseRows& rows, const SparseRows& test,
              const LinearTrainOptions& o)
      : t_(t), rows_(rows), o_(o), clock_(t),
        sums_(make_owned_sums(t, held_features(rows, test), rows.num_features, o)),
        margins_(margins_in_double(m, rows)), loss_(rows.rows()), curv_(rows.rows()), dz_(rows.rows()),
        all_rows_(rows.rows()) {
    std::iota(all_rows_.begin(), all_rows_.end(), 0u);
    local_index();
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
    const std::size_t b = sums_->begin(), n_o = sums_->size();
    std::vector<double> w(n_o), g(n_o);
    for (std::size_t j = 0; j < n_o; ++j) w[j] = m.weight(b + j);
    gradient(w, g, tally);  // also every row's loss and curvature p (1 - p)
    std::vector<double> s = conjugate_gradients(g, tally);
    for (double& x : s) x = static_cast<float>(x);  // as the ranks that hold it get it
    double dots[3] = {dot(g, s), dot(w, s), dot(s, s)};  // slope, w . s, |s|^2
    sums_->sum(dots, exchange_s_, tally);
    if (dots[0] < 0) {
      std::vector<float> s_held(held_count());
      sums_->gather(s, s_held, exchange_s_, tally);
      for (std::size_t i = 0; i < rows_.rows(); ++i) dz_[i] = row_dot(i, s_held);
      const LineSearch ls{rows_, margins_, loss_, dz_, all_rows_, n_, o_.l2, dots[0], dots[1], dots[2]};
      const double alpha = armijo_step(t_, ls, o_.timeout, clock_, exchange_s_, tally);
      if (alpha > 0) move(m, alpha, s, s_held);
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

  // |w|^2 from the owned ranges: a rank's model is exact on its held and owned features only.
  double squared_norm(const LinearModel& m) override {
    double sq = 0, unused = 0;
    for (std::size_t j = 0; j < sums_->size(); ++j) {
      const double x = m.weight(sums_->begin() + j);
      sq += x * x;
    }
    EpochTally none;
    sums_->sum(std::span<double>(&sq, 1), unused, none);
    return sq;
  }

  void complete(LinearModel& m) override {
    std::vector<float> owned(sums_->size());
    for (std::size_t j = 0; j < owned.size(); ++j) owned[j] = m.weight(sums_->begin() + j);
    m.set_weights(sums_->gather_all(owned));
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
    const std::size_t n_o = g.size();
    std::vector<double> s(n_o, 0.0), r(g.begin(), g.end()), z(n_o), d(n_o), hd(n_o);
    for (double& x : r) x = -x;
    for (std::size_t j = 0; j < n_o; ++j) z[j] = r[j] / precond_[j];
    d = z;
    double rr_rz[2] = {dot(r, r), dot(r, z)};
    sums_->sum(rr_rz, exchange_s_, tally);
    double rr = rr_rz[0], rz = rr_rz[1];
    const double stop = kCgTolerance * kCgTolerance * rr;
    for (int k = 0; k < kMaxCg && rr > stop; ++k) {
      hessian_times(d, hd, tally);
      double dhd = dot(d, hd);
      sums_->sum(std::span<double>(&dhd, 1), exchange_s_, tally);
      if (!(dhd > 0)) break;
      const double a = rz / dhd;
      for (std::size_t j = 0; j < n_o; ++j) s[j] += a * d[j], r[j] -= a * hd[j], z[j] = r[j] / precond_[j];
      double next_rr[2] = {dot(r, z), dot(r, r)};
      sums_->sum(next_rr, exchange_s_, tally);
      for (std::size_t j = 0; j < n_o; ++j) d[j] = z[j] + next_rr[0] / rz * d[j];
      rz = next_rr[0], rr = next_rr[1];
    }
    return s;
  }

  // g = X^T (p - y) / n + l2 w over every rank's rows; my rows' loss and
  // curvature p (1 - p) at their margins on the way.
  void gradient(std::span<const double> w, std::span<double> g, EpochTally& tally) {
    clear();
    for (std::size_t i = 0; i < rows_.rows(); ++i) {
      const double z = margins_[i], y = label_sign(rows_.labels[i]);
      const double p = 1 / (1 + std::exp(-z));
      loss_[i] = log_loss(y * z);
      curv_[i] = p * (1 - p);
      add_row(i, static_cast<float>(p - (y > 0 ? 1 : 0)));
    }
    sums_->reduce(local_, g, exchange_s_, tally);
    for (std::size_t j = 0; j < g.size(); ++j) g[j] = g[j] / n_ + o_.l2 * w[j];
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
    clear();
    for (std::size_t i = 0; i < rows_.rows(); ++i) {
      const auto at = row_at(i);
      const auto val = rows_.row_values(i);
      const auto c = static_cast<float>(curv_[i]);
      for (std::size_t k = 0; k < at.size(); ++k) local_[at[k]] += c * val[k] * val[k];
    }
    precond_.resize(sums_->size());
    sums_->reduce(local_, precond_, exchange_s_, tally);
    for (double& x : precond_) {
      x = o_.l2 + kDiagonalShare * x / n_;
      if (!(x > 0)) x = 1;
    }
  }

  // H v = X^T diag(p (1 - p)) X v / n + l2 v over every rank's rows.
  void hessian_times(std::span<const double> v, std::span<double> out, EpochTally& tally) {
    std::vector<float>& v_held = scratch_;
    v_held.resize(held_count());
    sums_->gather(v, v_held, exchange_s_, tally);
    clear();
    for (std::size_t i = 0; i < rows_.rows(); ++i) add_row(i, static_cast<float>(curv_[i] * row_dot(i, v_held)));
    sums_->reduce(local_, out, exchange_s_, tally);
    for (std::size_t j = 0; j < out.size(); ++j) out[j] = out[j] / n_ + o_.l2 * v[j];
  }

  // w += alpha s on every feature this rank owns or holds: the same float
  // step on every rank (s was rounded to a float before it was gathered).
  void move(LinearModel& m, double alpha, std::span<const double> s, std::span<const float> s_held) {
    for (std::size_t j = 0; j < s.size(); ++j)
      if (s[j] != 0) m.add(sums_->begin() + j, alpha * s[j]);
    const auto held = sums_->held();
    for (std::size_t k = 0; k < held.size(); ++k)
      if (s_held[k] != 0 && !sums_->owns(held[k])) m.add(held[k], alpha * s_held[k]);
  }

  // My rows' features as positions in the held list, so the vector a row
  // reads and the sums it adds to are the held features' (fit in cache).
  void local_index() {
    const auto held = sums_->held();
    std::vector<std::uint32_t> pos(rows_.num_features);
    for (std::size_t k = 0; k < held.size(); ++k) pos[held[k]] = static_cast<std::uint32_t>(k);
    at_.resize(rows_.nnz());
    for (std::size_t k = 0; k < rows_.nnz(); ++k) at_[k] = pos[rows_.indices[k]];
    local_.resize(held.size());
  }
  std::size_t held_count() const { return sums_->held().size(); }
  std::span<const std::uint32_t> row_at(std::size_t i) const {
    return std::span(at_).subspan(rows_.offsets[i], rows_.offsets[i + 1] - rows_.offsets[i]);
  }
  void clear() { std::fill(local_.begin(), local_.end(), 0.0f); }
  void add_row(std::size_t i, float coeff) {
    const auto at = row_at(i);
    const auto val = rows_.row_values(i);
    for (std::size_t k = 0; k < at.size(); ++k) local_[at[k]] += coeff * val[k];
  }
  double row_dot(std::size_t i, std::span<const float> v_held) const {
    const auto at = row_at(i);
    const auto val = rows_.row_values(i);
    double s = 0;
    for (std::size_t k = 0; k < at.size(); ++k) s += static_cast<double>(v_held[at[k]]) * val[k];
    return s;
  }

  Transport& t_;
  const SparseRows& rows_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  std::unique_ptr<OwnedSums> sums_;
  double n_ = 0;                   // rows over every rank
  double exchange_s_ = 0;          // this epoch's time in exchanges
  std::vector<std::uint32_t> at_;  // each non-zero's position in the held features
  std::vector<float> local_, scratch_;  // my rows' sums on the held features; a gathered vector
  std::vector<double> margins_, loss_, curv_, dz_, precond_;
  std::vector<std::uint32_t> all_rows_;
};

}  // namespace

std::unique_ptr<LinearSteps> make_newton_steps(Transport& t, const LinearModel& m, const SparseRows& rows,
                                               const SparseRows& test, const LinearTrainOptions& o) {
  return std::make_unique<NewtonSteps>(t, m, rows, test, o);
}

}  // namespace sparq
