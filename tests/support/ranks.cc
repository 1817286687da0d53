#include "tests/support/ranks.h"

#include <memory>

#include "sparq/transport/local_transport.h"
#include "sparq/transport/mpi_transport.h"

namespace sparq::test {

namespace {
std::unique_ptr<MpiSession> g_session;
std::unique_ptr<MpiTransport> g_world;
}  // namespace

bool under_mpi() { return g_world != nullptr; }

int mpi_world_size() { return under_mpi() ? g_world->size() : 0; }

bool ranks_available(int nranks) { return !under_mpi() || g_world->size() == nranks; }

void run_ranks(int nranks, const std::function<void(Transport&)>& fn, Millis timeout) {
  if (!under_mpi()) {
    run_local(nranks, fn, timeout);
    return;
  }
  SPARQ_CHECK(g_world->size() == nranks, "test needs {} ranks, MPI world has {}", nranks, g_world->size());
  const Millis before = g_world->timeout();
  g_world->set_timeout(timeout);
  fn(*g_world);
  g_world->set_timeout(before);
}

}  // namespace sparq::test

// The tests' main: MPI is initialised only when mpiexec started us.
int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  using namespace sparq::test;
  if (sparq::MpiSession::launched_by_mpiexec()) {
    g_session = std::make_unique<sparq::MpiSession>(&argc, &argv);
    g_world = std::make_unique<sparq::MpiTransport>();
  }
  const int rc = RUN_ALL_TESTS();
  g_world.reset();
  g_session.reset();
  return rc;
}
