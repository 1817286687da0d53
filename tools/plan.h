#pragma once
// `sparq plan`: the plan for P ranks on a network, chosen on the virtual
// clock (sparq/plan/), and what `sparq train --plan` takes from it.
#include <optional>
#include <string>

#include "sparq/plan/plan_file.h"
#include "sparq/plan/search.h"
#include "sparq/transport/transport.h"
#include "tools/train_args.h"
#include "tools/train_data.h"

namespace sparq::cli {

// `sparq train --plan auto`: the plan for a's model, data, in-process
// ranks and --net, chosen as `sparq plan` chooses it.
plan::PlanFile plan_for(const TrainArgs& a, int world);
// `sparq plan --measure`, on every host under mpiexec (one process a host,
// t over them): times sparq's ring allreduce and pairwise alltoall together
// and fits the alpha-beta network to them. The --net spec on rank 0, which
// prints the fit; nothing on the other ranks.
std::optional<std::string> measure_net(Transport& t, double timeout_s);
// The print intervals a trial run is timed by: its step is the median of
// those after the first (the tables' first touches, the buffers' growth).
inline constexpr std::size_t kTrialPrintFreq = 5;
// `sparq plan --trial`: steps a plan trains on the hosts (0: no trial), at
// most this many leaders, in this many interleaved rounds.
struct TrialOptions {
  std::size_t steps = 0, plans = 6, rounds = 3;
};
// On rank 0, after planning on the clock: has every host train the
// admitted plans within 15 % of the clock's fastest (plan::trial_set), then
// the fastest of them at each fusion size the clock ran
// (plan::fusion_variants), in interleaved rounds, ranking each stage's plans
// by their step against their round's median plan; notes the rounds on the
// candidates of those plans and returns the last stage's fastest.
const plan::Candidate* decide_on_hosts(Transport& t, const TrainArgs& args, const TrialOptions& o,
                                       const TrainData& data, std::vector<plan::Candidate>& all);
// On the other hosts: loads the data, then trains what rank 0 sends.
void follow_trial(Transport& t, const TrainArgs& args, const TrialOptions& o);
// a with the plan's flags set (as if given).
TrainArgs with_knobs(TrainArgs a, const plan::PlanKnobs& k);
// Sets a's batches and epochs so that a run takes `steps` whole batches of
// data (going on into the next epoch where one holds fewer).
void run_for_steps(TrainArgs& a, const TrainData& data, std::size_t steps);
// The model a plan was chosen for: the MLPs, the tables and their rows.
std::string plan_model(const TrainArgs& a);
// Sets a's flags to the plan's after checking that it was chosen for this
// model, rank count and global batch, and that no flag it sets was given
// (`given`: the flags set on the command line).
void apply_plan(const plan::PlanFile& p, const std::string& path, int world,
                const std::vector<std::string>& given, TrainArgs& a);

}  // namespace sparq::cli
