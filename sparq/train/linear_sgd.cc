// Mini-batch SGD over a sparse allreduce of the batch gradients (linear_trainer.h).
#include <algorithm>
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
    auto n = static_cast<std::int64_t>(rows.rows());
    allreduce(t, std::span<std::int64_t>(&n, 1), AllreduceOptions{.op = ReduceOp::Max});
    steps_ = (static_cast<std::size_t>(n) + o.batch - 1) / o.batch;  // every rank takes as many steps; a short shard's last batches are empty
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
  }

 private:
  void step(LinearModel& m, std::size_t s, double lr, EpochTally& tally) {
    const double t0 = clock_.now();
    const std::size_t lo = std::min(s * o_.batch, order_.size()), hi = std::min(lo + o_.batch, order_.size());
    const std::span<const std::size_t> batch = std::span(order_).subspan(lo, hi - lo);
    margins_.resize(batch.size());
    linear_margins(m, rows_, batch, margins_);
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const float y = rows_.labels[batch[k]], z = margins_[k];
      tally.loss_sum += linear_loss(o_.loss, y, z);
      tally.correct += (z > 0) == (y > 0);
      grad_.add_row(rows_.row_indices(batch[k]), rows_.row_values(batch[k]), linear_dloss(o_.loss, y, z));
    }
    tally.rows += batch.size();
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
  // added -0, which leaves them as they are, so a dense sum that equals the
  // sparse one gives the same model bit for bit.
  void apply(LinearModel& m, double lr) {
    m.decay(1 - lr * o_.l2);
    const double step = -lr / (static_cast<double>(o_.batch) * t_.size());
    if (summed_dense() || sum_.is_dense()) {
      const std::span<const float> v = summed_dense() ? std::span<const float>(dense_) : sum_.values();
      for (std::size_t j = 0; j < v.size(); ++j) m.add(j, step * v[j]);
      return;
    }
    const auto idx = sum_.indices();
    const auto v = sum_.values();
    for (std::size_t k = 0; k < idx.size(); ++k) m.add(idx[k], step * v[k]);
  }

  Transport& t_;
  const SparseRows& rows_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  SparseGradient grad_;
  std::vector<std::size_t> order_;
  std::vector<float> margins_, dense_;
  SparseStream local_, sum_;
  std::size_t last_union_ = 0;  // the last sparse sum's nnz (0: none yet, or it went dense)
  std::size_t steps_ = 0;
};

}  // namespace

std::unique_ptr<LinearSteps> make_sgd_steps(Transport& t, const SparseRows& rows, const LinearTrainOptions& o) {
  return std::make_unique<SgdSteps>(t, rows, o);
}

}  // namespace sparq
