// GroupTransport over a parent transport: rank mapping, the D x M grid
// groups, collectives and point-to-point inside groups used at once, and
// counters per group vs the parent's. Every grid whose rank count fits this
// process runs: all of them on threads, the MPI world's own under mpiexec.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "sparq/coll/allreduce.h"
#include "sparq/transport/group_transport.h"
#include "sparq/transport/net_model.h"
#include "sparq/transport/sim_transport.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

struct Grid {
  int d, m;
  int p() const { return d * m; }
};

// All D x M factorisations of the rank counts this process can run.
std::vector<Grid> runnable_grids() {
  std::vector<Grid> gs;
  for (int p : {1, 2, 3, 4, 5, 6, 8}) {
    if (!test::ranks_available(p)) continue;
    for (int d = 1; d <= p; ++d)
      if (p % d == 0) gs.push_back({d, p / d});
  }
  return gs;
}

// Tests that need some number of ranks, not a particular one, use the MPI
// world's under mpiexec, `local` otherwise.
int world_or(int local) { return test::under_mpi() ? test::mpi_world_size() : local; }

// Rank r's contribution: small integers, so float sums are exact in any order.
std::vector<float> contribution(int r, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((r * 7 + static_cast<int>(i) * 3) % 101);
  return v;
}

std::vector<float> reference_sum(const std::vector<int>& ranks, std::size_t n) {
  std::vector<float> s(n, 0.0f);
  for (int r : ranks) {
    const auto c = contribution(r, n);
    for (std::size_t i = 0; i < n; ++i) s[i] += c[i];
  }
  return s;
}

