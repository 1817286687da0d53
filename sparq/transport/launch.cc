#include "sparq/transport/launch.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "sparq/transport/local_transport.h"
#include "sparq/transport/mpi_transport.h"
#include "sparq/transport/sim_transport.h"

namespace sparq {

std::optional<Launcher> detect_launcher(const EnvLookup& env) {
  // Slurm: the step's task count, not SLURM_NTASKS, which a batch script (not
  // itself a task of a step) also holds: running sparq there directly is no
  // job of many processes.
  static constexpr Launcher kLaunchers[] = {{"Open MPI", "OMPI_COMM_WORLD_SIZE"},
                                            {"MPICH/Hydra", "PMI_SIZE"},
                                            {"Slurm", "SLURM_STEP_NUM_TASKS"},
                                            {"PMIx", "PMIX_SIZE"}};
  for (Launcher l : kLaunchers)
    if (const char* v = env(std::string(l.size_var).c_str())) {
      l.size = std::max(1, std::atoi(v));
      return l;
    }
  return std::nullopt;
}

namespace {
const char* process_env(const char* name) { return std::getenv(name); }
}  // namespace

int mpiexec_world_size() {
  const auto l = detect_launcher(process_env);
  return l ? l->size : 1;
}

std::string_view launch_mode() {
  // One process of Open MPI's mpiexec still asks for MPI (`mpiexec -n 1` with
  // native collectives); one task of srun or Hydra need not pay for MPI's start.
  const auto l = detect_launcher(process_env);
  return l && (l->size > 1 || l->name == "Open MPI") ? "mpi" : "local";
}

void launch(const LaunchOptions& opts, const std::function<void(Transport&)>& user_fn) {
  // With a network model, each rank sees its transport through a virtual clock.
  std::optional<SharedCores> shared;
  if (opts.net && opts.shared_cores > 0) shared.emplace(opts.shared_cores, opts.ranks == 0 ? 1 : opts.ranks);
  const auto fn = [&](Transport& t) {
    if (!opts.net) return user_fn(t);
    SimTransport sim(t, *opts.net, opts.cpu_scale, opts.host_cores, shared ? &*shared : nullptr);
    sim.set_timeout(opts.timeout);
    set_emulated_threads({opts.threads, opts.threads > 1 ? &sim : nullptr, opts.kernel_costs});
    struct Reset {
      ~Reset() { set_emulated_threads({}); }  // the clock dies with this scope
    } reset;
    user_fn(sim);
  };
  SPARQ_CHECK_AS(InputError, opts.ranks >= 0, "--ranks must be >= 1, got {}", opts.ranks);
  if (!opts.in_process && launch_mode() == "mpi") {
    SPARQ_CHECK_AS(InputError, opts.shared_cores == 0,
                   "shared cores are the in-process ranks' (a cluster emulated on this machine), not mpiexec's");
    const Launcher l = *detect_launcher(process_env);
    MpiSession session(nullptr, nullptr);
    MpiTransport t;
    SPARQ_CHECK_AS(InputError, t.size() == l.size,
                   "started by {} as {} processes ({}={}), but MPI sees {}: this sparq's MPI library does not "
                   "speak that launcher's protocol; start it with the mpiexec of the MPI sparq was built with",
                   l.name, l.size, l.size_var, l.size, t.size());
    SPARQ_CHECK_AS(InputError, opts.ranks == 0 || opts.ranks == t.size(),
                   "--ranks {} given under mpiexec with {} processes: use one or the other", opts.ranks, t.size());
    t.set_timeout(opts.timeout);
    try {
      fn(t);
    } catch (const std::exception& e) {
      // This rank failed: say why, then take the job down, so that the other
      // ranks do not wait for messages that will never come.
      fmt::print(stderr, "sparq: error on rank {} of {}: {}\n", t.rank(), t.size(), e.what());
      std::fflush(stderr);
      MpiSession::abort_job(1);
    }
    return;
  }
  run_local(opts.ranks == 0 ? 1 : opts.ranks, fn, opts.timeout);
}

}  // namespace sparq
