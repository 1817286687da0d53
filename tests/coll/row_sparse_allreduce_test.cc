// Row-sparse allreduce against a dense sequential reference: ranks 1-5 and 8
// (folded and power-of-two), row sets with no, partial and full overlap and
// empty ones; every rank must end with the same bits. Values are small
// integers plus halves, so every summation order is exact and the
// comparison can be exact too. In bf16: the closed form on 2 ranks, and a
// bound on the rounding against the exact sum on 3-8.
#include "sparq/coll/row_sparse_allreduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "sparq/coll/broadcast.h"
#include "sparq/compress/half.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

constexpr std::size_t kRows = 500, kDim = 5;

// Rank r's rows: k of [0, kRows) (some shared by all ranks when `shared`),
// none at all on rank 1 when `empty_rank1`.
RowSparse make_input(int rank, std::size_t k, bool shared, bool empty_rank1) {
  RowSparse m;
  if (empty_rank1 && rank == 1) return m;
  std::mt19937 common(11), own(100 + static_cast<unsigned>(rank));
  std::uniform_int_distribution<std::uint32_t> pick(0, kRows - 1);
  std::set<std::uint32_t> rows;
  while (shared && rows.size() < k / 2) rows.insert(pick(common));
  while (rows.size() < k) rows.insert(pick(own));
  std::uniform_int_distribution<int> v(-8, 8);
  for (std::uint32_t r : rows) {
    m.rows.push_back(r);
    for (std::size_t j = 0; j < kDim; ++j) m.values.push_back(0.5f * static_cast<float>(v(own)));
  }
  return m;
}

TEST(RowSparseAllreduce, EqualsTheSumOnEveryRank) {
  for (int p : {1, 2, 3, 4, 5, 8}) {
    if (!test::ranks_available(p)) continue;
    for (bool shared : {false, true})
      for (bool empty : {false, true}) {
        SCOPED_TRACE(testing::Message() << p << " ranks, shared " << shared << ", empty rank 1 " << empty);
        test::run_ranks(p, [&](Transport& t) {
          std::vector<double> want(kRows * kDim, 0.0);
          std::set<std::uint32_t> any;
          for (int r = 0; r < p; ++r) {
            const RowSparse in = make_input(r, 40, shared, empty);
            for (std::size_t i = 0; i < in.rows.size(); ++i) {
              any.insert(in.rows[i]);
              for (std::size_t j = 0; j < kDim; ++j) want[in.rows[i] * kDim + j] += in.values[i * kDim + j];
            }
          }
          RowSparse io = make_input(t.rank(), 40, shared, empty);
          const CollStats st = row_sparse_allreduce(t, io, kRows, kDim);
          EXPECT_EQ(std::set<std::uint32_t>(io.rows.begin(), io.rows.end()), any);
          ASSERT_TRUE(std::is_sorted(io.rows.begin(), io.rows.end()));
          ASSERT_EQ(io.values.size(), io.rows.size() * kDim);
          for (std::size_t i = 0; i < io.rows.size(); ++i)
            for (std::size_t j = 0; j < kDim; ++j)
              ASSERT_EQ(io.values[i * kDim + j], want[io.rows[i] * kDim + j]) << io.rows[i] << " " << j;
          // The same bits everywhere: rank 0's result against mine.
          std::vector<float> root = io.values;
          root.resize(any.size() * kDim);
          broadcast(t, std::span<float>(root), 0);
          EXPECT_EQ(0, std::memcmp(root.data(), io.values.data(), root.size() * sizeof(float)));
          const auto up = static_cast<unsigned>(p);
          if (std::has_single_bit(up)) {
            EXPECT_EQ(st.rounds, std::countr_zero(up));
          }
        });
      }
  }
}

// Rank r's rows with values of every magnitude in [-1, 1): bf16 must round them.
RowSparse make_real_input(int rank, std::size_t k) {
  RowSparse m = make_input(rank, k, true, false);
  std::mt19937 own(200 + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> v(-1.0f, 1.0f);
  for (float& x : m.values) x = v(own);
  return m;
}

float bf16(float x) { return compress::bf16_to_float(compress::float_to_bf16(x)); }

TEST(RowSparseAllreduce, Bf16OnTwoRanksAddsTheRoundedMatrices) {
  // The closed form at P = 2: each rank sends its matrix rounded to bf16 and
  // keeps the rounded values, so both end with bf16(a) + bf16(b) in f32.
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [&](Transport& t) {
    std::map<std::uint32_t, std::vector<float>> want;
    for (int r = 0; r < 2; ++r) {
      const RowSparse in = make_real_input(r, 40);
      for (std::size_t i = 0; i < in.rows.size(); ++i) {
        auto& row = want.try_emplace(in.rows[i], kDim, 0.0f).first->second;
        for (std::size_t j = 0; j < kDim; ++j) row[j] += bf16(in.values[i * kDim + j]);
      }
    }
    RowSparse io = make_real_input(t.rank(), 40);
    const CollStats st = row_sparse_allreduce(t, io, kRows, kDim, compress::ValueFormat::Bf16);
    ASSERT_EQ(io.rows.size(), want.size());
    std::size_t i = 0;
    for (const auto& [row, values] : want) {
      ASSERT_EQ(io.rows[i], row);
      for (std::size_t j = 0; j < kDim; ++j) ASSERT_EQ(io.values[i * kDim + j], values[j]) << row << " " << j;
      ++i;
    }
    // A row index and dim bf16 values a row.
    EXPECT_EQ(st.wire.bytes_sent, 8u + 40u * (4 + 2 * kDim));
  });
}

