#pragma once
// A lower bound on a plan's step, from what it must put on its rank's link:
// `sparq plan` runs the plans in the order of these bounds and skips a plan
// whose bound is already slower than the fastest plan it ran.
#include <cstddef>
#include <vector>

#include "sparq/plan/space.h"

namespace sparq::plan {

struct PlanShape {
  std::size_t dense_params = 0;  // the MLPs' parameters (the dense gradients)
  std::size_t tables = 0;
  std::size_t emb_dim = 0;
  std::size_t global_batch = 0;
  int ranks = 1;
};

// Bytes a rank must at least send each step under the plan:
// - dense gradients, fp32 or quantized to b bits: a ring allreduce's
//   2(P-1)/P n b/8, which no allreduce beats on bandwidth;
// - DCT-DP at rate eta: its own (1-eta) n values once, without indices;
// - table-wise tables: the owner of floor(T/P) tables sends their lookups to
//   the (P-1)/P of the batch other ranks hold, forward, and each rank sends
//   the gradients of its B/P samples' lookups in the other ranks' tables,
//   backward, each value at its codec's bits;
// - replicated tables: 0 (their exchange depends on the rows a batch touches);
// - a parameter server's worker: its push, as the dense gradients between 2
//   ranks (fp32: n values; DCT-DP: (1-eta) n);
// - a hybrid plan: 0 (its cut's and replicas' bytes depend on the stages).
double min_bytes_sent(const PlanKnobs& k, const PlanShape& s);

}  // namespace sparq::plan
