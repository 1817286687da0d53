// Allreduce against the sequential reference, swept over rank counts x
// counts x in-place x algorithm x dtype x op: exact for integers, within the
// summation-order bound for floats, bit-identical on every rank and across
// repeated runs. Under mpiexec the same sweep runs on MpiTransport and is
// compared bit for bit with the in-process (LocalTransport) run.
#include <gtest/gtest.h>

#include <cstring>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/broadcast.h"
#include "sparq/core/dtype.h"
#include "sparq/transport/local_transport.h"
#include "tests/coll/reference.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

using test::reference_reduce;

std::vector<std::size_t> sweep_counts(int p) {
  return {0, 1, static_cast<std::size_t>(p > 1 ? p - 1 : 2), 1000 * static_cast<std::size_t>(p) + 3, 1 << 20};
}

// Bitwise equality (-0.0 and +0.0 differ here, unlike with ==).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Every rank's result, gathered for comparison: bitwise equal on all ranks.
template <class T>
void expect_same_on_all_ranks(Transport& t, const std::vector<T>& out) {
  std::vector<T> root(out);
  broadcast(t, std::span<T>(root), 0);
  EXPECT_TRUE(same_bits(root, out)) << "rank " << t.rank() << " differs";
}

template <class T>
std::vector<T> run_one(Transport& t, std::size_t n, bool in_place, const AllreduceOptions& o) {
  const auto in = test::rank_input<T>(n, t.rank());
  std::vector<T> out(n, T(-7));
  if (in_place) {
    out = in;
    allreduce(t, std::span<T>(out), o);
  } else {
    allreduce(t, std::span<const T>(in), std::span<T>(out), o);
  }
  return out;
}

template <class T>
void sweep(AllreduceAlgo algo, int p) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    for (std::size_t n : sweep_counts(p)) {
      if (op != ReduceOp::Sum && n > 4096) continue;  // min/max share every code path with sum
      const auto ref = reference_reduce<T>(n, p, op);
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype_of<T>()) << " op=" << reduce_op_name(op) << " n=" << n
                                        << " in_place=" << in_place);
        AllreduceOptions o;
        o.algo = algo;
        o.op = op;
        o.segment_bytes = 4096;  // several segments per chunk even at small counts
        std::vector<std::vector<T>> local(p);  // in-process results, for the MPI comparison
        if (test::under_mpi())
          run_local(p, [&](Transport& t) { local[t.rank()] = run_one<T>(t, n, in_place, o); });
        test::run_ranks(p, [&](Transport& t) {
          const auto out = run_one<T>(t, n, in_place, o);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < n; ++i)
            if (!(std::abs(static_cast<double>(out[i]) - static_cast<double>(ref.value[i])) <= ref.tolerance[i]))
              ++bad;
          EXPECT_EQ(bad, 0u) << "rank " << t.rank();
          expect_same_on_all_ranks(t, out);
          const auto again = run_one<T>(t, n, in_place, o);
          EXPECT_TRUE(same_bits(again, out)) << "not repeatable";
          if (test::under_mpi()) {
            EXPECT_TRUE(same_bits(local[t.rank()], out)) << "MPI and in-process results differ";
          }
        });
      }
    }
  }
}

struct AllreduceCase {
  AllreduceAlgo algo;
  int ranks;
};
void PrintTo(const AllreduceCase& c, std::ostream* os) {
  *os << allreduce_algo_name(c.algo) << " on " << c.ranks << " ranks";
}

class AllreduceSweep : public testing::TestWithParam<AllreduceCase> {};

TEST_P(AllreduceSweep, MatchesSequentialReference) {
  const AllreduceCase c = GetParam();
  SPARQ_NEED_RANKS(c.ranks);
  sweep<float>(c.algo, c.ranks);
  sweep<double>(c.algo, c.ranks);
  sweep<std::int32_t>(c.algo, c.ranks);
  sweep<std::int64_t>(c.algo, c.ranks);
}

std::vector<AllreduceCase> all_cases() {
  std::vector<AllreduceCase> v;
  for (AllreduceAlgo a : {AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling, AllreduceAlgo::Rabenseifner,
                          AllreduceAlgo::Auto})
    for (int p : {1, 2, 3, 4, 5, 7, 8, 16}) v.push_back({a, p});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, AllreduceSweep, testing::ValuesIn(all_cases()), [](const auto& info) {
  std::string name(allreduce_algo_name(info.param.algo));
  std::erase(name, '-');
  return name + "_P" + std::to_string(info.param.ranks);
});

