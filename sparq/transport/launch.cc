#include "sparq/transport/launch.h"

#include <algorithm>
#include <cstdlib>

#include "sparq/transport/local_transport.h"
#include "sparq/transport/mpi_transport.h"
#include "sparq/transport/sim_transport.h"

namespace sparq {

std::string_view launch_mode() { return MpiSession::launched_by_mpiexec() ? "mpi" : "local"; }

int mpiexec_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  return 1;
}

void launch(const LaunchOptions& opts, const std::function<void(Transport&)>& user_fn) {
  // With a network model, each rank sees its transport through a virtual clock.
  const auto fn = [&](Transport& t) {
    if (!opts.net) return user_fn(t);
    SimTransport sim(t, *opts.net);
    sim.set_timeout(opts.timeout);
    user_fn(sim);
  };
  SPARQ_CHECK_AS(InputError, opts.ranks >= 0, "--ranks must be >= 1, got {}", opts.ranks);
  if (launch_mode() == "mpi") {
    MpiSession session(nullptr, nullptr);
    MpiTransport t;
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
