#include "sparq/train/linear_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sparq/coll/allgather.h"
#include "sparq/core/error.h"
#include "sparq/core/memory.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/metrics.h"
#include "sparq/train/linear_steps.h"

namespace sparq {

LinearAlgo parse_linear_algo(std::string_view s) {
  if (s == "sgd") return LinearAlgo::Sgd;
  if (s == "scd") return LinearAlgo::Scd;
  if (s == "newton") return LinearAlgo::Newton;
  SPARQ_THROW(InputError, "--algo must be auto, newton, scd or sgd, got '{}'", s);
}

std::string_view linear_algo_name(LinearAlgo a) {
  switch (a) {
    case LinearAlgo::Sgd: return "sgd";
    case LinearAlgo::Scd: return "scd";
    case LinearAlgo::Newton: return "newton";
  }
  return "?";
}

SgdStep parse_sgd_step(std::string_view s) {
  if (s == "adagrad") return SgdStep::Adagrad;
  if (s == "plain") return SgdStep::Plain;
  SPARQ_THROW(InputError, "--sgd-step must be adagrad or plain, got '{}'", s);
}

LinearExchange parse_linear_exchange(std::string_view s) {
  LinearExchange x;
  if (s == "owner-alltoall") {
    x.owners = true;
    return x;
  }
  if (s == "dense" || s.starts_with("dense:")) {
    x.dense = true;
    if (s != "dense") x.dense_algo = parse_allreduce_algo(s.substr(6));
    return x;
  }
  for (SparseAlgo a : {SparseAlgo::Auto, SparseAlgo::SsarRecursiveDouble, SparseAlgo::SsarSplitAllgather,
                       SparseAlgo::DsarSplitAllgather})
    if (s == sparse_algo_name(a)) {
      x.sparse = a;
      return x;
    }
  SPARQ_THROW(InputError,
              "--exchange must be auto, owner-alltoall, ssar-recursive-double, ssar-split-allgather, dsar-split-allgather, dense or "
              "dense:ring|rabenseifner|recursive-doubling|native, got '{}'", s);
}

std::string linear_exchange_name(const LinearExchange& x) {
  if (x.owners) return "owner-alltoall";
  if (x.dense) return fmt::format("dense:{}", allreduce_algo_name(x.dense_algo));
  return std::string(sparse_algo_name(x.sparse));
}

LinearScore evaluate_linear(Transport& t, const LinearModel& m, LinearLoss loss, const SparseRows& rows) {
  const std::vector<float> z = linear_margins(m, rows);
  double sums[2] = {0, 0};  // loss, correct
  for (std::size_t i = 0; i < z.size(); ++i) {
    sums[0] += linear_loss(loss, rows.labels[i], z[i]);
    sums[1] += (z[i] > 0) == (rows.labels[i] > 0);
  }
  allreduce(t, std::span<double>(sums, 2));
  // Every rank's margins and labels, for the exact AUC.
  const auto mine = static_cast<std::int64_t>(rows.rows());
  std::vector<std::int64_t> all_counts(t.size());
  allgather(t, std::span<const std::int64_t>(&mine, 1), std::span<std::int64_t>(all_counts));
  const std::vector<std::size_t> counts(all_counts.begin(), all_counts.end());
  const std::size_t n = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::vector<float> scores(n), labels(n);
  allgatherv(t, std::span<const float>(z), std::span<float>(scores), std::span<const std::size_t>(counts));
  allgatherv(t, std::span<const float>(rows.labels), std::span<float>(labels), std::span<const std::size_t>(counts));
  for (float& y : labels) y = y > 0 ? 1.0f : 0.0f;
  LinearScore s;
  s.rows = n;
  if (n == 0) return s;
  s.loss = sums[0] / static_cast<double>(n);
  s.accuracy = sums[1] / static_cast<double>(n);
  s.auc = roc_auc(scores, labels);
  return s;
}

namespace {

// Every rank's tally summed (rows, loss, correct), the fastest rank's
// exchange time as the communication, this rank's time beyond it as waiting.
struct EpochReport {
  LinearScore train;
  double objective = 0, change = 0;  // F, and its change from the last epoch's (relative; NaN at first)
  double compute_s, comm_s, wait_s;
  std::uint64_t sent, dense_sent;
};

EpochReport reduce_tally(Transport& t, const EpochTally& e) {
  double sums[3] = {e.loss_sum, static_cast<double>(e.correct), static_cast<double>(e.rows)};
  allreduce(t, std::span<double>(sums, 3));
  double fastest = e.exchange_s;
  allreduce(t, std::span<double>(&fastest, 1), AllreduceOptions{.op = ReduceOp::Min});
  EpochReport r{};
  r.train.rows = static_cast<std::size_t>(sums[2]);
  r.train.loss = sums[2] > 0 ? sums[0] / sums[2] : 0;
  r.train.accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0;
  r.compute_s = e.compute_s;
  r.comm_s = fastest;
  r.wait_s = e.exchange_s - fastest;
  r.sent = e.sent;
  r.dense_sent = e.dense_sent;
  return r;
}

void report_epoch(TrainerSink& sink, std::size_t e, const LinearTrainOptions& o, const EpochReport& r,
                  const LinearScore* test, const EpochTally& tally) {
  std::string line = fmt::format("epoch {}/{}: objective {:.6f}{} | train loss {:.6f} accuracy {:.3f} %", e + 1,
                                 o.epochs, r.objective,
                                 std::isnan(r.change) ? "" : fmt::format(" ({:+.2e})", -r.change), r.train.loss,
                                 100 * r.train.accuracy);
  if (test) line += fmt::format(" | test loss {:.6f} accuracy {:.3f} % auc {:.4f}", test->loss, 100 * test->accuracy, test->auc);
  const double total = r.compute_s + r.comm_s + r.wait_s;
  line += fmt::format(" | {:.0f} ms: compute {:.0f}, communication {:.0f}, waiting {:.0f}", 1e3 * total,
                      1e3 * r.compute_s, 1e3 * r.comm_s, 1e3 * r.wait_s);
  const double density = tally.summed_dim ? static_cast<double>(tally.summed_nnz) / tally.summed_dim : 0;
  std::string algos;  // "name" when one exchange ran every step, else "name x n, ..."
  for (const auto& [name, n] : tally.algos)
    algos += (algos.empty() ? "" : ", ") + (tally.algos.size() == 1 ? name : fmt::format("{} x{}", name, n));
  line += fmt::format(" | sent {:.2f} MB, dense {:.2f} MB ({:.1f}x) | {} steps, {}, sum density {:.3f} %\n", r.sent / 1e6,
                      r.dense_sent / 1e6, r.sent ? static_cast<double>(r.dense_sent) / r.sent : 0.0, tally.steps,
                      algos, 100 * density);
  sink.line(line);
  nlohmann::json ev = {{"event", "epoch"},        {"epoch", e + 1},         {"objective", r.objective},
                       {"train_loss", r.train.loss},
                       {"train_accuracy", r.train.accuracy}, {"ms", 1e3 * total}, {"compute_ms", 1e3 * r.compute_s},
                       {"comm_ms", 1e3 * r.comm_s}, {"wait_ms", 1e3 * r.wait_s}, {"bytes_sent", r.sent},
                       {"dense_bytes", r.dense_sent}, {"steps", tally.steps}, {"pass_steps", tally.pass_steps}, {"exchange", algos}, {"exchanges", tally.algos}, {"sum_density", density},
                       {"peak_rss_bytes", peak_resident_memory()}};
  if (test) ev.update({{"test_loss", test->loss}, {"test_accuracy", test->accuracy}, {"test_auc", test->auc}});
  sink.event(ev);
}

// Says how training ended: converged within `tol`, or not (and by how much).
void report_end(TrainerSink& sink, const LinearTrainOptions& o, const LinearTrainResult& res) {
  std::string line;
  if (o.tol <= 0)
    line = fmt::format("ran {} epochs (--tol 0: no convergence test); the last changed the objective by {:.2e}\n",
                       res.epochs, res.change);
  else if (res.converged)
    line = fmt::format("converged after {} epochs: the objective changed by {:.2e} of itself, below --tol {:g}\n",
                       res.epochs, res.change, o.tol);
  else
    line = fmt::format("not converged: after {} epochs (--epochs) the objective still changed by {:.2e} of itself, "
                       "above --tol {:g}\n", res.epochs, res.change, o.tol);
  sink.line(line);
  sink.event({{"event", "end"}, {"epochs", res.epochs}, {"objective", res.objective}, {"change", res.change},
              {"tol", o.tol}, {"converged", res.converged}});
}

}  // namespace

LinearTrainResult train_linear(Transport& t, LinearModel& model, const SparseRows& train, const SparseRows& test,
                               const LinearTrainOptions& o, TrainerSink& sink) {
  SPARQ_CHECK_AS(InputError, model.dim() == train.num_features, "the model has {} weights, the data {} features",
                 model.dim(), train.num_features);
  SPARQ_CHECK_AS(InputError, o.algo == LinearAlgo::Sgd || o.loss == LinearLoss::Logistic,
                 "--algo {} minimises the logistic loss; --loss hinge needs --algo sgd", linear_algo_name(o.algo));
  SPARQ_CHECK_AS(InputError, !o.exchange.owners || o.algo == LinearAlgo::Newton,
                 "--exchange owner-alltoall is newton's; --algo {} sums whole vectors", linear_algo_name(o.algo));
  std::unique_ptr<LinearSteps> steps = o.algo == LinearAlgo::Sgd   ? make_sgd_steps(t, train, o)
                                       : o.algo == LinearAlgo::Scd ? make_scd_steps(t, model, train, o)
                                                                   : make_newton_steps(t, model, train, test, o);
  if (t.rank() == 0) sink.line(steps->settings() + "\n");
  auto test_rows = static_cast<std::int64_t>(test.rows());
  allreduce(t, std::span<std::int64_t>(&test_rows, 1));
  LinearTrainResult res;
  res.change = std::numeric_limits<double>::quiet_NaN();
  while (res.epochs < o.epochs && !res.converged) {
    EpochTally tally;
    steps->epoch(model, res.epochs, tally);
    EpochReport r = reduce_tally(t, tally);
    r.objective = r.train.loss + o.l2 / 2 * steps->squared_norm(model);
    r.change = res.epochs ? std::abs(res.objective - r.objective) / std::max(std::abs(r.objective), 1e-300)
                          : std::numeric_limits<double>::quiet_NaN();
    res.converged = res.epochs && o.tol > 0 && r.change < o.tol;
    res.objective = r.objective, res.change = r.change;
    std::optional<LinearScore> ts;
    if (test_rows > 0) ts = evaluate_linear(t, model, o.loss, test);
    if (!o.save.empty()) steps->complete(model);
    if (t.rank() == 0) {
      report_epoch(sink, res.epochs, o, r, ts ? &*ts : nullptr, tally);
      if (!o.save.empty()) {
        nlohmann::json meta = o.save_meta;
        meta["epoch"] = res.epochs + 1;
        save_weights_checkpoint(o.save, model.weights(), meta.dump());
      }
    }
    ++res.epochs;
  }
  if (o.save.empty()) steps->complete(model);  // with --save, each epoch completed it
  if (t.rank() == 0) report_end(sink, o, res);
  return res;
}

}  // namespace sparq
