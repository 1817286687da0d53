#pragma once
// Starting ranks. Under mpiexec every process is a rank over MpiTransport;
// otherwise `ranks` threads of this process are the ranks over LocalTransport.
// The same function runs on every rank either way, so the same seed and rank
// count give the same results on both.
#include <functional>

#include <optional>

#include "sparq/transport/net_model.h"
#include "sparq/transport/transport.h"

namespace sparq {

struct LaunchOptions {
  int ranks = 0;  // in-process ranks; 0 = 1 (or the mpiexec world)
  Millis timeout = Transport::kDefaultTimeout;
  // When set, every rank runs on a SimTransport (virtual clock) over the
  // real transport, so collectives report simulated times for this network.
  std::optional<NetModel> net;
};

// Which transport launch() will use in this process: "mpi" or "local".
std::string_view launch_mode();

// Processes in the mpiexec job that started this one (from the launcher's
// environment, without initialising MPI); 1 when not started by mpiexec.
int mpiexec_world_size();

// Runs fn on every rank and returns when all finished. Errors propagate as
// exceptions from the failing rank (local), or from this rank (MPI: callers
// must then abort the job, see MpiSession::abort_job, so no rank hangs).
void launch(const LaunchOptions& opts, const std::function<void(Transport&)>& fn);

}  // namespace sparq
