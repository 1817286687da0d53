// Distributed block coordinate descent on the regularised logistic loss,
// with a line search that makes every iteration decrease the objective
// (linear_trainer.h has the algorithm; docs/model.md why it is built so).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/sparse_allreduce.h"
#include "sparq/core/error.h"
#include "sparq/core/rng.h"
#include "sparq/train/linear_second_order.h"

namespace sparq {

namespace {

using compress::SparseStream;

// The rows' columns (compressed sparse columns): which rows hold feature j.
// 32-bit offsets: a rank's shard must have fewer than 2^32 non-zeros.
struct Columns {
  std::vector<std::uint32_t> offsets, rows;
  std::vector<float> values;

  explicit Columns(const SparseRows& r) : offsets(r.num_features + 1, 0), rows(r.nnz()), values(r.nnz()) {
    SPARQ_CHECK_AS(InputError, r.nnz() < (std::uint64_t{1} << 32),
                   "--algo scd: a rank's shard has {} non-zeros, at most 2^32 - 1 (use more ranks)", r.nnz());
    for (std::uint32_t j : r.indices) ++offsets[j + 1];
    std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
    std::vector<std::uint32_t> at(offsets.begin(), offsets.end() - 1);
    for (std::size_t i = 0; i < r.rows(); ++i) {
      const auto idx = r.row_indices(i);
      const auto val = r.row_values(i);
      for (std::size_t k = 0; k < idx.size(); ++k) {
        const std::uint32_t pos = at[idx[k]]++;
        rows[pos] = static_cast<std::uint32_t>(i);
        values[pos] = val[k];
      }
    }
  }
  std::size_t begin(std::size_t j) const { return offsets[j]; }
  std::size_t end(std::size_t j) const { return offsets[j + 1]; }
  bool empty(std::size_t j) const { return offsets[j] == offsets[j + 1]; }
};

class ScdSteps final : public LinearSteps {
 public:
  ScdSteps(Transport& t, const LinearModel& m, const SparseRows& rows, const LinearTrainOptions& o)
      : t_(t), rows_(rows), o_(o), clock_(t), cols_(rows), dz_(rows.rows(), 0.0), in_touched_(rows.rows(), 0) {
    margins_ = margins_in_double(m, rows);
    prob_.resize(rows.rows());
    loss_.resize(rows.rows());
    for (std::size_t i = 0; i < rows.rows(); ++i) refresh(i);
    double n = static_cast<double>(rows.rows());
    allreduce(t, std::span<double>(&n, 1));
    n_ = n;
    find_active_features();
    block_size_ = o.coords ? o.coords : auto_block();
  }

  std::string settings() const override {
    return fmt::format("scd: blocks of {} of the {} features some row holds{}", block_size_, active_.size(),
                       o_.coords ? "" : " (--coords auto: a row holds about two features of a block)");
  }

  void epoch(LinearModel& m, std::size_t e, EpochTally& tally) override {
    Rng rng(o_.seed, 0x5cd00000 + e);  // the same order on every rank
    order_ = active_;
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
    const std::size_t iters = (order_.size() + block_size_ - 1) / block_size_;
    const std::size_t run = o_.max_steps ? std::min(o_.max_steps, iters) : iters;
    tally.pass_steps = iters;
    for (std::size_t it = 0; it < run; ++it) iteration(m, it, tally);
    for (std::size_t i = 0; i < rows_.rows(); ++i) {
      tally.loss_sum += loss_[i];
      tally.correct += (margins_[i] > 0) == (rows_.labels[i] > 0);
    }
    tally.rows += rows_.rows();
  }

 private:
  // A block in which a row holds about two features on average: twice the
  // features held over the mean non-zeros a row. Larger blocks take fewer
  // exchanges an epoch but couple more of a row's features in one step,
  // which the line search then shortens (scripts/reproduce-linear blocks:
  // epochs to converge at 1, 2, 4 and 8 features a row, docs/results.md).
  std::size_t auto_block() {
    double nnz = static_cast<double>(rows_.nnz());
    allreduce(t_, std::span<double>(&nnz, 1));
    const double per_row = n_ > 0 ? nnz / n_ : 1;
    return static_cast<std::size_t>(std::max(1.0, std::round(2 * static_cast<double>(active_.size()) / std::max(per_row, 1.0))));
  }