TEST(Allreduce, MinOpOnIntegers) {
  SPARQ_NEED_RANKS(5);
  const auto ref = reference_reduce<std::int32_t>(777, 5, ReduceOp::Min);
  for (AllreduceAlgo a : {AllreduceAlgo::Ring, AllreduceAlgo::RecursiveDoubling, AllreduceAlgo::Rabenseifner}) {
    test::run_ranks(5, [&](Transport& t) {
      AllreduceOptions o;
      o.algo = a;
      o.op = ReduceOp::Min;
      EXPECT_EQ(run_one<std::int32_t>(t, 777, false, o), ref.value);
    });
  }
}

// Ring moves 2(P-1)/P of the data per rank, read off the transport counters.
TEST(Allreduce, RingBytesOnTheWire) {
  for (int p : {2, 3, 4, 5, 8}) {
    SCOPED_TRACE(p);
    if (!test::ranks_available(p)) continue;
    const std::size_t n = 1 << 16;  // divisible by every p above except 3, 5: uneven chunks
    test::run_ranks(p, [&](Transport& t) {
      std::vector<float> v(n, 1.0f);
      AllreduceOptions o;
      o.algo = AllreduceAlgo::Ring;
      const CollStats s = allreduce(t, std::span<float>(v), o);
      // Each phase sends every chunk but one: total bytes minus the chunks
      // this rank does not send in reduce-scatter (its own) and allgather.
      const double expect = 2.0 * (p - 1) / p * n * sizeof(float);
      EXPECT_NEAR(static_cast<double>(s.wire.bytes_sent), expect, 2 * sizeof(float));
      EXPECT_EQ(s.rounds, 2 * (p - 1));
      EXPECT_EQ(v[0], static_cast<float>(p));
    });
  }
}

TEST(Allreduce, RejectsMismatchedBuffers) {
  SPARQ_NEED_RANKS(1);
  test::run_ranks(1, [](Transport& t) {
    std::vector<float> a(10), b(9);
    EXPECT_THROW(allreduce(t, std::span<const float>(a), std::span<float>(b)), InputError);
    EXPECT_THROW(allreduce(t, std::span<const float>(a.data(), 8), std::span<float>(a.data() + 2, 8)), InputError);
  });
}

TEST(Allreduce, NativeNeedsMpi) {
  SPARQ_LOCAL_ONLY();
  run_local(2, [](Transport& t) {
    std::vector<float> v(4);
    AllreduceOptions o;
    o.algo = AllreduceAlgo::Native;
    EXPECT_THROW(allreduce(t, std::span<float>(v), o), InputError);
  });
}

TEST(Allreduce, NativeUnderMpiMatchesReference) {
  if (!test::under_mpi()) GTEST_SKIP() << "needs mpiexec";
  const int p = test::mpi_world_size();
  const std::size_t n = 100003;
  const auto ref = reference_reduce<float>(n, p, ReduceOp::Sum);
  test::run_ranks(p, [&](Transport& t) {
    AllreduceOptions o;
    o.algo = AllreduceAlgo::Native;
    const auto out = run_one<float>(t, n, false, o);
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], ref.value[i], ref.tolerance[i]) << i;
    std::vector<float> v(4, 1.0f);
    EXPECT_FALSE(allreduce(t, std::span<float>(v), o).counted);  // bypasses our counters
  });
}

TEST(Allreduce, AutoRule) {
  AllreduceOptions o;
  EXPECT_EQ(resolve_allreduce_algo(o, 32 << 10, 8), AllreduceAlgo::RecursiveDoubling);
  EXPECT_EQ(resolve_allreduce_algo(o, (32 << 10) + 1, 8), AllreduceAlgo::Rabenseifner);
  EXPECT_EQ(resolve_allreduce_algo(o, 256 << 10, 6), AllreduceAlgo::RecursiveDoubling);
  EXPECT_EQ(resolve_allreduce_algo(o, (256 << 10) + 1, 6), AllreduceAlgo::Ring);
  o.auto_rule.small_bytes_folded = 2 << 20;
  EXPECT_EQ(resolve_allreduce_algo(o, 1 << 20, 6), AllreduceAlgo::RecursiveDoubling);
  o.algo = AllreduceAlgo::Ring;
  EXPECT_EQ(resolve_allreduce_algo(o, 10, 8), AllreduceAlgo::Ring);
  EXPECT_THROW(parse_allreduce_algo("fast"), InputError);
}

}  // namespace
}  // namespace sparq
