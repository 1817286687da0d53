// Mini-batch SGD over a sparse allreduce of the batch gradients (linear_trainer.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparq/coll/allreduce.h"
#include "sparq/core/rng.h"
#include "sparq/train/linear_steps.h"

namespace sparq {

namespace {

using compress::SparseStream;

class SgdSteps final : public LinearSteps {
 public:
  SgdSteps(Transport& t, const SparseRows& rows, const LinearTrainOptions& o)
      : t_(t), rows_(rows), o_(o), clock_(t), grad_(rows.num_features), order_(rows.rows()) {
    if (o.sgd_step == SgdStep::Adagrad) squares_.assign(rows.num_features, 0.0f), last_.assign(rows.num_features, 0);
    auto n = static_cast<std::int64_t>(rows.rows());
    allreduce(t, std::span<std::int64_t>(&n, 1), AllreduceOptions{.op = ReduceOp::Max});
    // Auto: at least kAutoSteps steps an epoch, at most 1000 rows a rank
    // (SparCML's batch): 1000 rows a step would leave a 4,800-row set 5
    // steps an epoch.
    batch_ = o.batch ? o.batch : std::clamp<std::size_t>(static_cast<std::size_t>(n) / kAutoSteps, 1, 1000);
    steps_ = (static_cast<std::size_t>(n) + batch_ - 1) / batch_;  // every rank takes as many steps; a short shard's last batches are empty
  }

  std::string settings() const override {
    return fmt::format("sgd: {} rows a rank and step{}, {} steps an epoch", batch_,
                       o_.batch ? "" : " (--mini-batch-size auto)", steps_);
  }

  void epoch(LinearModel& m, std::size_t e, EpochTally& tally) override {
    Rng rng(o_.seed, 0x5eed0000 + e * 1000003 + static_cast<std::uint64_t>(t_.rank()));
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
    const std::size_t steps = o_.max_steps ? std::min(o_.max_steps, steps_) : steps_;
    tally.pass_steps = steps_;
    for (std::size_t s = 0; s < steps; ++s) {
      const double lr = o_.lr / (1 + o_.lr_decay * (static_cast<double>(e) + static_cast<double>(s) / steps_));
      step(m, s, lr, tally);
    }
    if (o_.sgd_step == SgdStep::Adagrad)
      for (std::size_t j = 0; j < squares_.size(); ++j) catch_up(m, j, step_);
    // The epoch's end: the loss and accuracy of the model it ends with.
    const std::vector<float> z = linear_margins(m, rows_);
    for (std::size_t i = 0; i < z.size(); ++i) {
      tally.loss_sum += linear_loss(o_.loss, rows_.labels[i], z[i]);
      tally.correct += (z[i] > 0) == (rows_.labels[i] > 0);
    }
    tally.rows += rows_.rows();
  }

 private:
  void step(LinearModel& m, std::size_t s, double lr, EpochTally& tally) {
    const double t0 = clock_.now();
    const std::size_t lo = std::min(s * batch_, order_.size()), hi = std::min(lo + batch_, order_.size());
    const std::span<const std::size_t> batch = std::span(order_).subspan(lo, hi - lo);
    margins_.resize(batch.size());
    linear_margins(m, rows_, batch, margins_);
    for (std::size_t k = 0; k < batch.size(); ++k)
      grad_.add_row(rows_.row_indices(batch[k]), rows_.row_values(batch[k]),
                    linear_dloss(o_.loss, rows_.labels[batch[k]], margins_[k]));
    const auto pairs = local_.start_pairs(grad_.dim(), grad_.capacity());
    local_.finish_pairs(grad_.drain(pairs.indices, pairs.values));
    if (summed_dense()) {  // the dense baseline's gradient, as its users would hold it: computation, not exchange
      dense_.resize(grad_.dim());
      local_.to_dense(dense_);
    }
    const double t1 = clock_.now();
    const CollStats st = exchange();
    const double t2 = clock_.now();
    apply(m, lr);
    const double t3 = clock_.now();
    tally.compute_s += (t1 - t0) + (t3 - t2);
    tally.exchange_s += t2 - t1;
    tally.sent += st.wire.bytes_sent;
    const std::uint64_t p = static_cast<std::uint64_t>(t_.size());
    tally.dense_sent += 2 * (p - 1) * grad_.dim() * sizeof(float) / p;
    ++tally.algos[st.algo];
    tally.summed_nnz += summed_dense() || sum_.is_dense() ? grad_.dim() : sum_.nnz();
    tally.summed_dim += grad_.dim();
    ++tally.steps;
  }

  // The sum is in dense_ (a dense exchange), else in sum_.
  bool summed_dense() const { return o_.exchange.dense && t_.size() > 1; }