  // The features some rank's rows hold, in index order: the others' weights
  // stay 0 whatever the step (their gradient is l2 w = 0), so they are
  // never drawn. One sparse allreduce of the ranks' held features.
  void find_active_features() {
    std::vector<std::uint32_t> idx;
    for (std::size_t j = 0; j < rows_.num_features; ++j)
      if (!cols_.empty(j)) idx.push_back(static_cast<std::uint32_t>(j));
    std::vector<float> ones(idx.size(), 1.0f);
    SparseStream held;
    SparseAllreduceOptions so;
    so.timeout = o_.timeout;
    sparse_allreduce(t_, SparseStream::sparse(rows_.num_features, std::move(idx), std::move(ones)), held, so);
    if (held.is_dense()) {
      const auto v = held.values();
      for (std::size_t j = 0; j < v.size(); ++j)
        if (v[j] != 0) active_.push_back(j);
    } else {
      active_.assign(held.indices().begin(), held.indices().end());
    }
  }

  void iteration(LinearModel& m, std::size_t it, EpochTally& tally) {
    const double t0 = clock_.now();
    const std::size_t a = std::min(it * block_size_, order_.size()), b = std::min(a + block_size_, order_.size());
    block_.assign(order_.begin() + static_cast<std::ptrdiff_t>(a), order_.begin() + static_cast<std::ptrdiff_t>(b));
    std::sort(block_.begin(), block_.end());
    local_sums();
    const double t1 = clock_.now();
    const CollStats st = exchange();
    const double t2 = clock_.now();
    const double slope = newton_direction(m);
    double exchange_s = t2 - t1;
    if (slope < 0) {
      margin_changes();
      const double alpha = line_search(slope, exchange_s, tally);
      if (alpha > 0) move(m, alpha);
      for (std::uint32_t i : touched_) dz_[i] = 0, in_touched_[i] = 0;
    }
    const double t3 = clock_.now();
    tally.compute_s += (t3 - t0) - exchange_s;
    tally.exchange_s += exchange_s;
    tally.sent += st.wire.bytes_sent;
    const auto p = static_cast<std::uint64_t>(t_.size());
    tally.dense_sent += 2 * (p - 1) * 2 * block_.size() * sizeof(float) / p;
    ++tally.algos[st.algo];
    tally.summed_nnz += summed_nnz_;
    tally.summed_dim += summed_.size();
    ++tally.steps;
  }

  // Over my rows, each block feature's sum of dloss x (entry k) and of the
  // curvature p (1 - p) x^2 (entry |B| + k); features my rows lack are left
  // out (sparse) or 0 (dense).
  void local_sums() {
    const std::size_t nb = block_.size();
    idx_.clear();
    g_.clear();
    h_.clear();
    for (std::size_t k = 0; k < nb; ++k) {
      const std::size_t j = block_[k];
      if (cols_.empty(j)) continue;
      double g = 0, h = 0;
      for (std::size_t q = cols_.begin(j); q < cols_.end(j); ++q) {
        const std::uint32_t i = cols_.rows[q];
        const double x = cols_.values[q], p = prob_[i];
        g += (p - (rows_.labels[i] > 0 ? 1 : 0)) * x;
        h += p * (1 - p) * x * x;
      }
      idx_.push_back(static_cast<std::uint32_t>(k));
      g_.push_back(static_cast<float>(g));
      h_.push_back(static_cast<float>(h));
    }
  }

  CollStats exchange() {
    const std::size_t nb = block_.size();
    std::vector<std::uint32_t> idx(idx_);
    for (std::uint32_t k : idx_) idx.push_back(static_cast<std::uint32_t>(nb + k));
    std::vector<float> val(g_);
    val.insert(val.end(), h_.begin(), h_.end());
    summed_.resize(2 * nb);
    return sum_to_dense(t_, o_, SparseStream::sparse(2 * nb, std::move(idx), std::move(val)), summed_, nullptr,
                        summed_nnz_);
  }

