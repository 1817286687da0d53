// HostCores against a reference that keeps every unit of modelled time of
// every core as a slot (integer starts and works), SimTransport's threads
// sharing a host's cores, and in-process ranks sharing cores (SharedCores).
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(SharedCores, AsOneHostsCoresForEveryRank) {
  std::mt19937 rng(5);
  SharedCores shared(2, 3);
  SlotCores slow(2, 20000);
  for (int i = 0; i < 400; ++i) {  // floors at 0: every rank may still fill any gap
    const int rank = i % 3, start = std::uniform_int_distribution<>(0, 2000)(rng);
    const int work = std::uniform_int_distribution<>(0, 12)(rng);
    ASSERT_EQ(shared.run(rank, start, work, 0), slow.run(start, work)) << "job " << i;
  }
}

TEST(SharedCores, KeepsWhatARankBehindMayStillFill) {
  SharedCores one(1, 2);
  EXPECT_EQ(one.run(0, 0, 10, 0), 10);
  EXPECT_EQ(one.run(0, 20, 5, 20), 25);  // rank 0 moved on, rank 1 may still compute at 0
  EXPECT_EQ(one.run(1, 5, 4, 5), 14);    // after rank 0's 0-10, which is kept
  EXPECT_EQ(one.run(1, 12, 8, 12), 27);  // 14-20, then 25-27
  EXPECT_THROW(SharedCores(0, 2), InputError);
}

// Four ranks, each 10 ms of modelled work from time 0: on 2 cores that all
// share, two end at 10 ms and two at 20; on 4, all at 10 ms; a rank alone
// on them (the others wait) computes at once.
TEST(SimTransport, RanksShareTheSharedCores) {
  const NetModel net = parse_net_model("10gbit,20us");
  for (const auto& [cores, ends] : {std::pair{2, std::vector{10e-3, 10e-3, 20e-3, 20e-3}},
                                    {4, std::vector{10e-3, 10e-3, 10e-3, 10e-3}}}) {
    SharedCores shared(cores, 4);
    std::vector<double> got(4);
    run_local(4, [&](Transport& t) {
      SimTransport sim(t, net, 0, 0, &shared);
      sim.advance(10e-3);
      got[static_cast<std::size_t>(t.rank())] = sim.now();
    });
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, ends) << cores << " cores";
  }
  SharedCores shared(1, 2);
  run_local(2, [&](Transport& t) {
    SimTransport sim(t, net, 0, 0, &shared);
    if (t.rank() == 0) {
      sim.advance(10e-3);
      EXPECT_DOUBLE_EQ(sim.now(), 10e-3);
    }
  });
  run_local(1, [&](Transport& t) { EXPECT_THROW(SimTransport(t, net, 0, 1, &shared), InputError); });
}

}  // namespace
}  // namespace sparq
