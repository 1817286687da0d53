#include "tests/support/ranks.h"

#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string_view>
#include <thread>

#include "sparq/transport/local_transport.h"
#include "sparq/transport/mpi_transport.h"
#ifdef SPARQ_HAVE_GLOO
#include <gloo/rendezvous/hash_store.h>

#include "sparq/transport/gloo_transport.h"
#endif

namespace sparq::test {

namespace {
std::unique_ptr<MpiSession> g_session;
std::unique_ptr<MpiTransport> g_world;
}  // namespace

bool under_mpi() { return g_world != nullptr; }

bool on_gloo() {
  const char* t = std::getenv("SPARQ_TEST_TRANSPORT");
  return t != nullptr && std::string_view(t) == "gloo";
}

namespace {
#ifdef SPARQ_HAVE_GLOO
// One connected world of P GlooTransports per rank count, kept between runs
// (connecting P^2 TCP pairs for every run would dominate the tests), and
// dropped after a failed run, which may have left messages in flight.
// Its ranks leave together, each on a thread of its own, as processes do: a
// transport's destructor waits for its peers' goodbyes.
struct GlooWorld {
  std::vector<std::unique_ptr<GlooTransport>> ranks;
  ~GlooWorld() {
    std::vector<std::thread> threads;
    for (auto& t : ranks) threads.emplace_back([&t] { t.reset(); });
    for (auto& th : threads) th.join();
  }
};
std::map<int, GlooWorld> g_gloo_worlds;

std::vector<std::unique_ptr<GlooTransport>>& gloo_world(int nranks) {
  auto& world = g_gloo_worlds[nranks].ranks;
  if (!world.empty()) return world;
  gloo::rendezvous::HashStore store;
  world.resize(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      world[r] = std::make_unique<GlooTransport>(store, r, nranks, GlooAddress{.iface = "", .hostname = "127.0.0.1"});
    });
  for (auto& th : threads) th.join();
  return world;
}
#endif

// P threads, each running fn on its rank's GlooTransport.
void run_gloo(int nranks, const std::function<void(Transport&)>& fn, Millis timeout) {
#ifdef SPARQ_HAVE_GLOO
  auto& world = gloo_world(nranks);
  std::vector<std::exception_ptr> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      try {
        world[r]->set_timeout(timeout);
        fn(*world[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  for (int r = 0; r < nranks; ++r) {
    if (!errors[r]) continue;
    g_gloo_worlds.erase(nranks);
    try {
      std::rethrow_exception(errors[r]);
    } catch (...) {
      rethrow_with_prefix(fmt::format("rank {}", r));
    }
  }
#else
  (void)nranks, (void)fn, (void)timeout;
  SPARQ_THROW(Error, "SPARQ_TEST_TRANSPORT=gloo, but this build has no Gloo");
#endif
}
}  // namespace

int mpi_world_size() { return under_mpi() ? g_world->size() : 0; }

bool ranks_available(int nranks) { return !under_mpi() || g_world->size() == nranks; }

void run_ranks(int nranks, const std::function<void(Transport&)>& fn, Millis timeout) {
  if (on_gloo()) {
    run_gloo(nranks, fn, timeout);
    return;
  }
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
#ifdef SPARQ_HAVE_GLOO
  g_gloo_worlds.clear();
#endif
  g_world.reset();
  g_session.reset();
  return rc;
}
