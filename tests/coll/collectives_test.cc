// reduce_scatter, allgather(v), alltoall(v), broadcast and barrier against
// plain references, over the rank counts of the sweep.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "sparq/coll/allgather.h"
#include "sparq/coll/alltoall.h"
#include "sparq/coll/broadcast.h"
#include "sparq/coll/patterns.h"
#include "sparq/coll/reduce_scatter.h"
#include "sparq/transport/local_transport.h"
#include "tests/coll/reference.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

const int kRanks[] = {1, 2, 3, 4, 5, 7, 8, 16};

std::vector<std::size_t> counts_for(int p) {
  return {0, 1, static_cast<std::size_t>(p > 1 ? p - 1 : 2), 1000 * static_cast<std::size_t>(p) + 3, 1 << 18};
}

TEST(ReduceScatter, MatchesReference) {
  for (int p : kRanks) {
    if (!test::ranks_available(p)) continue;
    for (std::size_t n : counts_for(p)) {
      SCOPED_TRACE(testing::Message() << "P=" << p << " n=" << n);
      const auto ref = test::reference_reduce<double>(n, p, ReduceOp::Sum);
      test::run_ranks(p, [&](Transport& t) {
        const auto in = test::rank_input<double>(n, t.rank());
        std::vector<double> out(reduce_scatter_block_len(n, p, t.rank()));
        ReduceScatterOptions o;
        o.segment_bytes = 1024;
        reduce_scatter(t, std::span<const double>(in), std::span<double>(out), o);
        const std::size_t off = pattern::Partition{n, p}.offset(t.rank());
        for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref.value[off + i], ref.tolerance[off + i]);
        std::vector<double> wrong(out.size() + 1);
        EXPECT_THROW(reduce_scatter(t, std::span<const double>(in), std::span<double>(wrong)), InputError);
      });
    }
  }
}

TEST(ReduceScatter, InPlace) {
  for (int p : {1, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    const std::size_t n = 1001;
    const auto ref = test::reference_reduce<std::int64_t>(n, p, ReduceOp::Sum);
    test::run_ranks(p, [&](Transport& t) {
      auto buf = test::rank_input<std::int64_t>(n, t.rank());
      const pattern::Partition part{n, p};
      std::span<std::int64_t> mine(buf.data() + part.offset(t.rank()), part.len(t.rank()));
      reduce_scatter(t, std::span<const std::int64_t>(buf), mine);
      for (std::size_t i = 0; i < mine.size(); ++i) ASSERT_EQ(mine[i], ref.value[part.offset(t.rank()) + i]);
    });
  }
}

TEST(Allgather, InPlace) {
  for (int p : {1, 2, 5}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      std::vector<int> out(7 * p, -1);
      std::fill_n(out.begin() + 7 * t.rank(), 7, t.rank());
      allgather(t, std::span<const int>(out.data() + 7 * t.rank(), 7), std::span<int>(out));
      for (int r = 0; r < p; ++r) EXPECT_EQ(out[7 * r + 6], r);
    });
  }
}

TEST(Alltoall, InPlace) {
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      std::vector<double> buf(3 * p);
      for (int d = 0; d < p; ++d) buf[3 * d] = buf[3 * d + 2] = t.rank() * 100 + d;
      alltoall(t, std::span<const double>(buf), std::span<double>(buf));
      for (int s = 0; s < p; ++s) EXPECT_EQ(buf[3 * s + 2], s * 100 + t.rank());
    });
  }
}

TEST(Allgatherv, UnevenBlocksIncludingEmpty) {
  for (int p : kRanks) {
    if (!test::ranks_available(p)) continue;
    for (std::size_t scale : {0ul, 1ul, 5000ul}) {
      // Rank i contributes (i % 3) * scale elements: some give nothing.
      std::vector<std::size_t> counts(p);
      for (int i = 0; i < p; ++i) counts[i] = static_cast<std::size_t>(i % 3) * scale;
      const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
      SCOPED_TRACE(testing::Message() << "P=" << p << " total=" << total);
      test::run_ranks(p, [&](Transport& t) {
        const auto mine = test::rank_input<std::int64_t>(counts[t.rank()], t.rank());
        std::vector<std::int64_t> out(total);
        AllgatherOptions o;
        o.segment_bytes = 4096;
        allgatherv(t, std::span<const std::int64_t>(mine), std::span<std::int64_t>(out),
                   std::span<const std::size_t>(counts), o);
        std::size_t at = 0;
        for (int r = 0; r < p; ++r) {
          const auto expect = test::rank_input<std::int64_t>(counts[r], r);
          for (std::size_t i = 0; i < counts[r]; ++i) ASSERT_EQ(out[at + i], expect[i]) << "block " << r;
          at += counts[r];
        }
      });
    }
  }
}

