// Distributed random block coordinate descent on the primal logistic loss,
// the changes exchanged by a sparse allgather of the ranges
// (linear_trainer.h). Changes rather than new values: a range the codec
// sends dense (it was smaller so) then reads 0 where nothing changed.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparq/coll/allgather.h"
#include "sparq/coll/patterns.h"
#include "sparq/coll/sparse_allgather.h"
#include "sparq/core/error.h"
#include "sparq/core/rng.h"
#include "sparq/model/loss.h"
#include "sparq/model/parallel.h"
#include "sparq/train/linear_steps.h"

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
};

class ScdSteps final : public LinearSteps {
 public:
  ScdSteps(Transport& t, const LinearModel& m, const SparseRows& rows, const LinearTrainOptions& o)
      : t_(t), rows_(rows), o_(o), clock_(t), cols_(rows), part_{rows.num_features, t.size()},
        lo_(part_.offset(t.rank())), perm_(part_.len(t.rank())), counts_(t.size()) {
    const std::vector<float> z = linear_margins(m, rows);
    margins_.assign(z.begin(), z.end());
    for (int r = 0; r < t.size(); ++r) counts_[r] = part_.len(r);
  }

  void epoch(LinearModel& m, std::size_t e, EpochTally& tally) override {
    Rng rng(o_.seed, 0x5cd00000 + e * 1000003 + static_cast<std::uint64_t>(t_.rank()));
    std::iota(perm_.begin(), perm_.end(), lo_);
    for (std::size_t i = perm_.size(); i > 1; --i) std::swap(perm_[i - 1], perm_[rng.below(i)]);
    const std::size_t iters = (part_.max_len() + o_.coords - 1) / o_.coords;
    const std::size_t run = o_.max_steps ? std::min(o_.max_steps, iters) : iters;
    tally.pass_steps = iters;
    for (std::size_t it = 0; it < run; ++it) {
      const double lr = o_.lr / (1 + o_.lr_decay * (static_cast<double>(e) + static_cast<double>(it) / iters));
      iteration(m, it, lr, tally);
    }
    for (std::size_t i = 0; i < rows_.rows(); ++i) {  // the training loss at the epoch's end
      const float y = rows_.labels[i], z = static_cast<float>(margins_[i]);
      tally.loss_sum += linear_loss(LinearLoss::Logistic, y, z);
      tally.correct += (z > 0) == (y > 0);
    }
    tally.rows += rows_.rows();
  }

 private:
  void iteration(LinearModel& m, std::size_t it, double lr, EpochTally& tally) {
    const double t0 = clock_.now();
    const std::size_t a = std::min(it * o_.coords, perm_.size()), b = std::min(a + o_.coords, perm_.size());
    block_.assign(perm_.begin() + static_cast<std::ptrdiff_t>(a), perm_.begin() + static_cast<std::ptrdiff_t>(b));
    std::sort(block_.begin(), block_.end());
    idx_.clear();
    val_.clear();
    for (std::size_t j : block_)
      if (cols_.end(j) > cols_.begin(j)) {  // no row of mine holds j: nothing to estimate its step from
        idx_.push_back(static_cast<std::uint32_t>(j - lo_));
        val_.push_back(newton_step(m, j, lr));
      }
    if (o_.exchange.dense) {  // the dense baseline's vector of changes: computation, not exchange
      full_.resize(rows_.num_features);  // allgatherv writes every range but mine
      std::fill_n(full_.begin() + static_cast<std::ptrdiff_t>(lo_), perm_.size(), 0.0f);
      for (std::size_t k = 0; k < idx_.size(); ++k) full_[lo_ + idx_[k]] = val_[k];
    }
    const double t1 = clock_.now();
    const CollStats st = exchange();
    const double t2 = clock_.now();
    apply(m);
    const double t3 = clock_.now();
    tally.compute_s += (t1 - t0) + (t3 - t2);
    tally.exchange_s += t2 - t1;
    tally.sent += st.wire.bytes_sent;
    tally.dense_sent += (rows_.num_features - part_.len(t_.rank())) * sizeof(float);
    ++tally.algos[st.algo];
    tally.summed_nnz += o_.exchange.dense || gathered_.is_dense() ? rows_.num_features : gathered_.nnz();
    ++tally.steps;
  }

