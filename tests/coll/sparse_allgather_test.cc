// Sparse allgather of disjoint slices against a sequential reference (the
// ranges concatenated by hand), on 1-16 ranks, and against its dense
// counterpart (allgatherv of the same ranges): the same vector, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "sparq/coll/allgather.h"
#include "sparq/coll/patterns.h"
#include "sparq/coll/sparse_allgather.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/transport/local_transport.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

using compress::SparseStream;

// Rank r's slice: k random entries of its range (or all of it when k >= len),
// indices relative to the range's start, values never zero.
SparseStream slice_of(std::size_t n, std::size_t k, int rank, int p) {
  const pattern::Partition part{n, p};
  const std::size_t len = part.len(rank);
  std::mt19937_64 g(1000 + static_cast<std::uint64_t>(rank) * 7 + n);
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  for (std::size_t i = 0; i < len; ++i)
    if (k >= len || g() % len < k) {
      idx.push_back(static_cast<std::uint32_t>(i));
      val.push_back(static_cast<float>(g() % 1000) * 0.37f + 0.5f);
    }
  return SparseStream::sparse(len, std::move(idx), std::move(val));
}

std::vector<float> reference(std::size_t n, std::size_t k, int p) {
  const pattern::Partition part{n, p};
  std::vector<float> all(n, 0.0f);
  for (int r = 0; r < p; ++r)
    slice_of(n, k, r, p).to_dense(std::span<float>(all).subspan(part.offset(r), part.len(r)));
  return all;
}

class SparseAllgatherSweep : public testing::TestWithParam<int> {};

TEST_P(SparseAllgatherSweep, EqualsTheConcatenatedRangesAndItsDenseCounterpart) {
  const int p = GetParam();
  if (!test::ranks_available(p)) GTEST_SKIP() << "needs " << p << " ranks";
  // Empty, smaller than P, uneven, sparse and dense-switching slices.
  const std::pair<std::size_t, std::size_t> cases[] = {{0, 0}, {1, 1}, {5, 1}, {1001, 3}, {100000, 100}, {4096, 4096}};
  test::run_ranks(p, [&](Transport& t) {
    for (const auto& [n, k] : cases) {
      const std::vector<float> want = reference(n, k, p);
      SparseStream out;
      const CollStats s = sparse_allgather(t, slice_of(n, k, t.rank(), p), n, out);
      std::vector<float> got(n);
      out.to_dense(got);
      EXPECT_EQ(got, want) << "n " << n << " k " << k << " rank " << t.rank();
      if (n == 100000) {
        EXPECT_FALSE(out.is_dense());  // ~100 pairs a rank
      }
      if (n == 4096) {
        EXPECT_TRUE(out.is_dense());  // every entry present
      }
      if (p > 1 && n > 0) {
        EXPECT_GT(s.wire.bytes_sent, 0u);
      }
      // The dense counterpart: every rank's range in place, then allgatherv.
      const pattern::Partition part{n, p};
      std::vector<float> dense(n, 0.0f);
      slice_of(n, k, t.rank(), p).to_dense(std::span<float>(dense).subspan(part.offset(t.rank()), part.len(t.rank())));
      std::vector<std::size_t> counts(p);
      for (int r = 0; r < p; ++r) counts[r] = part.len(r);
      allgatherv(t, std::span<const float>(dense).subspan(part.offset(t.rank()), part.len(t.rank())),
                 std::span<float>(dense), std::span<const std::size_t>(counts));
      EXPECT_EQ(dense, want) << "dense counterpart, n " << n;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SparseAllgatherSweep, testing::Values(1, 2, 3, 4, 5, 7, 8, 16));

TEST(SparseAllgather, SparseSendsFarFewerBytesAtLowDensity) {
  SPARQ_NEED_RANKS(4);
  test::run_ranks(4, [](Transport& t) {
    const std::size_t n = 1 << 20;
    SparseStream out;
    const CollStats s = sparse_allgather(t, slice_of(n, 100, t.rank(), 4), n, out);
    // 3 of 4 ranges of ~100 pairs cross to each rank; the dense allgather would send 3/4 of 4 MiB.
    EXPECT_LT(s.wire.bytes_sent, 8000u);
    EXPECT_LT(out.nnz(), 600u);
  });
}

TEST(SparseAllgather, AStreamOfTheWrongDimensionIsAnInputError) {
  SPARQ_LOCAL_ONLY();
  test::run_ranks(1, [](Transport& t) {
    SparseStream out;
    EXPECT_THROW(sparse_allgather(t, SparseStream(9), 10, out), InputError);
  });
}

TEST(SparseAllgather, APeerRangeOfTheWrongDimensionIsAWireError) {
  SPARQ_LOCAL_ONLY();
  // Rank 1 owns [50, 100) of 100 but sends a stream of dimension 100: its
  // indices could land anywhere, so the receiver refuses it.
  test::run_ranks(2, [](Transport& t) {
    if (t.rank() == 1) {
      SparseStream wide = SparseStream::sparse(100, {99}, {1.0f});
      std::vector<std::byte> msg(4 + 8 + compress::encoded_size(wide));
      const std::uint32_t count = 1;
      const std::uint64_t len = msg.size() - 12;
      std::memcpy(msg.data(), &count, 4);
      std::memcpy(msg.data() + 4, &len, 8);
      compress::encode_stream(wide, std::span<std::byte>(msg).subspan(12));
      t.send(0, tags::kSparseAllgather, msg);  // one Bruck round's message, in the blob layout
      return;
    }
    SparseAllgatherOptions o;
    o.timeout = Millis(5000);
    SparseStream out;
    EXPECT_THROW(sparse_allgather(t, SparseStream(50), 100, out, o), WireError);
  });
}

}  // namespace
}  // namespace sparq