TEST(RowSparseAllreduce, Bf16IsTheSameBitsEverywhereAndNearTheExactSum) {
  // Each partial sum is rounded at most log2 P + 1 times (the fold's first
  // hop, then a round each), each time by at most 2^-8 (bf16's unit
  // roundoff) of a magnitude no larger than the sum of |x| over ranks.
  for (int p : {3, 4, 5, 8}) {
    if (!test::ranks_available(p)) continue;
    SCOPED_TRACE(testing::Message() << p << " ranks");
    test::run_ranks(p, [&](Transport& t) {
      std::vector<double> exact(kRows * kDim, 0.0), magnitude(kRows * kDim, 0.0);
      for (int r = 0; r < p; ++r) {
        const RowSparse in = make_real_input(r, 40);
        for (std::size_t i = 0; i < in.rows.size(); ++i)
          for (std::size_t j = 0; j < kDim; ++j) {
            exact[in.rows[i] * kDim + j] += in.values[i * kDim + j];
            magnitude[in.rows[i] * kDim + j] += std::abs(in.values[i * kDim + j]);
          }
      }
      RowSparse io = make_real_input(t.rank(), 40);
      row_sparse_allreduce(t, io, kRows, kDim, compress::ValueFormat::Bf16);
      const double rounds = std::ceil(std::log2(p)) + 1;
      for (std::size_t i = 0; i < io.rows.size(); ++i)
        for (std::size_t j = 0; j < kDim; ++j) {
          const std::size_t at = io.rows[i] * kDim + j;
          ASSERT_LE(std::abs(io.values[i * kDim + j] - exact[at]), (rounds * 0x1p-8 + 1e-6) * magnitude[at]) << at;
        }
      std::vector<float> root = io.values;
      std::uint64_t n = root.size();
      broadcast(t, std::span<std::uint64_t>(&n, 1), 0);
      ASSERT_EQ(n, io.values.size());
      broadcast(t, std::span<float>(root), 0);
      EXPECT_EQ(0, std::memcmp(root.data(), io.values.data(), root.size() * sizeof(float)));
    });
  }
}

TEST(RowSparseAllreduce, SendsEachRowsIndexOncePerRow) {
  // Two ranks, disjoint rows: each sends its k rows once, 8 + k * 4 * (1 + dim) bytes.
  SPARQ_NEED_RANKS(2);
  test::run_ranks(2, [&](Transport& t) {
    RowSparse io = make_input(t.rank(), 30, false, false);
    const CollStats st = row_sparse_allreduce(t, io, kRows, kDim);
    EXPECT_EQ(st.wire.bytes_sent, 8u + 30u * 4 * (1 + kDim));
  });
}

TEST(RowSparseAllreduce, RefusesBadInput) {
  SPARQ_LOCAL_ONLY();
  test::run_ranks(1, [&](Transport& t) {
    RowSparse unsorted{{3, 2}, std::vector<float>(2 * kDim)};
    EXPECT_THROW(row_sparse_allreduce(t, unsorted, kRows, kDim), InputError);
    RowSparse out_of_range{{kRows}, std::vector<float>(kDim)};
    EXPECT_THROW(row_sparse_allreduce(t, out_of_range, kRows, kDim), InputError);
    RowSparse short_values{{1}, std::vector<float>(kDim - 1)};
    EXPECT_THROW(row_sparse_allreduce(t, short_values, kRows, kDim), InputError);
    RowSparse fine;
    EXPECT_THROW(row_sparse_allreduce(t, fine, kRows, 0), InputError);
    EXPECT_THROW(row_sparse_allreduce(t, fine, kRows, kDim, compress::ValueFormat::Fp8), InputError);
  });
}

TEST(RowSparseAllreduce, CorruptOrTruncatedPeerMessageIsAWireError) {
  SPARQ_LOCAL_ONLY();
  // A valid message from rank 1: [u64 2][rows 3, 7][2 x kDim floats].
  std::vector<std::byte> good(8 + 2 * 4 + 2 * kDim * 4, std::byte{0});
  const std::uint64_t n = 2;
  const std::uint32_t rows[2] = {3, 7};
  std::memcpy(good.data(), &n, 8);
  std::memcpy(good.data() + 8, rows, 8);
  auto with_rows = [&](std::uint32_t a, std::uint32_t b) {
    std::vector<std::byte> m = good;
    const std::uint32_t r[2] = {a, b};
    std::memcpy(m.data() + 8, r, 8);
    return m;
  };
  const std::vector<std::vector<std::byte>> bad = {
      std::vector<std::byte>(good.begin(), good.end() - 1),  // truncated
      std::vector<std::byte>(3, std::byte{0xff}),             // shorter than a header
      std::vector<std::byte>(8, std::byte{0xff}),             // a count beyond the matrix
      with_rows(7, 3),                                        // not ascending
      with_rows(3, kRows)};                                   // past the last row
  for (const auto& msg : bad) {
    test::run_ranks(2, [&](Transport& t) {
      if (t.rank() == 1) {  // a broken peer: one bad message instead of the protocol
        t.send(0, tags::kRowSparseAllreduce, msg);
        return;
      }
      RowSparse io = make_input(0, 10, false, false);
      EXPECT_THROW(
          row_sparse_allreduce(t, io, kRows, kDim, compress::ValueFormat::F32, tags::kRowSparseAllreduce, Millis(5000)),
          WireError);
    });
  }
  // f32 values where bf16 ones were agreed: the size does not parse.
  test::run_ranks(2, [&](Transport& t) {
    if (t.rank() == 1) {
      t.send(0, tags::kRowSparseAllreduce, good);
      return;
    }
    RowSparse io = make_input(0, 10, false, false);
    EXPECT_THROW(row_sparse_allreduce(t, io, kRows, kDim, compress::ValueFormat::Bf16, tags::kRowSparseAllreduce, Millis(5000)),
                 WireError);
  });
}

}  // namespace
}  // namespace sparq
