// Point-to-point semantics every transport must give the collectives:
// ordering, tag matching, exact sizes, unknown-size receives, counters,
// timeouts that name peer and tag, and (in-process) abort propagation.
// Under mpiexec the same tests run on MpiTransport.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>
#include <thread>

#include "sparq/coll/allreduce.h"
#include "sparq/transport/local_transport.h"
#include "sparq/transport/mpi_transport.h"
#include "tests/support/ranks.h"
#ifdef SPARQ_HAVE_GLOO
#include <gloo/rendezvous/hash_store.h>

#include "sparq/transport/gloo_transport.h"
#endif

namespace sparq {
namespace {

std::vector<std::byte> pattern_bytes(std::size_t n, int salt) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 13 + salt) & 0xff);
  return v;
}

TEST(Transport, MessagesOnOneTagArriveInOrder) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    constexpr int kMsgs = 20;
    if (t.rank() == 0) {
      std::vector<std::vector<std::byte>> bufs;
      for (int i = 0; i < kMsgs; ++i) bufs.push_back(pattern_bytes(100 + i * 1000, i));
      std::vector<Request> rs;
      for (auto& b : bufs) rs.push_back(t.isend(1, 5, b));
      wait_all(rs, t.timeout());
    } else {
      // Half posted before anything arrives, half after (unexpected queue).
      std::vector<std::vector<std::byte>> bufs(kMsgs);
      std::vector<Request> rs;
      for (int i = 0; i < kMsgs / 2; ++i) {
        bufs[i].resize(100 + i * 1000);
        rs.push_back(t.irecv(0, 5, bufs[i]));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (int i = kMsgs / 2; i < kMsgs; ++i) {
        bufs[i].resize(100 + i * 1000);
        rs.push_back(t.irecv(0, 5, bufs[i]));
      }
      wait_all(rs, t.timeout());
      for (int i = 0; i < kMsgs; ++i) EXPECT_EQ(bufs[i], pattern_bytes(100 + i * 1000, i)) << i;
    }
  });
}

TEST(Transport, TagsMatchIndependently) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    if (t.rank() == 0) {
      const auto a = pattern_bytes(64, 1), b = pattern_bytes(64, 2);
      t.send(1, 11, a);
      t.send(1, 12, b);
    } else {
      std::vector<std::byte> b(64), a(64);
      t.recv(0, 12, b);  // the later message first, by tag
      t.recv(0, 11, a);
      EXPECT_EQ(a, pattern_bytes(64, 1));
      EXPECT_EQ(b, pattern_bytes(64, 2));
    }
  });
}

TEST(Transport, WrongSizeIsAWireError) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    if (t.rank() == 0) {
      t.send(1, 21, pattern_bytes(100, 0));  // longer than expected
      t.send(1, 22, pattern_bytes(10, 0));   // shorter than expected
    } else {
      std::vector<std::byte> buf(50);
      EXPECT_THROW(t.recv(0, 21, buf), WireError);
      EXPECT_THROW(t.recv(0, 22, buf), WireError);
    }
  });
}

TEST(Transport, UnknownSizeReceive) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    const std::size_t sizes[] = {0, 1, 1000, 3 << 20};
    if (t.rank() == 0) {
      for (std::size_t n : sizes) t.send(1, 31, pattern_bytes(n, static_cast<int>(n)));
    } else {
      for (std::size_t n : sizes) EXPECT_EQ(t.recv_message(0, 31), pattern_bytes(n, static_cast<int>(n)));
    }
  });
}

TEST(Transport, CountsBytesAndMessagesPerPeer) {
  SPARQ_NEED_RANKS(3);
  test::run_ranks(3, [](Transport& t) {
    const TrafficCounters before = t.counters();
    const int right = (t.rank() + 1) % 3, left = (t.rank() + 2) % 3;
    const auto out = pattern_bytes(1000 + t.rank(), 0);
    std::vector<std::byte> in(1000 + left);
    Request rs[2] = {t.irecv(left, 41, in), t.isend(right, 41, out)};
    wait_all(rs, t.timeout());
    const TrafficCounters d = t.counters() - before;
    EXPECT_EQ(d.per_peer[right], (PeerCounters{1000u + t.rank(), 0, 1, 0}));
    EXPECT_EQ(d.per_peer[left], (PeerCounters{0, 1000u + left, 0, 1}));
    EXPECT_EQ(d.per_peer[t.rank()], PeerCounters{});
  });
}

TEST(Transport, RejectsBadPeerAndTag) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    std::vector<std::byte> b(4);
    EXPECT_THROW(t.isend(2, 1, b), Error);
    EXPECT_THROW(t.irecv(-1, 1, b), Error);
    EXPECT_THROW(t.isend(0, Transport::kMaxTag + 1, b), Error);
  });
}