  CollStats exchange() {
    if (t_.size() == 1) {  // nothing to sum with
      std::swap(sum_, local_);
      CollStats none;
      none.algo = "none";
      return none;
    }
    if (!o_.exchange.dense) {
      SparseAllreduceOptions so;
      so.algo = o_.exchange.sparse;
      so.timeout = o_.timeout;
      so.auto_rule = o_.auto_rule;
      // `auto` plans from this step's largest nnz (agreed: one 8-byte
      // allreduce) and the last step's union, which every rank holds alike.
      // Its own history would derive the nnz from the union as if indices
      // were uniform; a power law's frequent features overlap, so the real
      // nnz is ~3x that on URL-like data, and the plan picked recursive
      // doubling where the split allgather was 1.44x faster (docs/results.md,
      // 8 hosts at 1 Gbit/s: 3433 against 2385 ms a pass).
      if (last_union_ > 0) so.auto_rule.result_density = static_cast<double>(last_union_) / grad_.dim();
      CollStats st = sparse_allreduce(t_, local_, sum_, so);
      last_union_ = sum_.is_dense() ? 0 : sum_.nnz();
      return st;
    }
    AllreduceOptions ao;
    ao.algo = o_.exchange.dense_algo;
    ao.timeout = o_.timeout;
    CollStats st = allreduce(t_, std::span<float>(dense_), ao);
    st.algo = "dense/" + st.algo;
    return st;
  }

  // The same update whichever exchange ran: features with no gradient are
  // left as they are (plain: added -0; adagrad: decayed later, as they
  // would have been), so a dense sum that equals the sparse one gives the
  // same model bit for bit.
  void apply(LinearModel& m, double lr) {
    const double mean = 1 / (static_cast<double>(batch_) * t_.size());
    if (o_.sgd_step == SgdStep::Plain) m.decay(1 - lr * o_.l2);
    lr_ = lr;
    ++step_;
    const auto update = [&](std::size_t j, float sum) {
      if (o_.sgd_step == SgdStep::Plain) return m.add(j, -lr * mean * sum);
      if (sum != 0) adagrad(m, j, mean * sum);
    };
    if (summed_dense() || sum_.is_dense()) {
      const std::span<const float> v = summed_dense() ? std::span<const float>(dense_) : sum_.values();
      for (std::size_t j = 0; j < v.size(); ++j) update(j, v[j]);
      return;
    }
    const auto idx = sum_.indices();
    const auto v = sum_.values();
    for (std::size_t k = 0; k < idx.size(); ++k) update(idx[k], v[k]);
  }

  // AdaGrad on the loss, the penalty by proximal steps: w_j <- (w_j - eta_j
  // g_j) / (1 + eta_j l2), eta_j = lr / sqrt(G_j), G_j the summed squares of
  // w_j's loss gradients. A step whose sum misses j only divides w_j by
  // (1 + eta_j l2), eta_j unchanged, so that is done when j is next touched
  // (or at the epoch's end), as a power: the penalty reaches every weight
  // every step at O(1) a touch. (The lr of the later step stands in for
  // the skipped steps' when lr decays.)
  void adagrad(LinearModel& m, std::size_t j, double g) {
    catch_up(m, j, step_ - 1);
    squares_[j] += static_cast<float>(g * g);
    const double eta = lr_ / (std::sqrt(static_cast<double>(squares_[j])) + 1e-8), w = m.weight(j);
    m.add(j, (w - eta * g) / (1 + eta * o_.l2) - w);
    last_[j] = step_;
  }

  // The penalty of steps last_j + 1 .. upto, which did not touch j.
  void catch_up(LinearModel& m, std::size_t j, std::uint64_t upto) {
    const std::uint64_t skipped = upto - last_[j];
    last_[j] = upto;
    if (skipped == 0 || squares_[j] == 0 || o_.l2 == 0) return;
    const double eta = lr_ / (std::sqrt(static_cast<double>(squares_[j])) + 1e-8), w = m.weight(j);
    m.add(j, w * std::pow(1 + eta * o_.l2, -static_cast<double>(skipped)) - w);
  }

  Transport& t_;
  const SparseRows& rows_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  SparseGradient grad_;
  std::vector<std::size_t> order_;
  std::vector<float> margins_, dense_;
  std::vector<float> squares_;        // adagrad: each weight's summed squared loss gradients
  std::vector<std::uint64_t> last_;   // adagrad: the step up to which each weight's penalty is applied
  std::uint64_t step_ = 0;            // steps taken
  double lr_ = 0;                     // the current step's lr
  SparseStream local_, sum_;
  std::size_t last_union_ = 0;  // the last sparse sum's nnz (0: none yet, or it went dense)
  static constexpr std::size_t kAutoSteps = 200;
  std::size_t batch_ = 0, steps_ = 0;
};

}  // namespace

std::unique_ptr<LinearSteps> make_sgd_steps(Transport& t, const SparseRows& rows, const LinearTrainOptions& o) {
  return std::make_unique<SgdSteps>(t, rows, o);
}

}  // namespace sparq