TEST(GridGroup, Layout) {
  // 2 replicas x 3 stages: ranks 0 1 2 | 3 4 5.
  EXPECT_EQ(grid_group(6, 2, 3, 4, GridAxis::Stage), (std::vector<int>{1, 4}));
  EXPECT_EQ(grid_group(6, 2, 3, 4, GridAxis::Replica), (std::vector<int>{3, 4, 5}));
  // 3 replicas x 2 stages: ranks 0 1 | 2 3 | 4 5.
  EXPECT_EQ(grid_group(6, 3, 2, 2, GridAxis::Stage), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(grid_group(6, 3, 2, 2, GridAxis::Replica), (std::vector<int>{2, 3}));
  EXPECT_EQ(grid_group(4, 4, 1, 3, GridAxis::Stage), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(grid_group(4, 4, 1, 3, GridAxis::Replica), (std::vector<int>{3}));
}

TEST(GridGroup, RejectsBadGrids) {
  EXPECT_THROW(grid_group(6, 2, 2, 0, GridAxis::Stage), InputError);
  EXPECT_THROW(grid_group(4, 0, 4, 0, GridAxis::Stage), InputError);
  EXPECT_THROW(grid_group(4, -2, -2, 0, GridAxis::Replica), InputError);
  EXPECT_THROW(grid_group(4, 2, 2, 4, GridAxis::Replica), InputError);
  EXPECT_THROW(grid_group(4, 2, 2, -1, GridAxis::Stage), InputError);
}

TEST(GroupTransport, RejectsBadMembers) {
  const int p = world_or(3);
  if (p < 2) GTEST_SKIP() << "needs 2 ranks or more";
  test::run_ranks(p, [p](Transport& t) {
    const int me = t.rank();
    EXPECT_THROW(GroupTransport(t, {}), InputError);
    EXPECT_THROW(GroupTransport(t, {me, me}), InputError);
    EXPECT_THROW(GroupTransport(t, {me, p}), InputError);
    EXPECT_THROW(GroupTransport(t, {-1, me}), InputError);
    EXPECT_THROW(GroupTransport(t, {(me + 1) % p}), InputError);  // not containing self
    EXPECT_NO_THROW(GroupTransport(t, {me}));
  });
}

TEST(GroupTransport, MapsRanksAndInheritsFromParent) {
  for (const Grid g : runnable_grids()) {
    SCOPED_TRACE(::testing::Message() << g.d << "x" << g.m);
    test::run_ranks(g.p(), [&](Transport& t) {
      const int me = t.rank();
      GroupTransport stage(t, grid_group(g.p(), g.d, g.m, me, GridAxis::Stage));
      GroupTransport replica(t, grid_group(g.p(), g.d, g.m, me, GridAxis::Replica));
      EXPECT_EQ(stage.size(), g.d);
      EXPECT_EQ(stage.rank(), me / g.m);  // its replica
      EXPECT_EQ(replica.size(), g.m);
      EXPECT_EQ(replica.rank(), me % g.m);  // its stage
      EXPECT_EQ(stage.members()[stage.rank()], me);
      EXPECT_EQ(stage.name(), "group(" + std::string(t.name()) + ")");
      EXPECT_EQ(stage.timeout(), Millis(4321));
      EXPECT_FALSE(stage.virtual_time().has_value());
    }, Millis(4321));
  }
}

// A group in reversed parent order: every group peer index must be mapped,
// also for receives of unknown size.
TEST(GroupTransport, PeersAreParentRanksInMemberOrder) {
  for (const Grid g : runnable_grids()) {
    if (g.d != 1) continue;  // one grid per rank count
    test::run_ranks(g.p(), [&](Transport& t) {
      std::vector<int> members(t.size());
      std::iota(members.rbegin(), members.rend(), 0);
      GroupTransport grp(t, members);
      const int n = grp.size(), right = (grp.rank() + 1) % n, left = (grp.rank() + n - 1) % n;
      const int me = t.rank();
      Request r = grp.irecv_message(left, 3);
      grp.send(right, 3, std::as_bytes(std::span<const int>(&me, 1)));
      r.wait(grp.timeout());
      const auto got = r.take_message();
      ASSERT_EQ(got.size(), sizeof(int));
      int from = -1;
      std::memcpy(&from, got.data(), sizeof(int));
      EXPECT_EQ(from, members[left]);
    });
  }
}

// Each rank's replica ring is posted, then its stage group's allreduce runs
// to completion, then the ring finishes: both groups in flight at once, on the
// same tag (legal: a stage and a replica group share no pair of ranks).
TEST(GroupTransport, StageAllreduceAndReplicaRingConcurrently) {
  const std::size_t n = 1003;  // not divisible by any group size here
  for (const AllreduceAlgo algo :
       {AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling, AllreduceAlgo::Rabenseifner}) {
    for (const Grid g : runnable_grids()) {
      SCOPED_TRACE(::testing::Message() << g.d << "x" << g.m << " " << allreduce_algo_name(algo));
      test::run_ranks(g.p(), [&](Transport& t) {
        const int me = t.rank(), tag = tags::kAllreduce;
        GroupTransport stage(t, grid_group(g.p(), g.d, g.m, me, GridAxis::Stage));
        GroupTransport replica(t, grid_group(g.p(), g.d, g.m, me, GridAxis::Replica));

        // Replica ring: pass each value m-1 hops to the right, summing.
        const int m = replica.size(), right = (replica.rank() + 1) % m, left = (replica.rank() + m - 1) % m;
        std::vector<float> ring_sum = contribution(me, n), passing = ring_sum, in(n);
        std::vector<Request> hop;
        if (m > 1) {
          hop.push_back(replica.irecv(left, tag, std::as_writable_bytes(std::span<float>(in))));
          hop.push_back(replica.isend(right, tag, std::as_bytes(std::span<const float>(passing))));
        }

        std::vector<float> reduced = contribution(me, n);
        AllreduceOptions o;
        o.algo = algo;
        o.tag = tag;
        o.segment_bytes = 256;  // several segments per ring chunk
        const CollStats s = allreduce(stage, std::span<float>(reduced), o);
        EXPECT_EQ(reduced, reference_sum(stage.members(), n));
        EXPECT_EQ(s.wire.msgs_sent == 0, stage.size() == 1);

        for (int step = 0; step + 1 < m; ++step) {
          wait_all(hop, replica.timeout());
          hop.clear();
          passing.swap(in);
          for (std::size_t i = 0; i < n; ++i) ring_sum[i] += passing[i];
          if (step + 2 < m) {
            hop.push_back(replica.irecv(left, tag, std::as_writable_bytes(std::span<float>(in))));
            hop.push_back(replica.isend(right, tag, std::as_bytes(std::span<const float>(passing))));
          }
        }
        EXPECT_EQ(ring_sum, reference_sum(replica.members(), n));
      });
    }
  }
}

// One ring exchange inside `grp`: (100 + parent rank) bytes to the right.
// Adds what it should count to `group` (per group peer) and `parent`.
void ring_exchange(GroupTransport& grp, int tag, std::vector<PeerCounters>& group, std::vector<PeerCounters>& parent) {
  const int n = grp.size(), right = (grp.rank() + 1) % n, left = (grp.rank() + n - 1) % n;
  const auto& mem = grp.members();
  const std::size_t out_n = 100 + mem[grp.rank()], in_n = 100 + mem[left];
  std::vector<std::byte> out(out_n), in(in_n);
  Request rs[2] = {grp.irecv(left, tag, in), grp.isend(right, tag, out)};
  wait_all(rs, grp.timeout());
  for (auto* c : {&group, &parent}) {
    const bool by_parent = c == &parent;
    (*c)[by_parent ? mem[right] : right] += PeerCounters{out_n, 0, 1, 0};
    (*c)[by_parent ? mem[left] : left] += PeerCounters{0, in_n, 0, 1};
  }
}

TEST(GroupTransport, CountersPerGroupAndInParent) {
  for (const Grid g : runnable_grids()) {
    SCOPED_TRACE(::testing::Message() << g.d << "x" << g.m);
    test::run_ranks(g.p(), [&](Transport& t) {
      const int me = t.rank();
      const TrafficCounters parent_before = t.counters();
      GroupTransport stage(t, grid_group(g.p(), g.d, g.m, me, GridAxis::Stage));
      GroupTransport replica(t, grid_group(g.p(), g.d, g.m, me, GridAxis::Replica));
      std::vector<PeerCounters> want_stage(stage.size()), want_replica(replica.size()), want_parent(t.size());

      ring_exchange(replica, 7, want_replica, want_parent);
      EXPECT_EQ(stage.counters().per_peer, want_stage);  // untouched by the replica group's traffic
      ring_exchange(stage, 8, want_stage, want_parent);
      ring_exchange(stage, 8, want_stage, want_parent);

      EXPECT_EQ(replica.counters().per_peer, want_replica);
      EXPECT_EQ(stage.counters().per_peer, want_stage);
      EXPECT_EQ((t.counters() - parent_before).per_peer, want_parent);
    });
  }
}

// Decorator order SimTransport -> group: the group reads the parent's clock.
TEST(GroupTransport, ForwardsVirtualTime) {
  const int p = world_or(2);
  if (p < 2) GTEST_SKIP() << "needs 2 ranks or more";
  test::run_ranks(p, [](Transport& t) {
    if (t.rank() >= 2) return;  // a 2-rank group of a larger world
    SimTransport sim(t, parse_net_model("1gbit,1ms"));
    GroupTransport grp(sim, {1, 0});
    std::vector<std::byte> b(1000);
    if (grp.rank() == 0) grp.send(1, 9, b);
    else grp.recv(0, 9, b);
    ASSERT_TRUE(grp.virtual_time().has_value());
    EXPECT_GT(*grp.virtual_time(), 0.0);
    EXPECT_EQ(*grp.virtual_time(), sim.now());
  });
}

// A size mismatch seen by the parent's receive surfaces through the group.
TEST(GroupTransport, WrongSizeIsAWireError) {
  const int p = world_or(2);
  if (p < 2) GTEST_SKIP() << "needs 2 ranks or more";
  test::run_ranks(p, [](Transport& t) {
    if (t.rank() >= 2) return;  // a 2-rank group of a larger world
    GroupTransport grp(t, {1, 0});
    if (grp.rank() == 0) {
      grp.send(1, 10, std::vector<std::byte>(16));
    } else {
      std::vector<std::byte> b(8);
      EXPECT_THROW(grp.recv(0, 10, b), WireError);
    }
  });
}

}  // namespace
}  // namespace sparq
