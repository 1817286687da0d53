// The virtual clock against closed forms of the alpha-beta model
// (SparCML section 5.3): one message, incast, and the dense allreduce
// algorithms, on up to 256 in-process ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <thread>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/comm_engine.h"
#include "sparq/coll/sparse_allreduce.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/transport/local_transport.h"
#include "sparq/transport/sim_transport.h"

namespace sparq {
namespace {

const NetModel kNet = parse_net_model("10gbit,20us");

// Runs fn on P simulated ranks (clocks at 0) and returns the latest clock.
double simulate(int p, const std::function<void(SimTransport&)>& fn) {
  std::vector<double> end(p);
  run_local(p, [&](Transport& t) {
    SimTransport sim(t, kNet);
    fn(sim);
    end[t.rank()] = sim.now();
  });
  return *std::max_element(end.begin(), end.end());
}

TEST(NetModel, Parses) {
  EXPECT_DOUBLE_EQ(kNet.alpha_s, 20e-6);
  EXPECT_DOUBLE_EQ(kNet.beta_s_per_b, 8.0 / 10e9);
  const NetModel m = parse_net_model("2GBps,1ms");
  EXPECT_DOUBLE_EQ(m.alpha_s, 1e-3);
  EXPECT_DOUBLE_EQ(m.beta_s_per_b, 0.5e-9);
  EXPECT_DOUBLE_EQ(parse_net_model("100mbit,0s").beta_s_per_b, 8.0 / 100e6);
  EXPECT_EQ(m.cpu_s_per_b, 0);
  EXPECT_DOUBLE_EQ(parse_net_model("1gbit,50us,0.7ns").cpu_s_per_b, 0.7e-9);
  EXPECT_EQ(parse_net_model("1gbit,50us,0.7ns").describe(), "1gbit,50us,0.7ns");
  EXPECT_EQ(m.cpu_s_per_msg, 0);
  EXPECT_DOUBLE_EQ(parse_net_model("1gbit,50us,0.7ns,4us").cpu_s_per_msg, 4e-6);
  EXPECT_EQ(parse_net_model("1gbit,50us,0.7ns,4us").describe(), "1gbit,50us,0.7ns,4us");
  EXPECT_EQ(parse_net_model("1gbit,50us,0ns,4us").describe(), "1gbit,50us,0ns,4us");
  EXPECT_EQ(m.coll_latency_s, 0);
  EXPECT_DOUBLE_EQ(parse_net_model("1gbit,50us,0.7ns,4us,300us").coll_latency_s, 300e-6);
  EXPECT_EQ(parse_net_model("1gbit,50us,0.7ns,4us,300us").describe(), "1gbit,50us,0.7ns,4us,300us");
  EXPECT_EQ(parse_net_model("1gbit,50us,0ns,0us,1ms").describe(), "1gbit,50us,0ns,0us,1000us");
  for (const char* bad : {"10gbit", "10gbit,20", "10gb,20us", "fast,20us", "0gbit,1us", "-1gbit,1us", "10gbit,x",
                          "1gbit,50us,1", "1gbit,50us,1ns,2", "1gbit,50us,1ns,2us,3", "1gbit,50us,1ns,2us,3us,4us",
                          "1gbit,50us,-1ns", "1gbit,50us,1ns,-2us", "1gbit,50us,1ns,2us,-3us"})
    EXPECT_THROW(parse_net_model(bad), InputError) << bad;
}

TEST(SimTransport, OneMessage) {
  const std::size_t b = 1 << 20;
  std::vector<double> end(2);
  run_local(2, [&](Transport& t) {
    SimTransport sim(t, kNet);
    std::vector<std::byte> buf(b, std::byte{7});
    if (t.rank() == 0) sim.send(1, 1, buf);
    else sim.recv(0, 1, buf);
    EXPECT_EQ(buf[b - 1], std::byte{7});
    EXPECT_EQ(sim.counters().total().bytes_sent + sim.counters().total().bytes_recv, b);  // header not counted
    end[t.rank()] = sim.now();
  });
  EXPECT_DOUBLE_EQ(end[0], b * kNet.beta_s_per_b);                 // sender: its link was busy
  EXPECT_DOUBLE_EQ(end[1], kNet.alpha_s + b * kNet.beta_s_per_b);  // receiver: alpha + b*beta
}

// With a CPU cost per message and per byte the sender computes it before its
// message leaves and the receiver after the message arrives.
TEST(SimTransport, NetworkStackCpuAtBothEnds) {
  const NetModel net = parse_net_model("10gbit,20us,2ns,30us");
  const std::size_t b = 1 << 20;
  const double stack = 30e-6 + b * 2e-9;
  for (const double scale : {0.0, 3.0}) {  // CPU time unscaled when computation is not modelled
    const double cpu = stack * (scale > 0 ? scale : 1);
    std::vector<double> end(2);
    run_local(2, [&](Transport& t) {
      SimTransport sim(t, net, scale);
      std::vector<std::byte> buf(b);
      if (t.rank() == 0) sim.send(1, 1, buf);
      else sim.recv(0, 1, buf);
      end[t.rank()] = sim.now();
    });
    // The threads' own CPU time (scale > 0) only adds: a few ms at most here.
    EXPECT_GE(end[0], cpu + b * net.beta_s_per_b) << scale;
    EXPECT_GE(end[1], cpu + net.alpha_s + b * net.beta_s_per_b + cpu) << scale;
    if (scale == 0) {
      EXPECT_DOUBLE_EQ(end[0], cpu + b * net.beta_s_per_b);
      EXPECT_DOUBLE_EQ(end[1], cpu + net.alpha_s + b * net.beta_s_per_b + cpu);
    }
  }
}

TEST(SimTransport, IncastSerialisesOnTheReceiverLink) {
  const std::size_t b = 1 << 16;
  const double t = simulate(4, [&](SimTransport& sim) {
    std::vector<std::byte> buf(b);
    if (sim.rank() > 0) {
      sim.send(0, 2, buf);
    } else {
      for (int s = 1; s < 4; ++s) sim.recv(s, 2, buf);
    }
  });
  EXPECT_DOUBLE_EQ(t, kNet.alpha_s + 3 * b * kNet.beta_s_per_b);
}

TEST(SimTransport, AdvanceAddsComputeTime) {
  const double t = simulate(2, [](SimTransport& sim) {
    if (sim.rank() == 0) sim.advance(1e-3);
    std::vector<std::byte> one(1);
    if (sim.rank() == 0) sim.send(1, 3, one);
    else sim.recv(0, 3, one);
  });
  EXPECT_DOUBLE_EQ(t, 1e-3 + kNet.alpha_s + kNet.beta_s_per_b);
}

double allreduce_time(int p, std::size_t n, AllreduceAlgo algo) {
  return simulate(p, [&](SimTransport& sim) {
    std::vector<float> v(n, 1.0f);
    AllreduceOptions o;
    o.algo = algo;
    o.segment_bytes = n * sizeof(float);  // one segment per chunk: the textbook schedule
    const CollStats s = allreduce(sim, std::span<float>(v), o);
    EXPECT_EQ(v[0], static_cast<float>(p));
    ASSERT_TRUE(s.sim_seconds.has_value());
    EXPECT_DOUBLE_EQ(*s.sim_seconds, sim.now());
  });
}

TEST(SimTransport, RingClosedForm) {
  for (int p : {2, 3, 4, 8, 16, 64}) {
    const std::size_t n = 4096 * static_cast<std::size_t>(p);
    const double chunk = static_cast<double>(n / p * sizeof(float));
    EXPECT_NEAR(allreduce_time(p, n, AllreduceAlgo::Ring),
                2.0 * (p - 1) * (kNet.alpha_s + chunk * kNet.beta_s_per_b), 1e-12)
        << p;
  }
}

TEST(SimTransport, RecursiveDoublingAndRabenseifnerClosedForms) {
  for (int p : {2, 4, 8, 16, 64, 256}) {
    // 64 KiB at most: both terms count, and 256 ranks of 1 MiB each took
    // minutes under ThreadSanitizer.
    const std::size_t n = 1024 * static_cast<std::size_t>(std::min(p, 16));
    const double bytes = static_cast<double>(n * sizeof(float)), lg = std::log2(p);
    EXPECT_NEAR(allreduce_time(p, n, AllreduceAlgo::RecursiveDoubling),
                lg * (kNet.alpha_s + bytes * kNet.beta_s_per_b), 1e-12)
        << p;
    // SparCML's T_ar_rab = 2 log2(P) alpha + 2 (P-1)/P N beta.
    EXPECT_NEAR(allreduce_time(p, n, AllreduceAlgo::Rabenseifner),
                2 * lg * kNet.alpha_s + 2.0 * (p - 1) / p * bytes * kNet.beta_s_per_b, 1e-12)
        << p;
  }
}

TEST(SimTransport, CorruptTimingHeaderIsAWireError) {
  run_local(2, [](Transport& t) {
    SimTransport sim(t, kNet);
    if (t.rank() == 0) {
      const double bad = std::nan("");
      t.send(1, 4, std::as_bytes(std::span<const double>(&bad, 1)));  // bypasses the header
      t.send(1, 5, std::span<const std::byte>());                      // too short for one
    } else {
      std::vector<std::byte> none;
      EXPECT_THROW(sim.recv(0, 4, none), WireError);
      EXPECT_THROW(sim.recv_message(0, 5), WireError);
    }
  });
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// SparCML section 5.3.1: with no overlapping indices, ssar-recursive-double
// sends 2^(t-1) k pairs at stage t, so T = log2(P) alpha + (P-1) k beta_s
// (beta_s: one pair), plus our 12-byte stream header per stage. A pair here
// is a 4-byte value and a 1-byte index: the disjoint indices are P apart, so
// every delta-varint gap fits one byte.
TEST(SimTransport, SparseRecursiveDoubleClosedForm) {
  for (int p : {2, 4, 8, 16, 32}) {
    const std::size_t n = 1 << 20, k = 1000;
    const double t = simulate(p, [&](SimTransport& sim) {
      std::vector<std::uint32_t> idx(k);
      for (std::size_t i = 0; i < k; ++i) idx[i] = static_cast<std::uint32_t>(i * p + sim.rank());  // disjoint
      const auto in = compress::SparseStream::sparse(n, idx, std::vector<float>(k, 1.0f));
      compress::SparseStream out;
      SparseAllreduceOptions o;
      o.algo = SparseAlgo::SsarRecursiveDouble;
      sparse_allreduce(sim, in, out, o);
      EXPECT_EQ(out.nnz(), k * p);
    });
    const double lg = std::log2(p), pair = 1 + 4;
    EXPECT_NEAR(t, lg * kNet.alpha_s + ((p - 1) * k * pair + 12 * lg) * kNet.beta_s_per_b, 1e-12) << p;
  }
}

// With fully overlapping indices (7 apart: 1-byte varints) the same algorithm
// sends k pairs per stage:
// SparCML's lower bound log2(P) (alpha + k beta_s).
TEST(SimTransport, SparseRecursiveDoubleFullOverlap) {
  for (int p : {2, 8}) {
    const std::size_t n = 1 << 20, k = 1000;
    const double t = simulate(p, [&](SimTransport& sim) {
      std::vector<std::uint32_t> idx(k);
      for (std::size_t i = 0; i < k; ++i) idx[i] = static_cast<std::uint32_t>(i * 7);
      const auto in = compress::SparseStream::sparse(n, idx, std::vector<float>(k, 1.0f));
      compress::SparseStream out;
      SparseAllreduceOptions o;
      o.algo = SparseAlgo::SsarRecursiveDouble;
      sparse_allreduce(sim, in, out, o);
    });
    EXPECT_NEAR(t, std::log2(p) * (kNet.alpha_s + (12 + k * 5.0) * kNet.beta_s_per_b), 1e-12) << p;
  }
}

// A rank's training thread and its CommEngine are two timelines: a job starts
// at its submitter's clock, and wait() moves the waiter to the job's end. Two
// ranks exchange b bytes (full duplex) after 10 ms of computation; with a
// latency a collective (the network's fifth field) each job ends that much
// after its messages, with no core busy: on a host of one core, where the
// training thread computes meanwhile, the job ends no later.
TEST(SimTransport, EngineOverlapsOnTheVirtualClock) {
  for (const char* spec : {"1gbit,100us", "1gbit,100us,0ns,0us,1ms"})
    for (const int cores : {0, 1}) {
      const NetModel net = parse_net_model(spec);
      const std::size_t b = 625000;  // 5 ms on the wire
      const double comm = net.coll_latency_s + net.alpha_s + b * net.beta_s_per_b;
      for (const double more : {2e-3, 8e-3}) {  // computation after the submit: less or more than the exchange
        run_local(2, [&](Transport& t) {
          SimTransport sim(t, net, 0, cores);
          std::vector<std::byte> out(b), in(b);
          auto exchange = [&](Transport& tt) {
            Request s = tt.isend(1 - tt.rank(), 7, out);
            tt.recv(1 - tt.rank(), 7, in);
            s.wait(tt.timeout());
            return CollStats{};
          };
          sim.advance(10e-3);
          CommEngine e(sim);
          Work w = e.submit(exchange);
          sim.advance(more);
          w.wait();
          EXPECT_NEAR(sim.now(), 10e-3 + std::max(more, comm), 1e-12) << "rank " << t.rank() << ", " << more;
          // Two jobs in a row: the second starts when the first ends (one engine thread, one link).
          Work w1 = e.submit(exchange), w2 = e.submit(exchange);
          w2.wait();
          EXPECT_NEAR(sim.now(), 10e-3 + std::max(more, comm) + 2 * comm, 1e-12) << "rank " << t.rank() << ", " << spec;
        });
      }
    }
}

// Burns `seconds` of the calling thread's CPU.
void burn_cpu(double seconds) {
  timespec a{}, b{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  volatile double sink = 0;
  do {
    for (int i = 0; i < 10000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  } while ((b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec) < seconds);
}

// cpu_scale: computation is the CPU time a thread used between its calls,
// times the scale; sleeping is not computation.
TEST(SimTransport, ChargesEachThreadsCpuTime) {
  for (const double scale : {1.0, 2.5}) run_local(1, [&](Transport& t) {
    SimTransport sim(t, kNet, scale);
    const double t0 = sim.now();
    burn_cpu(0.03);
    const double t1 = sim.now();
    EXPECT_GE(t1 - t0, 0.03 * scale);
    EXPECT_LT(t1 - t0, 0.05 * scale);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_LT(sim.now() - t1, 0.005);
    // Another thread has its own clock, starting at 0 (its earlier work is not the rank's).
    std::thread([&] { EXPECT_LT(sim.now(), 0.005); }).join();
  });
}

// The emulation's own work inside the transport (copying a message into its
// queue with a timing header, copying it out, locks, waking the peer) is not
// a real host's: a 16 MiB exchange on an infinite network costs its two ranks
// the modelled network stack's CPU alone, where the in-process copies (into
// the queue with a timing header, out of it) take several ms each.
TEST(SimTransport, TheEmulationsOwnWorkIsNotCharged) {
  const NetModel net = parse_net_model("100000gbit,0us,0ns,100us");
  const std::size_t b = std::size_t{16} << 20;
  run_local(2, [&](Transport& t) {
    SimTransport sim(t, net, /*cpu_scale=*/1);
    std::vector<std::byte> out(b, std::byte{1}), in(b);
    const double t0 = sim.now();
    for (int i = 0; i < 3; ++i) {
      Request s = sim.isend(1 - t.rank(), 3, out);
      sim.recv(1 - t.rank(), 3, in);
      s.wait(sim.timeout());
    }
    EXPECT_EQ(in[b - 1], std::byte{1});
    // 3 x 100 us at each end, plus the loop's own few us and 16 MiB on the
    // 100 Tbit/s wire (1.3 us a message).
    EXPECT_GE(sim.now() - t0, 6 * 100e-6);
    EXPECT_LT(sim.now() - t0, 6 * 100e-6 + 2e-3) << "rank " << t.rank();
  });
}

// After virtual_idle() a thread's CPU is a hand-off's (it blocks on another
// thread of its rank), not computation, until its next call.
TEST(SimTransport, IdleIsNotCharged) {
  run_local(1, [&](Transport& t) {
    SimTransport sim(t, kNet, /*cpu_scale=*/1);
    const double t0 = sim.now();
    burn_cpu(0.02);
    const double t1 = sim.now();
    EXPECT_GE(t1 - t0, 0.02);
    sim.virtual_idle();
    burn_cpu(0.03);
    EXPECT_LT(sim.now() - t1, 0.005);  // the call ends the idle time: what follows is charged
    burn_cpu(0.02);
    EXPECT_GE(sim.now() - t1, 0.02);
  });
}

TEST(SimTransport, RejectsANegativeCpuScale) {
  run_local(1, [&](Transport& t) { EXPECT_THROW(SimTransport(t, kNet, -1), InputError); });
}

// The CPU a thread burns polling for a message is not computation: the
// receiver's clock ends at the message's arrival, not after its 200 ms of polling.
TEST(SimTransport, PollingIsNotCharged) {
  run_local(2, [&](Transport& t) {
    SimTransport sim(t, kNet, /*cpu_scale=*/1);
    std::vector<std::byte> one(1);
    if (t.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      sim.send(0, 5, one);
    } else {
      Request r = sim.irecv(1, 5, one);
      while (!r.test()) {
      }
      EXPECT_LT(sim.now(), 0.02);
    }
  });
}

// With kernel costs (kernel_costs.h) a kernel's fixed cost, times the scale,
// is what the clock charges for it, whatever CPU time it used.
TEST(SimTransport, ChargesAKernelItsFixedCost) {
  const std::string path = ::testing::TempDir() + "sim_kernel_costs.txt";
  KernelCosts().save(path);  // the header and this machine's CPU
  std::ofstream(path, std::ios::app) << "interaction_fwd 8 4 2 4 0 0.05\n";
  KernelCosts costs;
  costs.load(path);
  run_local(1, [&](Transport& t) {
    constexpr double kScale = 2;
    SimTransport sim(t, kNet, kScale);
    set_emulated_threads({1, nullptr, &costs});
    const double t0 = sim.now();
    {
      const ChargedKernel k("interaction_fwd", 8, 4, 2, 4);
      burn_cpu(0.005);
    }
    const double t1 = sim.now();
    set_emulated_threads({});
    EXPECT_GE(t1 - t0, kScale * 0.05);
    EXPECT_LT(t1 - t0, kScale * 0.052);  // the test's own CPU around the kernel
  });
}

// A parallel section (parallel_clock.h): its parts start together, each on a
// core of its own, so the thread's clock moves by the longest part; on one
// core they queue, so by their sum. The CPU the thread used inside the
// section is not charged again.
TEST(SimTransport, AParallelSectionCostsItsLongestPartOrTheirSumOnOneCore) {
  for (const int cores : {0, 1}) run_local(1, [&](Transport& t) {
    constexpr double kScale = 2;
    SimTransport sim(t, kNet, kScale, cores);
    const double c0 = thread_cpu_seconds();
    const double t0 = sim.now();
    sim.begin_parallel();
    const double c1 = thread_cpu_seconds();
    burn_cpu(0.02);  // what the parts really used: replaced by the parts' times below
    const double parts[] = {0.010, 0.004};
    sim.end_parallel(parts);
    const double c2 = thread_cpu_seconds();
    sim.advance(0.001);
    const double t1 = sim.now();
    const double c3 = thread_cpu_seconds();
    // On one core the worker's spin after the section delays what comes next.
    const double expect = kScale * (cores == 1 ? 0.014 : 0.010) + 0.001 + (cores == 1 ? kWorkerSpinSeconds : 0);
    // Outside the section the thread's own CPU is charged too; under a
    // sanitizer on a loaded machine that is not negligible, so it is measured.
    const double own = kScale * ((c1 - c0) + (c3 - c2));
    // Each part is charged less the cost of reading its CPU clock (< 1 us).
    EXPECT_GE(t1 - t0, expect - 1e-5) << cores << " cores";
    EXPECT_LE(t1 - t0, expect + own + 3e-5) << cores << " cores";
  });
}

}  // namespace
}  // namespace sparq
