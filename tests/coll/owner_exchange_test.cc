// The owner exchange against a sequential reference (every rank's values
// added index by index, in rank order): reduce at the owners and gather back,
// on 1-8 ranks, with ranks that hold nothing, everything, or a random part;
// and a peer's index list that is not sorted or lies outside the owner's
// range is a WireError.
#include <gtest/gtest.h>

#include <random>

#include "sparq/coll/alltoall.h"
#include "sparq/coll/owner_exchange.h"
#include "sparq/coll/patterns.h"
#include "sparq/core/error.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

// Rank r's held indices of [0, dim) and its value at each (never zero).
struct Held {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
};

Held held_by(int rank, std::size_t dim, int mode) {
  std::mt19937_64 g(77 + static_cast<std::uint64_t>(rank) * 13 + dim);
  Held h;
  for (std::size_t j = 0; j < dim; ++j) {
    const bool take = mode == 0 ? g() % 5 == 0 : mode == 1 ? true : rank % 2 == 1;  // random, all, odd ranks only
    if (!take) continue;
    h.idx.push_back(static_cast<std::uint32_t>(j));
    h.val.push_back(static_cast<float>(g() % 1000) * 0.25f + 0.125f);
  }
  return h;
}

class OwnerExchangeSweep : public testing::TestWithParam<int> {};

TEST_P(OwnerExchangeSweep, SumsAtTheOwnersAndGathersBack) {
  const int p = GetParam();
  if (!test::ranks_available(p)) GTEST_SKIP() << "needs " << p << " ranks";
  for (std::size_t dim : {std::size_t{0}, std::size_t{3}, std::size_t{1000}, std::size_t{65537}})
    for (int mode : {0, 1, 2}) {
      std::vector<float> want(dim, 0.0f);  // summed in rank order, in float
      for (int r = 0; r < p; ++r) {
        const Held h = held_by(r, dim, mode);
        for (std::size_t k = 0; k < h.idx.size(); ++k) want[h.idx[k]] += h.val[k];
      }
      test::run_ranks(p, [&](Transport& t) {
        const Held h = held_by(t.rank(), dim, mode);
        OwnerExchange x(t, h.idx, dim);
        const pattern::Partition part{dim, p};
        ASSERT_EQ(x.owned_begin(), part.offset(t.rank()));
        ASSERT_EQ(x.owned_size(), part.len(t.rank()));
        std::vector<double> owned(x.owned_size());
        const CollStats st = x.reduce(t, h.val, owned);
        for (std::size_t j = 0; j < owned.size(); ++j)
          EXPECT_EQ(owned[j], want[x.owned_begin() + j]) << "dim " << dim << " mode " << mode << " index " << j;
        // Only values travel: 4 bytes an index this rank holds in another's range.
        std::size_t others = 0;
        for (std::uint32_t j : h.idx) others += !(j >= x.owned_begin() && j - x.owned_begin() < x.owned_size());
        EXPECT_EQ(st.wire.bytes_sent, 4 * others);
        for (std::size_t j = 0; j < owned.size(); ++j) owned[j] = 0.5 + static_cast<double>(x.owned_begin() + j);
        std::vector<float> back(h.idx.size());
        x.gather(t, owned, back);
        for (std::size_t k = 0; k < back.size(); ++k) EXPECT_EQ(back[k], 0.5f + static_cast<float>(h.idx[k]));
      });
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, OwnerExchangeSweep, testing::Values(1, 2, 3, 4, 8));

TEST(OwnerExchange, RefusesAnIndexListItCannotUse) {
  SPARQ_NEED_RANKS(2);
  // Rank 1 plays a faulty peer: it sends rank 0 an index list by hand.
  for (const std::vector<std::uint32_t>& bad : {std::vector<std::uint32_t>{3, 2}, std::vector<std::uint32_t>{70}}) {
    test::run_ranks(2, [&](Transport& t) {
      const std::size_t dim = 100;  // rank 0 owns [0, 50)
      if (t.rank() == 0) {
        EXPECT_THROW(OwnerExchange(t, std::vector<std::uint32_t>{}, dim), WireError);
        return;
      }
      AlltoallOptions ao{.tag = tags::kOwnerExchange};
      const std::int64_t counts[2] = {static_cast<std::int64_t>(bad.size()), 0};
      std::int64_t got[2];
      alltoall(t, std::span<const std::int64_t>(counts), std::span<std::int64_t>(got), ao);
      const std::size_t send[2] = {4 * bad.size(), 0}, recv[2] = {0, 0};
      alltoallv(t, std::as_bytes(std::span(bad)), send, MutBytes{}, recv, ao);
    });
  }
  std::vector<std::uint32_t> unsorted{5, 4};
  if (test::ranks_available(1))
    test::run_ranks(1, [&](Transport& t) { EXPECT_THROW(OwnerExchange(t, unsorted, 10), InputError); });
}

}  // namespace
}  // namespace sparq