  // Each block feature's Newton step on the whole objective, at most
  // kMaxStep long (a feature that few rows hold has almost no curvature
  // where they are classified confidently: an uncapped step would take the
  // line search's whole budget); the same on every rank. Returns the
  // directional derivative g . d (< 0 unless every g is 0).
  static constexpr double kMaxStep = 1.0;
  double newton_direction(const LinearModel& m) {
    const std::size_t nb = block_.size();
    d_.assign(nb, 0.0);
    double slope = 0;
    wd_ = dd_ = 0;
    for (std::size_t k = 0; k < nb; ++k) {
      const double w = m.weight(block_[k]);
      const double g = summed_[k] / n_ + o_.l2 * w, h = summed_[nb + k] / n_ + o_.l2;
      if (h <= 0 || g == 0) continue;
      d_[k] = -std::clamp(g / h, -kMaxStep, kMaxStep);
      slope += g * d_[k];
      wd_ += w * d_[k];
      dd_ += d_[k] * d_[k];
    }
    return slope;
  }

  // dz_i = x_i . d over my rows, and which rows the block touches.
  void margin_changes() {
    touched_.clear();
    for (std::size_t k = 0; k < block_.size(); ++k) {
      if (d_[k] == 0) continue;
      const std::size_t j = block_[k];
      for (std::size_t q = cols_.begin(j); q < cols_.end(j); ++q) {
        const std::uint32_t i = cols_.rows[q];
        if (!in_touched_[i]) in_touched_[i] = 1, touched_.push_back(i);
        dz_[i] += d_[k] * cols_.values[q];
      }
    }
  }

  double line_search(double slope, double& exchange_s, EpochTally& tally) {
    const LineSearch ls{rows_, margins_, loss_, dz_, touched_, n_, o_.l2, slope, wd_, dd_};
    return armijo_step(t_, ls, o_.timeout, clock_, exchange_s, tally);
  }

  // w_B += alpha d, and my rows' margins by what each weight really moved.
  void move(LinearModel& m, double alpha) {
    for (std::size_t k = 0; k < block_.size(); ++k) {
      if (d_[k] == 0) continue;
      const std::size_t j = block_[k];
      const float before = m.weight(j);
      m.add(j, alpha * d_[k]);
      const double delta = static_cast<double>(m.weight(j)) - before;
      for (std::size_t q = cols_.begin(j); q < cols_.end(j); ++q) margins_[cols_.rows[q]] += delta * cols_.values[q];
    }
    for (std::uint32_t i : touched_) refresh(i);
  }

  // Row i's P(y = +1) and loss at its margin.
  void refresh(std::size_t i) {
    const double z = margins_[i], e = std::exp(-std::abs(z));  // exp(-|z|): no overflow
    prob_[i] = z >= 0 ? 1 / (1 + e) : e / (1 + e);
    loss_[i] = std::log1p(e) + std::max(0.0, -label_sign(rows_.labels[i]) * z);
  }

  Transport& t_;
  const SparseRows& rows_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  Columns cols_;
  double n_ = 0;                       // rows over every rank
  std::size_t block_size_ = 0;
  std::vector<std::size_t> active_, order_, block_;
  std::vector<double> margins_;        // double: a margin takes thousands of increments an epoch
  std::vector<double> prob_, loss_;    // each row's P(y = +1) and loss at its margin
  std::vector<double> dz_, d_;
  std::vector<std::uint8_t> in_touched_;
  std::vector<std::uint32_t> touched_, idx_;
  std::vector<float> g_, h_, summed_;  // my sums (sparse), every rank's (dense: g then h)
  std::size_t summed_nnz_ = 0;        // entries of the sum as exchanged
  double wd_ = 0, dd_ = 0;             // w_B . d and |d|^2: the penalty's change along d
};

}  // namespace

std::unique_ptr<LinearSteps> make_scd_steps(Transport& t, const LinearModel& m, const SparseRows& rows,
                                            const LinearTrainOptions& o) {
  return std::make_unique<ScdSteps>(t, m, rows, o);
}

}  // namespace sparq
