#pragma once
// The plans `sparq plan` chooses among, as the `sparq train` flags that set
// them: data parallelism with the tables replicated or spread table-wise, the
// dense gradients' codec and its collective, the tables' alltoall codecs
// (table-wise) or their gradients' exchange in bf16 (replicated), the fusion
// of the dense exchange and the MLPs' precision (fp32, or bf16 operands: a
// codec of the computation, judged for accuracy like the others); hybrid
// plans (the bottom MLP over 2 pipeline stages, 2 micro-batches, replicas of
// the pipeline exchanging as above but unfused, DCT-MP or nothing at the
// cut); and a parameter server (the last rank serves the replicated model to
// asynchronous workers, pushes with DCT-DP or in fp32).
//
// Threads a rank are not in the space: the search runs every plan on one
// thread, and only its leaders again on other thread counts (search.h).
#include <string>
#include <utility>
#include <vector>

namespace sparq::plan {

using Flags = std::vector<std::pair<std::string, std::string>>;

struct PlanKnobs {
  std::string placement = "replicated";  // or "table-wise"
  std::string dp_codec = "none";         // --dp-codec
  std::string dp_allreduce = "auto";     // --dp-allreduce
  std::string emb_fwd = "fp32", emb_bwd = "fp32";
  std::string fuse = "0";                // --fuse-bytes
  int threads = 1;                       // --threads a rank
  std::string mlp = "fp32";              // --mlp-precision: or "bf16"
  std::string mp_splits = "";            // --mp-splits: "" (none) or "bot:2" (hybrid)
  int micro_batches = 1;                 // --micro-batches (2 for a hybrid plan)
  std::string mp_codec = "none";         // --mp-codec at a hybrid plan's cut
  std::string dp_mode = "allreduce";     // --dp-mode: or "ps"
  int servers = 1;                       // --servers of a "ps" plan

  // The `sparq train` flags of this plan, every knob, in a fixed order.
  Flags flags() const;
  // "[hybrid bot:2 (cut dct:0.90), |ps, ]table-wise q4/q2|replicated[ bf16 grads], dct:0.98,1000, fuse 1MiB[, bf16
  // MLPs][, 2 threads]"
  std::string label() const;
  // Data parallel, hybrid or parameter server: what the plan's computation
  // is like (a hybrid rank computes one stage; the search's compute floor
  // compares like with like).
  std::string structure() const { return dp_mode == "ps" ? "ps" : mp_splits.empty() ? "dp" : "hybrid"; }
  // No codec anywhere, fp32 MLPs, synchronous: what every speed-up is against.
  bool fp32() const {
    return dp_codec == "none" && emb_fwd == "fp32" && emb_bwd == "fp32" && mlp == "fp32" && mp_codec == "none" &&
           dp_mode == "allreduce";
  }
  bool operator==(const PlanKnobs&) const = default;
};

// Every plan of the space for `ranks` ranks (one rank: no exchange, one plan).
std::vector<PlanKnobs> plan_space(int ranks);

// The knobs a flag list sets (a plan file's); throws InputError on a flag
// that is not a knob of the space.
PlanKnobs knobs_from_flags(const Flags& flags);

}  // namespace sparq::plan