  // One Newton step for w_j on the mean logistic loss of my rows plus l2,
  // at most kMaxStep long: a feature that few rows hold has almost no
  // curvature where those rows are already classified confidently, and an
  // uncapped step would jump towards infinity (they are separable).
  static constexpr double kMaxStep = 1.0;
  float newton_step(const LinearModel& m, std::size_t j, double lr) const {
    double g = 0, h = 0;
    for (std::size_t k = cols_.begin(j); k < cols_.end(j); ++k) {
      const std::uint32_t i = cols_.rows[k];
      const double x = cols_.values[k], y = rows_.labels[i], z = margins_[i];
      const double p = sigmoid(z);  // P(y = +1)
      g += (p - (y > 0 ? 1 : 0)) * x;
      h += p * (1 - p) * x * x;
    }
    const double n = static_cast<double>(rows_.rows()), w = m.weight(j);
    g = g / n + o_.l2 * w;
    h = h / n + o_.l2;
    return static_cast<float>(h > 0 ? -lr * std::clamp(g / h, -kMaxStep, kMaxStep) : 0.0);
  }

  CollStats exchange() {
    const std::size_t len = part_.len(t_.rank());
    if (!o_.exchange.dense) {
      SparseAllgatherOptions so;
      so.timeout = o_.timeout;
      return sparse_allgather(t_, SparseStream::sparse(len, idx_, val_), rows_.num_features, gathered_, so);
    }
    AllgatherOptions ao;
    ao.timeout = o_.timeout;
    CollStats st = allgatherv(t_, std::span<const float>(full_).subspan(lo_, len), std::span<float>(full_),
                              std::span<const std::size_t>(counts_), ao);
    st.algo = "dense/allgatherv-" + st.algo;
    return st;
  }

  // w_j += step, and my rows' margins by what w_j really moved.
  void move(LinearModel& m, std::size_t j, float step) {
    if (step == 0) return;
    const float before = m.weight(j);
    m.add(j, step);
    const double delta = static_cast<double>(m.weight(j)) - before;
    for (std::size_t k = cols_.begin(j); k < cols_.end(j); ++k) margins_[cols_.rows[k]] += delta * cols_.values[k];
  }

  // The same changes whichever exchange ran: the dense one carries a change
  // for every weight, 0 outside the blocks.
  void apply(LinearModel& m) {
    if (o_.exchange.dense || gathered_.is_dense()) {
      const std::span<const float> v = o_.exchange.dense ? std::span<const float>(full_) : gathered_.values();
      for (std::size_t j = 0; j < v.size(); ++j) move(m, j, v[j]);
      return;
    }
    const auto idx = gathered_.indices();
    const auto v = gathered_.values();
    for (std::size_t k = 0; k < idx.size(); ++k) move(m, idx[k], v[k]);
  }

  Transport& t_;
  const SparseRows& rows_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  Columns cols_;
  pattern::Partition part_;
  std::size_t lo_;
  std::vector<std::size_t> perm_, block_;
  std::vector<std::size_t> counts_;  // every rank's range length (the dense allgatherv's counts)
  std::vector<double> margins_;  // double: a margin takes thousands of increments an epoch
  std::vector<float> full_;      // dense exchange: every weight's change
  std::vector<std::uint32_t> idx_;
  std::vector<float> val_;
  SparseStream gathered_;
};

}  // namespace

std::unique_ptr<LinearSteps> make_scd_steps(Transport& t, const LinearModel& m, const SparseRows& rows,
                                            const LinearTrainOptions& o) {
  SPARQ_CHECK_AS(InputError, o.loss == LinearLoss::Logistic,
                 "--algo scd minimises the logistic loss (SparCML's coordinate descent); --loss hinge needs --algo sgd");
  return std::make_unique<ScdSteps>(t, m, rows, o);
}

}  // namespace sparq
