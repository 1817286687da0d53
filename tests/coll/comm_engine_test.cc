// Non-blocking collectives on the communication thread: results equal the
// blocking ones, order is kept with several in flight, errors propagate, and
// computation overlaps communication; jobs charge with the rank's kernel
// costs.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <thread>

#include "sparq/coll/comm_engine.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/core/parallel_clock.h"
#include "tests/coll/reference.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

TEST(CommEngine, SeveralTensorsInFlight) {
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      // Three tensors of different sizes and algorithms, all submitted before any wait.
      std::vector<std::vector<float>> bufs;
      for (std::size_t n : {1000ul, 1ul, 300000ul}) bufs.push_back(test::rank_input<float>(n, t.rank(), n));
      std::vector<Work> works;
      CommEngine e(t);
      AllreduceAlgo algos[] = {AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling, AllreduceAlgo::Rabenseifner};
      for (int i = 0; i < 3; ++i) {
        AllreduceOptions o;
        o.algo = algos[i];
        works.push_back(iallreduce(e, std::span<float>(bufs[i]), o));
      }
      std::vector<std::int32_t> a2a_in(4 * p, t.rank()), a2a_out(4 * p);
      works.push_back(ialltoall(e, std::span<const std::int32_t>(a2a_in), std::span<std::int32_t>(a2a_out)));
      for (auto& w : works) w.wait();
      for (int i = 0; i < 3; ++i) {
        const std::size_t n = bufs[i].size();
        const auto ref = test::reference_reduce<float>(n, p, ReduceOp::Sum, n);
        for (std::size_t k = 0; k < n; ++k) ASSERT_NEAR(bufs[i][k], ref.value[k], ref.tolerance[k]);
      }
      for (int s = 0; s < p; ++s) EXPECT_EQ(a2a_out[4 * s], s);
    });
  }
}

// The communication thread charges its kernels with the kernel costs of the
// rank that made the engine (one thread: no emulated split), so a job's
// reductions cost the same on the virtual clock from run to run.
TEST(CommEngine, JobsChargeWithTheRanksKernelCosts) {
  SPARQ_NEED_RANKS(1);
  test::run_ranks(1, [&](Transport& t) {
    KernelCosts costs;
    set_emulated_threads({4, nullptr, &costs});
    CommEngine e(t);
    set_emulated_threads({});
    EmulatedThreads seen{};
    e.submit([&](Transport&) {
       seen = emulated_threads();
       return CollStats{};
     }).wait();
    EXPECT_EQ(seen.costs, &costs);
    EXPECT_EQ(seen.threads, 1);
    EXPECT_EQ(seen.clock, nullptr);
  });
}

// The sparse and quantized collectives in flight together give what their
// blocking forms give.
TEST(CommEngine, SparseAndQuantizedNonBlocking) {
  for (int p : {2, 3}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      const std::size_t n = 5000;
      std::vector<std::uint32_t> idx = {static_cast<std::uint32_t>(t.rank()), 4000, 4999};
      const auto in = compress::SparseStream::sparse(n, idx, {1.0f, 2.0f, 3.0f});
      auto dense = test::rank_input<float>(n, t.rank());
      auto blocking = dense;
      QuantizedAllreduceOptions q;
      q.codec = parse_codec("q8");
      quantized_allreduce(t, std::span<float>(blocking), q);
      compress::SparseStream out;
      {
        CommEngine e(t);
        Work a = isparse_allreduce(e, in, out);
        Work b = iquantized_allreduce(e, std::span<float>(dense), q);
        b.wait();
        a.wait();
      }
      EXPECT_EQ(dense, blocking);
      std::vector<float> got(n);
      out.to_dense(got);
      EXPECT_EQ(got[4000], 2.0f * p);
      EXPECT_EQ(got[4999], 3.0f * p);
      for (int r = 0; r < p; ++r) EXPECT_EQ(got[r], 1.0f);
    });
  }
}

TEST(CommEngine, ErrorPropagatesToThisAndLaterWork) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    CommEngine e(t);
    std::vector<float> a(10), b(9), c(4);
    Work bad = iallreduce(e, std::span<const float>(a), std::span<float>(b));  // sizes differ
    AllreduceOptions o;
    o.tag = 81;  // never matched by anything else should a peer's message stay queued
    Work later = iallreduce(e, std::span<float>(c), o);
    EXPECT_THROW(bad.wait(), InputError);
    EXPECT_THROW(later.wait(), InputError);
    EXPECT_TRUE(later.test());
  });
}

// The thread runs at the nice value asked for, read back by getpriority on
// the thread itself, or says why not (an unprivileged user); the caller's
// own priority is untouched. Out of [-20, 0] is refused.
TEST(CommEngine, RunsAtTheRequestedPriorityOrSaysWhyNot) {
  SPARQ_NEED_RANKS(1);
  test::run_ranks(1, [](Transport& t) {
    const int mine = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    CommEngine e(t, -3);
    int seen = 0;
    e.submit([&](Transport&) {
       seen = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
       return CollStats{};
     }).wait();
    if (e.priority_note().empty())
      EXPECT_EQ(seen, -3);
    else
      EXPECT_NE(e.priority_note().find("CAP_SYS_NICE"), std::string::npos) << e.priority_note();
    EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid())), mine);
    CommEngine plain(t);
    EXPECT_TRUE(plain.priority_note().empty());
    EXPECT_THROW(CommEngine(t, 1), InputError);
    EXPECT_THROW(CommEngine(t, -21), InputError);
  });
}

// compute + collective in flight takes less wall time than compute then
// collective. "Compute" is a sleep as long as one collective, so the ideal
// ratio is 1/2. The machine is shared and noisy, so the test passes if any of
// five attempts shows overlap; without overlap the ratio never drops below 1.
TEST(CommEngine, OverlapsComputation) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    std::vector<float> v(8 << 20, 1.0f);  // 32 MiB
    AllreduceOptions o;
    o.algo = AllreduceAlgo::Ring;
    auto seconds = [](auto f) {
      const auto t0 = Clock::now();
      f();
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    CommEngine e(t);
    std::string log;
    bool overlapped_once = false;
    for (int attempt = 0; attempt < 5; ++attempt) {
      const double comm = seconds([&] { iallreduce(e, std::span<float>(v), o).wait(); });
      const auto compute = std::chrono::duration<double>(comm);
      const double serial = seconds([&] {
        std::this_thread::sleep_for(compute);
        iallreduce(e, std::span<float>(v), o).wait();
      });
      const double overlapped = seconds([&] {
        Work w = iallreduce(e, std::span<float>(v), o);
        std::this_thread::sleep_for(compute);
        w.wait();
      });
      log += fmt::format(" [comm {:.3f} s, serial {:.3f} s, overlapped {:.3f} s]", comm, serial, overlapped);
      // Both ranks must agree on the verdict, or one would leave the loop
      // while the other still submits collectives.
      double ok = overlapped < 0.8 * serial ? 1 : 0;
      AllreduceOptions all;
      all.op = ReduceOp::Min;
      iallreduce(e, std::span<double>(&ok, 1), all).wait();
      if (ok == 1) {
        overlapped_once = true;
        break;
      }
    }
    EXPECT_TRUE(overlapped_once) << log;
  });
}

}  // namespace
}  // namespace sparq