// A peer that never sends: the receive fails with TimeoutError naming the
// peer and tag, after the timeout and not much later. Distinct tags keep the
// unmatched traffic of these tests away from every other test's.
TEST(Timeout, MissingSendNamesPeerAndTag) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    if (t.rank() == 1) return;  // skips its send
    std::vector<std::byte> b(8);
    const auto t0 = Clock::now();
    try {
      t.recv(1, 51, b);
      ADD_FAILURE() << "no timeout";
    } catch (const TimeoutError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
      EXPECT_NE(m.find("tag 51"), std::string::npos) << m;
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_GE(s, 0.29);
    EXPECT_LT(s, 10.0);
  }, Millis(300));
}

TEST(Timeout, CollectiveErrorNamesCollective) {
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [](Transport& t) {
    if (t.rank() == 1) return;  // never joins
    std::vector<float> v(16, 1.0f);
    AllreduceOptions o;
    o.algo = AllreduceAlgo::Ring;
    o.tag = 52;
    try {
      allreduce(t, std::span<float>(v), o);
      ADD_FAILURE() << "no timeout";
    } catch (const TimeoutError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("allreduce/ring"), std::string::npos) << m;
      EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
      EXPECT_NE(m.find("tag 52"), std::string::npos) << m;
    }
  }, Millis(300));
}

// In-process: when one rank fails, a rank blocked on it is woken at once
// (not after its timeout) and the original error is reported with its rank.
#ifdef SPARQ_HAVE_GLOO
// A rank that leaves (destroys its transport) first delivers what it sent
// and says goodbye, then waits for its peers' goodbyes (as MPI_Finalize
// waits); a receive from it that can no longer be matched fails at once
// with an error that says so, not at its deadline.
TEST(GlooTransport, PeerThatLeavesDeliversThenFailsReceivesAtOnce) {
  gloo::rendezvous::HashStore store;
  const GlooAddress lo{.iface = "", .hostname = "127.0.0.1"};
  const std::vector<float> sent{1.5f, -2.0f, 3.25f};
  std::vector<float> got(3);
  std::string error;
  double waited = -1;
  std::thread leaver([&] {
    GlooTransport t(store, 0, 2, lo, Millis{60000});
    t.send(1, 3, std::as_bytes(std::span(sent)));
  });  // leaves here
  std::thread stayer([&] {
    GlooTransport t(store, 1, 2, lo, Millis{60000});
    t.recv(0, 3, std::as_writable_bytes(std::span(got)));
    std::vector<float> never(1);
    const auto t0 = Clock::now();
    try {
      t.recv(0, 7, std::as_writable_bytes(std::span(never)));
    } catch (const Error& e) {
      error = e.what();
    }
    waited = seconds_since(t0);
  });
  stayer.join();
  leaver.join();
  EXPECT_EQ(got, sent);
  EXPECT_NE(error.find("rank 0 closed its connection"), std::string::npos) << error;
  EXPECT_NE(error.find("tag 7"), std::string::npos) << error;
  EXPECT_LT(waited, 30.0);  // the transport's timeout is 60 s
}
#endif

TEST(LocalWorld, FailureWakesOtherRanks) {
  SPARQ_LOCAL_ONLY();
  const auto t0 = Clock::now();
  try {
    run_local(3, [](Transport& t) {
      if (t.rank() == 1) SPARQ_THROW(InputError, "planned failure");
      std::vector<std::byte> b(4);
      t.recv(1, 61, b);
    }, Millis(60000));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("rank 1: planned failure", 0), 0u) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
}

TEST(LocalWorld, SendsBeforeReceivesDoNotDeadlock) {
  SPARQ_LOCAL_ONLY();
  run_local(4, [](Transport& t) {
    // Everyone sends to everyone first (eager), then receives.
    const auto out = pattern_bytes(1 << 20, t.rank());
    for (int d = 0; d < t.size(); ++d) t.send(d, 71, out);
    for (int s = 0; s < t.size(); ++s) {
      std::vector<std::byte> in(1 << 20);
      t.recv(s, 71, in);
      EXPECT_EQ(in, pattern_bytes(1 << 20, s));
    }
  });
}

// Open MPI's TCP eager limit: raised to 4 MiB before MPI_Init, each of the
// three parameters left as the user set it (mpirun --mca sets the same
// variables). Under mpiexec the session already ran it at start.
TEST(MpiSession, RaisesTheTcpEagerLimitUnlessTheUserSetIt) {
  const char* names[] = {"OMPI_MCA_btl_tcp_eager_limit", "OMPI_MCA_btl_tcp_rndv_eager_limit",
                         "OMPI_MCA_btl_tcp_max_send_size"};
  std::optional<std::string> saved[3];
  for (int i = 0; i < 3; ++i)
    if (const char* v = std::getenv(names[i])) saved[i] = v;
  unsetenv(names[0]);
  unsetenv(names[1]);
  setenv(names[2], "131072", 1);
  MpiSession::tune_tcp();
  EXPECT_STREQ(std::getenv(names[0]), "4194304");
  EXPECT_STREQ(std::getenv(names[1]), "4194304");
  EXPECT_STREQ(std::getenv(names[2]), "131072");
  for (int i = 0; i < 3; ++i) saved[i] ? setenv(names[i], saved[i]->c_str(), 1) : unsetenv(names[i]);
}

}  // namespace
}  // namespace sparq