TEST(Allgather, EqualBlocks) {
  for (int p : kRanks) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      const std::vector<float> mine(33, static_cast<float>(t.rank()));
      std::vector<float> out(33 * p);
      allgather(t, std::span<const float>(mine), std::span<float>(out));
      for (int r = 0; r < p; ++r) EXPECT_EQ(out[r * 33 + 32], static_cast<float>(r));
    });
  }
}

// alltoallv with per-pair sizes: rank s sends (s + 2d) % 5 * k bytes to d.
TEST(Alltoallv, VariableBlocks) {
  for (int p : kRanks) {
    if (!test::ranks_available(p)) continue;
    for (std::size_t k : {0ul, 1ul, 977ul}) {
      SCOPED_TRACE(testing::Message() << "P=" << p << " k=" << k);
      auto bytes = [&](int s, int d) { return static_cast<std::size_t>((s + 2 * d) % 5) * k; };
      auto value = [](int s, int d, std::size_t j) { return static_cast<std::byte>((s * 31 + d * 17 + j) & 0xff); };
      test::run_ranks(p, [&](Transport& t) {
        const int me = t.rank();
        std::vector<std::size_t> sc(p), rc(p);
        for (int d = 0; d < p; ++d) sc[d] = bytes(me, d), rc[d] = bytes(d, me);
        std::vector<std::byte> in, out(std::accumulate(rc.begin(), rc.end(), std::size_t{0}));
        for (int d = 0; d < p; ++d)
          for (std::size_t j = 0; j < sc[d]; ++j) in.push_back(value(me, d, j));
        alltoallv(t, in, sc, out, rc);
        std::size_t at = 0;
        for (int s = 0; s < p; ++s)
          for (std::size_t j = 0; j < rc[s]; ++j) ASSERT_EQ(out[at++], value(s, me, j)) << "from " << s;
      });
    }
  }
}

TEST(Alltoall, EqualBlocksAndNativeAgree) {
  for (int p : kRanks) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      std::vector<std::int32_t> in(4 * p), out(4 * p), native(4 * p);
      for (int d = 0; d < p; ++d)
        for (int j = 0; j < 4; ++j) in[d * 4 + j] = t.rank() * 1000 + d * 10 + j;
      alltoall(t, std::span<const std::int32_t>(in), std::span<std::int32_t>(out));
      for (int s = 0; s < p; ++s)
        for (int j = 0; j < 4; ++j) ASSERT_EQ(out[s * 4 + j], s * 1000 + t.rank() * 10 + j);
      if (test::under_mpi()) {
        AlltoallOptions o;
        o.algo = AlltoallAlgo::Native;
        alltoall(t, std::span<const std::int32_t>(in), std::span<std::int32_t>(native), o);
        EXPECT_EQ(native, out);
      }
    });
  }
}

TEST(Broadcast, EveryRootEveryRankCount) {
  for (int p : kRanks) {
    if (!test::ranks_available(p)) continue;
    for (int root = 0; root < p; root += (p > 4 ? 3 : 1)) {
      test::run_ranks(p, [&](Transport& t) {
        std::vector<double> buf = t.rank() == root ? test::rank_input<double>(5001, root) : std::vector<double>(5001);
        const CollStats s = broadcast(t, std::span<double>(buf), root);
        EXPECT_EQ(buf, test::rank_input<double>(5001, root));
        if (t.rank() != root) {
          EXPECT_EQ(s.wire.bytes_recv, 5001 * sizeof(double));
        }
      });
    }
  }
}

TEST(Broadcast, SizeMismatchIsAWireError) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    std::vector<float> buf(t.rank() == 0 ? 8 : 4);
    if (t.rank() == 0) broadcast(t, std::span<float>(buf), 0);
    else EXPECT_THROW(broadcast(t, std::span<float>(buf), 0), WireError);
  });
}

// Nobody leaves the barrier before everybody entered.
TEST(Barrier, NoRankLeavesEarly) {
  SPARQ_LOCAL_ONLY();
  for (int p : kRanks) {
    std::atomic<int> entered{0};
    run_local(p, [&](Transport& t) {
      for (int round = 1; round <= 3; ++round) {
        std::this_thread::sleep_for(std::chrono::microseconds(100 * t.rank()));
        entered.fetch_add(1);
        barrier(t);
        EXPECT_GE(entered.load(), round * p);
        barrier(t);  // keep the next round's increments out of this check
      }
    });
  }
}

}  // namespace
}  // namespace sparq
