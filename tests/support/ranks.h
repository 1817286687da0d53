#pragma once
// Running one test body on P ranks, the same way in three worlds:
//  - normally, P threads over LocalTransport (run_local);
//  - under mpiexec (CTest's MPI tests), on the MPI world when its size is P;
//    tests for other rank counts are skipped there;
//  - with SPARQ_TEST_TRANSPORT=gloo (CTest's gloo tests), P threads each
//    holding a GlooTransport, connected over loopback TCP.
#include <gtest/gtest.h>

#include <functional>

#include "sparq/transport/transport.h"

namespace sparq::test {

bool under_mpi();
// True when ranks are threads over GlooTransport.
bool on_gloo();
// Size of the MPI world (0 when not under mpiexec).
int mpi_world_size();
// Whether a P-rank test can run in this process.
bool ranks_available(int nranks);
// Runs fn on nranks ranks (see above). Rethrows a rank's failure.
void run_ranks(int nranks, const std::function<void(Transport&)>& fn, Millis timeout = Millis(60000));

}  // namespace sparq::test

// First statement of a test that needs exactly P ranks.
#define SPARQ_NEED_RANKS(P) \
  if (!::sparq::test::ranks_available(P)) GTEST_SKIP() << "needs " << (P) << " MPI ranks"

// First statement of a test that exercises LocalTransport's threads only.
#define SPARQ_LOCAL_ONLY() \
  if (::sparq::test::under_mpi() || ::sparq::test::on_gloo()) GTEST_SKIP() << "in-process test"
