#pragma once
// The plans `sparq plan` chooses among, as the `sparq train` flags that set
// them: data parallelism with the tables replicated or spread table-wise, the
// dense gradients' codec and its collective, the tables' alltoall codecs
// (table-wise only), the fusion of the dense exchange and the MLPs'
// precision (fp32, or bf16 operands: a codec of the computation, judged for
// accuracy like the others).
//
// Threads a rank are not in the space: the search runs every plan on one
// thread, and only its leaders again on other thread counts (search.h).
// Not in the space yet: model parallelism (DCT-MP at the cuts) and the
// parameter server; `sparq plan` says so at the start.
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

  // The `sparq train` flags of this plan, every knob, in a fixed order.
  Flags flags() const;
  // "table-wise q4/q2, dct:0.98,1000, fuse 1MiB[, bf16 MLPs][, 2 threads]"
  std::string label() const;
  // No codec anywhere, fp32 MLPs: what every speed-up is against.
  bool fp32() const { return dp_codec == "none" && emb_fwd == "fp32" && emb_bwd == "fp32" && mlp == "fp32"; }
  bool operator==(const PlanKnobs&) const = default;
};

// Every plan of the space for `ranks` ranks (one rank: no exchange, one plan).
std::vector<PlanKnobs> plan_space(int ranks);

// The knobs a flag list sets (a plan file's); throws InputError on a flag
// that is not a knob of the space.
PlanKnobs knobs_from_flags(const Flags& flags);

}  // namespace sparq::plan
