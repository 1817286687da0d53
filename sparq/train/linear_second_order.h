#pragma once
// What the linear trainer's second-order algorithms share (linear_scd.cc,
// linear_newton.cc): the logistic loss at a double margin, sums over the
// ranks by the chosen exchange, and Armijo's backtracking line search on the
// objective along a direction, its loss part summed over every rank's rows.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/coll/sparse_allreduce.h"
#include "sparq/data/sparse_rows.h"
#include "sparq/train/linear_steps.h"

namespace sparq {

// log(1 + exp(-m)) for the signed margin m = y z, without overflow.
inline double log_loss(double m) { return m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m)); }
inline double label_sign(float y) { return y > 0 ? 1 : -1; }

// Every row's margin, in double (a margin then takes many increments).
std::vector<double> margins_in_double(const LinearModel& m, const SparseRows& rows);

// Every rank's `mine` summed into `out` (mine's dimension) by o.exchange: a
// sparse allreduce (history: auto's plan from the last sum, or null), or
// densified and a dense allreduce. `nnz`: the sum's entries as exchanged.
CollStats sum_to_dense(Transport& t, const LinearTrainOptions& o, const compress::SparseStream& mine,
                       std::span<float> out, SparseAutoHistory* history, std::size_t& nnz);

// Where the search stands: my rows' margins and their loss now, the rows a
// direction d moves and by how much (dz_i = x_i . d), and what every rank
// knows alike: the rows over all ranks (n), l2, the slope g . d (< 0), w . d
// and |d|^2 (the penalty's change along d).
struct LineSearch {
  const SparseRows& rows;
  std::span<const double> margins, loss, dz;
  std::span<const std::uint32_t> moved;  // the rows with dz_i != 0 (or all)
  double n, l2, slope, wd, dd;
};

// The largest alpha of 1, 1/2, 1/4, ... with Armijo's sufficient decrease
// F(w + alpha d) - F(w) <= 0.01 alpha g.d; 0 (no move) below 2^-30.
// alpha = 1 is tried alone first (a Newton step is mostly taken whole),
// then four halvings a round: one small allreduce a round, whose time and
// bytes go to the tally. Every rank gets the same sums, so the same alpha.
double armijo_step(Transport& t, const LineSearch& s, Millis timeout, const RunClock& clock, double& exchange_s,
                   EpochTally& tally);

}  // namespace sparq
