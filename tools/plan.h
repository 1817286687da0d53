#pragma once
// `sparq plan`: the plan for P ranks on a network, chosen on the virtual
// clock (sparq/plan/), and what `sparq train --plan` takes from it.
#include <optional>
#include <string>

#include "sparq/plan/plan_file.h"
#include "tools/train_args.h"

namespace sparq::cli {

// `sparq train --plan auto`: the plan for a's model, data, in-process
// ranks and --net, chosen as `sparq plan` chooses it.
plan::PlanFile plan_for(const TrainArgs& a, int world);
// `sparq plan --measure`, on every host under mpiexec (one process a host):
// times sparq's ring allreduce and pairwise alltoall together and fits the
// alpha-beta network to them. The --net spec on rank 0, which prints the
// fit; nothing on the other ranks.
std::optional<std::string> measure_net(int hosts, double timeout_s);
// The model a plan was chosen for: the MLPs, the tables and their rows.
std::string plan_model(const TrainArgs& a);
// Sets a's flags to the plan's after checking that it was chosen for this
// model, rank count and global batch, and that no flag it sets was given
// (`given`: the flags set on the command line).
void apply_plan(const plan::PlanFile& p, const std::string& path, int world,
                const std::vector<std::string>& given, TrainArgs& a);

}  // namespace sparq::cli
