// HostCores against a reference that keeps every unit of modelled time of
// every core as a slot (integer starts and works), and SimTransport's threads
// sharing a host's cores.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "sparq/core/error.h"
#include "sparq/transport/host_cores.h"
#include "sparq/transport/local_transport.h"
#include "sparq/transport/sim_transport.h"

namespace sparq {
namespace {

// Work of `work` units from `start` takes the first free slots at or after
// start, on the core where it ends first (the lowest such core).
class SlotCores {
 public:
  SlotCores(int cores, int horizon) : busy_(cores, std::vector<bool>(horizon)) {}
  int run(int start, int work) {
    int best = -1, best_end = 0;
    for (int c = 0; c < static_cast<int>(busy_.size()); ++c)
      if (const int e = fill(c, start, work, false); best < 0 || e < best_end) best = c, best_end = e;
    return fill(best, start, work, true);
  }

 private:
  int fill(int c, int start, int work, bool take) {
    int t = start;
    for (; work > 0; ++t)
      if (!busy_[c].at(t)) {
        if (take) busy_[c][t] = true;
        --work;
      }
    return t;
  }
  std::vector<std::vector<bool>> busy_;
};

TEST(HostCores, FillsTheGapsOtherWorkLeft) {
  HostCores one(1);
  EXPECT_EQ(one.run(10, 5), 15);  // busy 10-15
  EXPECT_EQ(one.run(0, 4), 4);    // before it
  EXPECT_EQ(one.run(4, 10), 19);  // 4-10, then 15-19
  EXPECT_EQ(one.run(12, 1), 20);  // inside busy time: after it
  EXPECT_EQ(one.run(30, 0), 30);  // no work
  HostCores two(2);
  EXPECT_EQ(two.run(0, 5), 5);
  EXPECT_EQ(two.run(0, 5), 5);  // the other core
  EXPECT_EQ(two.run(0, 5), 10);
}

TEST(HostCores, MatchesSlotReference) {
  std::mt19937 rng(7);
  for (const int cores : {1, 2, 3}) {
    HostCores fast(cores);
    SlotCores slow(cores, 20000);
    for (int i = 0; i < 400; ++i) {
      const int start = std::uniform_int_distribution<>(0, 2000)(rng), work = std::uniform_int_distribution<>(0, 12)(rng);
      ASSERT_EQ(fast.run(start, work), slow.run(start, work)) << cores << " cores, job " << i;
    }
  }
}

TEST(HostCores, ForgettingThePastChangesNothingAfterIt) {
  std::mt19937 rng(11);
  HostCores kept(1), pruned(1);
  int t = 0;
  for (int i = 0; i < 300; ++i) {
    t += std::uniform_int_distribution<>(0, 3)(rng);
    const int work = std::uniform_int_distribution<>(1, 5)(rng);
    ASSERT_EQ(kept.run(t, work), pruned.run(t, work)) << i;
    pruned.forget_before(t);
  }
}

TEST(HostCores, RejectsNoCores) { EXPECT_THROW(HostCores(0), InputError); }

// Two threads of one rank, each 10 ms of modelled work from time 0: side by
// side on their own cores or on two, one after the other on one.
TEST(SimTransport, ThreadsShareTheHostsCores) {
  const NetModel net = parse_net_model("10gbit,20us");
  for (const auto& [cores, second_end] : {std::pair{0, 10e-3}, {2, 10e-3}, {1, 20e-3}})
    run_local(1, [&](Transport& t) {
      SimTransport sim(t, net, 0, cores);
      sim.advance(10e-3);
      double other = 0;
      std::thread([&] {
        sim.advance(10e-3);
        other = sim.now();
      }).join();
      EXPECT_DOUBLE_EQ(sim.now(), 10e-3) << cores << " cores";
      EXPECT_DOUBLE_EQ(other, second_end) << cores << " cores";
    });
  run_local(1, [&](Transport& t) { EXPECT_THROW(SimTransport(t, net, 0, -1), InputError); });
}

}  // namespace
}  // namespace sparq
