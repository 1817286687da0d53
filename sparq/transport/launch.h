#pragma once
// Starting ranks. Under mpiexec every process is a rank over MpiTransport;
// otherwise `ranks` threads of this process are the ranks over LocalTransport.
// The same function runs on every rank either way, so the same seed and rank
// count give the same results on both.
#include <functional>
#include <optional>
#include <string_view>

#include "sparq/core/kernel_costs.h"
#include "sparq/transport/net_model.h"
#include "sparq/transport/transport.h"

namespace sparq {

struct LaunchOptions {
  int ranks = 0;  // in-process ranks; 0 = 1 (or the mpiexec world)
  Millis timeout = Transport::kDefaultTimeout;
  // When set, every rank runs on a SimTransport (virtual clock) over the
  // real transport, so collectives report simulated times for this network.
  std::optional<NetModel> net;
  // With net: each thread's CPU time times cpu_scale is its computation (0:
  // none; SimTransport's cpu_scale).
  double cpu_scale = 0;
  // With net: the cores a rank's threads share (0: each thread its own).
  int host_cores = 0;
  // With net, in-process ranks: the cores every rank's threads share (the
  // hosts of a cluster emulated on one machine; 0: none; not with
  // host_cores).
  int shared_cores = 0;
  // With net: the threads a rank's step is split over, emulated on its
  // training thread (parallel_clock.h).
  int threads = 1;
  // With net: the dense kernels' costs by shape (kernel_costs.h; null:
  // their CPU time as measured). Shared by every in-process rank.
  KernelCosts* kernel_costs = nullptr;
  // Run `ranks` threads of this process even where a launcher started it:
  // `sparq plan --measure` plans on rank 0's in-process ranks after the
  // hosts measured their network together.
  bool in_process = false;
};

// The launcher that started this process, as its environment tells it
// (without initialising MPI): its name, the variable holding the number of
// processes it started, and that number.
struct Launcher {
  std::string_view name;      // "Open MPI", "MPICH/Hydra", "Slurm", "PMIx"
  std::string_view size_var;  // e.g. "PMI_SIZE"
  int size = 1;
};

// Looks up an environment variable: std::getenv, or a table in tests.
using EnvLookup = std::function<const char*(const char*)>;

// The first launcher whose process count is set, in this order: Open MPI
// (OMPI_COMM_WORLD_SIZE), MPICH/Hydra (PMI_SIZE), Slurm's srun
// (SLURM_STEP_NUM_TASKS), PMIx (PMIX_SIZE). A process manager started under
// another (Hydra's proxies run as Slurm tasks) comes first. Nothing when none is.
std::optional<Launcher> detect_launcher(const EnvLookup& env);

// Which transport launch() will use in this process: "mpi" when a launcher
// started more than one process, or Open MPI's mpiexec started this one;
// else "local".
std::string_view launch_mode();

// Processes the launcher started (from its environment, without initialising
// MPI); 1 when no launcher started this one.
int mpiexec_world_size();

// Runs fn on every rank and returns when all finished. Errors propagate as
// exceptions from the failing rank (local), or from this rank (MPI: callers
// must then abort the job, see MpiSession::abort_job, so no rank hangs).
// When MPI's world is not the launcher's process count (sparq's Open MPI
// started by MPICH's mpiexec, or by srun without PMI support: each process a
// world of one), it throws InputError naming both, instead of running that
// many independent trainings.
void launch(const LaunchOptions& opts, const std::function<void(Transport&)>& fn);

}  // namespace sparq
