#include "sparq/train/linear_second_order.h"

#include "sparq/coll/allreduce.h"

namespace sparq {

std::vector<double> margins_in_double(const LinearModel& m, const SparseRows& rows) {
  std::vector<double> z(rows.rows());
  for (std::size_t i = 0; i < rows.rows(); ++i) {
    const auto idx = rows.row_indices(i);
    const auto val = rows.row_values(i);
    double s = 0;
    for (std::size_t k = 0; k < idx.size(); ++k) s += static_cast<double>(m.weight(idx[k])) * val[k];
    z[i] = s;
  }
  return z;
}

CollStats sum_to_dense(Transport& t, const LinearTrainOptions& o, const compress::SparseStream& mine,
                       std::span<float> out, SparseAutoHistory* history, std::size_t& nnz) {
  if (o.exchange.dense) {
    mine.to_dense(out);
    AllreduceOptions ao;
    ao.algo = o.exchange.dense_algo;
    ao.timeout = o.timeout;
    CollStats st = allreduce(t, out, ao);
    st.algo = "dense/" + st.algo;
    nnz = out.size();
    return st;
  }
  SparseAllreduceOptions so;
  so.algo = o.exchange.sparse;
  so.timeout = o.timeout;
  so.auto_rule = o.auto_rule;
  so.history = history;
  compress::SparseStream sum;
  const CollStats st = sparse_allreduce(t, mine, sum, so);
  sum.to_dense(out);
  nnz = sum.is_dense() ? out.size() : sum.nnz();
  return st;
}

double armijo_step(Transport& t, const LineSearch& s, Millis timeout, const RunClock& clock, double& exchange_s,
                   EpochTally& tally) {
  constexpr int kTries = 4, kMaxHalvings = 30;
  constexpr double kSigma = 0.01;
  for (int first = 0; first <= kMaxHalvings; first += first == 0 ? 1 : kTries) {
    const int tries = first == 0 ? 1 : kTries;
    double change[kTries] = {};
    for (std::uint32_t i : s.moved) {
      const double y = label_sign(s.rows.labels[i]);
      for (int c = 0; c < tries; ++c)
        change[c] += log_loss(y * (s.margins[i] + std::ldexp(s.dz[i], -(first + c)))) - s.loss[i];
    }
    const double t0 = clock.now();
    AllreduceOptions ao;
    ao.timeout = timeout;
    const CollStats st = allreduce(t, std::span<double>(change, static_cast<std::size_t>(tries)), ao);
    exchange_s += clock.now() - t0;
    tally.sent += st.wire.bytes_sent;
    for (int c = 0; c < tries; ++c) {
      const double alpha = std::ldexp(1.0, -(first + c));
      const double df = change[c] / s.n + s.l2 * (alpha * s.wd + alpha * alpha * s.dd / 2);
      if (df <= kSigma * alpha * s.slope) return alpha;
    }
  }
  return 0;
}

}  // namespace sparq
