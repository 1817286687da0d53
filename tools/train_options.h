#pragma once
// `sparq train`'s flags, checked, as the library's options: each flag that
// does not apply to the plan it names is an InputError that says why.
#include "sparq/train/plan.h"
#include "sparq/train/trainer.h"
#include "sparq/transport/launch.h"
#include "tools/train_args.h"

namespace sparq::cli {

// The run's own flags (threads, batch, tests, targets, checkpoints).
void check_run_flags(const TrainArgs& a);
// The model, the optimizers and the parallel plan on `world` ranks.
PlanOptions plan_options(const TrainArgs& a, int world);
// The network of in-process ranks (--net, --compute-scale, --host-cores).
// in_process: a.ranks threads of this process, also under mpiexec (a
// planner's runs on the virtual clock, LaunchOptions::in_process).
LaunchOptions launch_options(const TrainArgs& a, bool in_process = false);
// This process's kernel costs for --kernel-costs (null for "measured"): one
// table for all its runs (sparq plan's plans share it), read from the file
// on first use.
KernelCosts* kernel_costs(const TrainArgs& a);
// Writes them back where --kernel-costs names a file.
void save_kernel_costs(const TrainArgs& a);
// The loop's options; `p` as plan_options() gave it.
TrainerOptions trainer_options(const TrainArgs& a, const PlanOptions& p);
// Fails before anything is allocated when the model cannot fit this process.
void check_train_memory(const TrainArgs& a, const PlanOptions& p, int world);

}  // namespace sparq::cli
