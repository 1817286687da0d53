#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "sparq/core/error.h"
#include "sparq/data/dataset.h"
#include "sparq/data/hash.h"

namespace sparq {
namespace {

std::vector<CriteoRecord> numbered(std::size_t n) {
  std::vector<CriteoRecord> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = {};
    v[i].dense[0] = static_cast<float>(i);
    v[i].sparse[0] = static_cast<std::uint32_t>(i);
  }
  return v;
}

TEST(BatchPlan, EveryRecordOncePerEpochAcrossRanks) {
  const auto recs = numbered(1000);
  const std::vector<std::size_t> rows(26, 1u << 20);
  for (bool shuffle : {false, true}) {
    std::vector<int> seen(1000, 0);
    for (int r = 0; r < 3; ++r) {
      BatchPlan plan(recs.size(), {.batch = 64, .shuffle = shuffle, .seed = 5, .rank = r, .nranks = 3});
      plan.start_epoch(2);
      Batch b;
      for (std::size_t i = 0; i < plan.num_batches(); ++i) {
        plan.fill(i, recs, rows, b);
        for (std::size_t k = 0; k < b.size; ++k) ++seen[static_cast<std::size_t>(b.dense[k * 13])];
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; })) << shuffle;
  }
}

TEST(BatchPlan, ShuffleDependsOnSeedAndEpoch) {
  const auto recs = numbered(100);
  const std::vector<std::size_t> rows(26, 7);
  auto first = [&](std::uint64_t seed, std::size_t epoch) {
    BatchPlan plan(recs.size(), {.batch = 100, .shuffle = true, .seed = seed});
    plan.start_epoch(epoch);
    Batch b;
    plan.fill(0, recs, rows, b);
    return b.dense;
  };
  EXPECT_EQ(first(1, 0), first(1, 0));
  EXPECT_NE(first(1, 0), first(1, 1));
  EXPECT_NE(first(1, 0), first(2, 0));
}

TEST(MakeBatch, HashesToTableSize) {
  const auto recs = numbered(10);
  std::vector<std::size_t> rows(26, 3);
  Batch b;
  make_batch(recs, {}, 2, 5, rows, b);
  ASSERT_EQ(b.size, 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(b.sparse[0].indices[k], categorical_row(static_cast<std::uint32_t>(k + 2), 0, 3));
    EXPECT_EQ(b.sparse[0].offsets[k + 1], k + 1);
  }
}

// A part writes its share whole and, elsewhere, only the flagged tables'
// ids; everything else keeps what the batch held.
TEST(MakeBatch, WritesOnlyThePartItIsGiven) {
  std::vector<CriteoRecord> recs(60);
  for (std::size_t i = 0; i < recs.size(); ++i) {
    recs[i].label = static_cast<float>(i % 2);
    for (std::size_t j = 0; j < kCriteoDense; ++j) recs[i].dense[j] = static_cast<float>(i * 100 + j);
    for (std::size_t t = 0; t < kCriteoSparse; ++t) recs[i].sparse[t] = static_cast<std::uint32_t>(i * 31 + t);
  }
  std::vector<std::uint32_t> order(recs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>((i * 7) % order.size());
  const std::vector<std::size_t> rows(26, 1000);
  Batch full, stale, part_batch;
  make_batch(recs, order, 20, 30, rows, full);
  make_batch(recs, order, 0, 30, rows, stale);  // other records: what the batch held before
  for (const auto& [lo, hi] : {std::pair<std::size_t, std::size_t>{10, 20}, {0, 7}, {25, 30}, {0, 0}})
    for (const bool with_tables : {false, true}) {
      SCOPED_TRACE(fmt::format("share [{}, {}), tables {}", lo, hi, with_tables));
      BatchPart part{lo, hi, std::vector<bool>(kCriteoSparse)};
      if (with_tables) part.tables[3] = part.tables[17] = true;
      part_batch = stale;
      make_batch(recs, order, 20, 30, rows, part_batch, &part);
      for (std::size_t k = 0; k < 30; ++k) {
        const bool whole = k >= lo && k < hi;
        const Batch& want = whole ? full : stale;
        EXPECT_EQ(part_batch.labels[k], want.labels[k]) << k;
        for (std::size_t j = 0; j < kCriteoDense; ++j)
          EXPECT_EQ(part_batch.dense[k * kCriteoDense + j], want.dense[k * kCriteoDense + j]) << k;
        for (std::size_t t = 0; t < kCriteoSparse; ++t)
          EXPECT_EQ(part_batch.sparse[t].indices[k], (whole || part.tables[t] ? full : stale).sparse[t].indices[k])
              << k << " table " << t;
      }
    }
  BatchPart bad{5, 31, std::vector<bool>(kCriteoSparse)};
  EXPECT_THROW(make_batch(recs, order, 20, 30, rows, part_batch, &bad), Error);
}

}  // namespace
}  // namespace sparq
