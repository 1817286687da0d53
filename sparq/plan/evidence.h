#pragma once
// Whether a plan's codecs stay within an accuracy budget, and what says so:
// the project's stored paired-seed runs (scripts/plan-evidence.py computes
// the table from docs/data), or a pilot on the user's own data.
//
// The rule: each codec of the plan (the dense gradients', the tables'
// alltoall pair, bf16 MLPs, DCT-MP at a hybrid plan's cut, and the
// parameter server's asynchrony with its push codec) needs a stored
// measurement at a rank count within 2x of the plan's, over at least 2
// paired seeds; where it was measured on several data sets, the set where
// its mean change is largest counts. The plan's expected change of the
// final test loss is the sum of its codecs' mean changes (a negative one
// counted as 0), and it enters
// only when that sum is at most the budget. Codecs' effects adding up is an
// assumption (the pilot tests the combination on the user's data).
#include <optional>
#include <span>
#include <string>

#include "sparq/plan/space.h"

namespace sparq::plan {

struct EvidenceRow {
  const char* kind;       // "dp" (--dp-codec[@--dp-allreduce]), "emb" (fwd/bwd), "mlp" (--mlp-precision),
                          // "mp" (--mp-codec) or "ps" (--dp-mode ps with its --dp-codec)
  const char* codec;      // "dct:0.98,1000", "q4@ring", "q4/q2", "bf16"
  const char* placement;  // of the runs
  int ranks;
  double mean_change;     // of the final test loss against fp32, %, paired seeds
  double worst_change;    // the worst seed's
  int seeds;
  const char* data;
  const char* runs;       // the stored runs, a glob under the repository
};

std::span<const EvidenceRow> evidence_rows();

struct Verdict {
  bool admitted = false;
  double expected_change = 0;  // %, the sum of the codecs' mean changes
  std::string why;             // what backs it, or why it is left out
};

// `budget`: the largest change of the final test loss allowed, % (0.1: +0.1 %).
Verdict judge(const PlanKnobs& k, int ranks, double budget);

}  // namespace sparq::plan
