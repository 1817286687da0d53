#pragma once
// The two algorithms of the linear trainer (linear_trainer.h), one epoch at
// a time, and what an epoch measured on this rank.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "sparq/train/linear_trainer.h"

namespace sparq {

// The run's clock: the rank's virtual clock on a modelled network, else wall time.
class RunClock {
 public:
  explicit RunClock(const Transport& t) : t_(t) {}
  double now() const {
    if (auto v = t_.virtual_time()) return *v;
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

 private:
  const Transport& t_;
};

struct EpochTally {
  double loss_sum = 0;        // the epoch's final model's loss over this rank's rows, summed
  std::size_t correct = 0, rows = 0;
  double compute_s = 0, exchange_s = 0;
  std::uint64_t sent = 0;     // bytes this rank sent (the transport's counters)
  std::uint64_t dense_sent = 0;  // what the dense ring would have sent: 2(P-1)/P 4 d a step (sgd), 4 2|B| (scd)
  std::size_t steps = 0;
  std::size_t pass_steps = 0;    // the steps (iterations) of a whole pass, --num-batches aside
  std::uint64_t summed_nnz = 0, summed_dim = 0;  // every step's sum: non-zeros, dimension (sgd: d; scd: 2|B|)
  std::map<std::string, std::size_t> algos;  // the exchanges that ran: steps each (`auto` may change its pick)
};

// One algorithm's state across epochs.
class LinearSteps {
 public:
  virtual ~LinearSteps() = default;
  virtual void epoch(LinearModel& m, std::size_t e, EpochTally& tally) = 0;
  // What the algorithm settled on from the data (rank 0 prints it).
  virtual std::string settings() const = 0;
  // |w|^2 of the model over every rank (collective): an algorithm whose
  // ranks keep only part of the model exact sums their parts.
  virtual double squared_norm(const LinearModel& m) { return m.squared_norm(); }
  // Makes every rank's model whole (collective), before it is saved or returned.
  virtual void complete(LinearModel&) {}
};

std::unique_ptr<LinearSteps> make_sgd_steps(Transport& t, const SparseRows& rows, const LinearTrainOptions& o);
// `test`: the rows scored after each epoch (the model must be exact on their features too).
std::unique_ptr<LinearSteps> make_newton_steps(Transport& t, const LinearModel& m, const SparseRows& rows,
                                               const SparseRows& test, const LinearTrainOptions& o);
std::unique_ptr<LinearSteps> make_scd_steps(Transport& t, const LinearModel& m, const SparseRows& rows,
                                            const LinearTrainOptions& o);

}  // namespace sparq
