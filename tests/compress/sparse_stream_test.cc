// Stream sums against a dense reference on integer-valued floats (exact in
// any order), over no / partial / full index overlap and both representations.
#include "sparq/compress/sparse_stream.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

// Sparse stream on the given support with values i % 5 + 1 + offset.
SparseStream on_support(std::size_t dim, const std::vector<std::uint32_t>& idx, float offset) {
  std::vector<float> val;
  for (auto i : idx) val.push_back(static_cast<float>(i % 5 + 1) + offset);
  return SparseStream::sparse(dim, idx, val);
}

std::vector<float> dense_of(const SparseStream& s) {
  std::vector<float> d(s.dim());
  s.to_dense(d);
  return d;
}

std::vector<std::uint32_t> range(std::uint32_t first, std::uint32_t last, std::uint32_t stride = 1) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t i = first; i < last; i += stride) v.push_back(i);
  return v;
}

void expect_sum_matches_dense(const SparseStream& a, const SparseStream& b) {
  std::vector<float> ref = dense_of(a);
  const std::vector<float> db = dense_of(b);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += db[i];
  const SparseStream s = sum(a, b);
  EXPECT_EQ(dense_of(s), ref);
  SparseStream acc = a;
  add_into(acc, b);
  EXPECT_EQ(dense_of(acc), ref);
  EXPECT_EQ(acc.is_dense(), s.is_dense());
}

// A sum's result stays sparse up to delta = N v / (1 + v) pairs for the
// value format it is sent in (stream_size.h): 800, 666 and 500 of 1000;
// fp4: k + ceil(k/32) + ceil(k/2) <= 32 + 500 at k = 347.
TEST(SparseStream, SumSwitchesAtTheValueFormatsDelta) {
  const std::size_t dim = 1000;
  const std::pair<ValueFormat, std::uint32_t> deltas[] = {
      {ValueFormat::F32, 800}, {ValueFormat::Bf16, 666}, {ValueFormat::Fp8, 500}, {ValueFormat::Fp4, 347}};
  for (const auto& [vf, delta] : deltas) {
    const SparseStream a = on_support(dim, range(0, 300), 0);
    const SparseStream fits = on_support(dim, range(0, delta - 300), 1);
    const SparseStream over = on_support(dim, range(0, delta - 299), 1);
    EXPECT_FALSE(sum(a, fits, vf).is_dense()) << static_cast<int>(vf);
    EXPECT_TRUE(sum(a, over, vf).is_dense()) << static_cast<int>(vf);
    SparseStream acc = a;
    add_into(acc, over, vf);
    EXPECT_TRUE(acc.is_dense()) << static_cast<int>(vf);
  }
}

TEST(SparseStream, SumsEqualDenseSumsForAnyOverlap) {
  const std::size_t dim = 1000;  // delta = 800 (f32)
  // no overlap, partial overlap, full overlap, one empty side
  expect_sum_matches_dense(on_support(dim, range(0, 100), 0), on_support(dim, range(500, 600), 10));
  expect_sum_matches_dense(on_support(dim, range(0, 300, 2), 0), on_support(dim, range(0, 300, 3), 10));
  expect_sum_matches_dense(on_support(dim, range(10, 200), 0), on_support(dim, range(10, 200), 7));
  expect_sum_matches_dense(on_support(dim, {}, 0), on_support(dim, range(3, 9), 1));
  const SparseStream merged = sum(on_support(dim, range(0, 300, 2), 0), on_support(dim, range(0, 300, 3), 10));
  EXPECT_FALSE(merged.is_dense());
  EXPECT_EQ(merged.nnz(), 150u + 100u - 50u);  // |H1 u H2|
}

TEST(SparseStream, SwitchesToDenseOnTheUpperBound) {
  const std::size_t dim = 1000;  // delta = 800 (f32)
  // |H1| + |H2| = 801 > delta although the union (500) is small: dense, as the
  // paper decides before merging.
  const SparseStream a = on_support(dim, range(0, 500), 0), b = on_support(dim, range(199, 500), 2);
  ASSERT_EQ(a.nnz() + b.nnz(), 801u);
  EXPECT_TRUE(sum(a, b).is_dense());
  expect_sum_matches_dense(a, b);
  const SparseStream c = on_support(dim, range(200, 500), 2);  // 800: stays sparse
  EXPECT_FALSE(sum(a, c).is_dense());
  expect_sum_matches_dense(a, c);
}

TEST(SparseStream, MixedAndDenseSums) {
  const std::size_t dim = 300;
  std::vector<float> d1(dim), d2(dim);
  for (std::size_t i = 0; i < dim; ++i) d1[i] = static_cast<float>(i % 11), d2[i] = -static_cast<float>(i % 3);
  const SparseStream a = SparseStream::dense(d1), b = SparseStream::dense(d2), s = on_support(dim, range(5, 290, 7), 1);
  expect_sum_matches_dense(a, s);
  expect_sum_matches_dense(s, a);
  expect_sum_matches_dense(a, b);
  // dense + anything accumulates in place: the buffer is not reallocated.
  SparseStream acc = a;
  const float* before = acc.values().data();
  add_into(acc, b);
  add_into(acc, s);
  EXPECT_EQ(acc.values().data(), before);
}

TEST(SparseStream, RandomSupportsAgainstDenseReference) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t dim = 1 + rng() % 3000;
    auto pick = [&](double density) {
      std::vector<std::uint32_t> idx;
      for (std::uint32_t i = 0; i < dim; ++i)
        if (std::uniform_real_distribution<double>(0, 1)(rng) < density) idx.push_back(i);
      return idx;
    };
    const double da = std::uniform_real_distribution<double>(0, 0.6)(rng), db = std::uniform_real_distribution<double>(0, 0.6)(rng);
    expect_sum_matches_dense(on_support(dim, pick(da), 0), on_support(dim, pick(db), 3));
  }
}

TEST(SparseStream, RejectsInvalidPairsAndDimensionMismatch) {
  EXPECT_THROW(SparseStream::sparse(10, {3, 3}, {1, 2}), InputError);
  EXPECT_THROW(SparseStream::sparse(10, {4, 2}, {1, 2}), InputError);
  EXPECT_THROW(SparseStream::sparse(10, {10}, {1}), InputError);
  EXPECT_THROW(SparseStream::sparse(10, {1}, {1, 2}), InputError);
  EXPECT_THROW(sum(SparseStream(10), SparseStream(11)), InputError);
  SparseStream acc(10);
  EXPECT_THROW(add_into(acc, SparseStream::dense(std::vector<float>(9))), InputError);
}

TEST(SparseStream, MakeDenseKeepsValues) {
  SparseStream s = on_support(20, {1, 7, 19}, 0);
  const auto before = dense_of(s);
  s.make_dense();
  EXPECT_TRUE(s.is_dense());
  EXPECT_EQ(s.nnz(), 20u);
  EXPECT_EQ(dense_of(s), before);
}

// The scale to_dense() takes (an average over ranks) equals writing, then
// multiplying every value, bit for bit, in both representations.
TEST(SparseStream, ToDenseScalesLikeAPassAfterIt) {
  std::mt19937 rng(3);
  std::vector<float> val(40);
  for (auto& v : val) v = std::uniform_real_distribution<float>(-3, 3)(rng);
  SparseStream s = SparseStream::sparse(100, range(3, 83, 2), val);  // 40 pairs
  for (int rep = 0; rep < 2; ++rep, s.make_dense()) {
    for (const float scale : {1.0f / 3.0f, 0.25f, 1.0f}) {
      std::vector<float> want = dense_of(s), got(s.dim(), 7.0f);
      for (float& v : want) v *= scale;
      s.to_dense(got, scale);
      EXPECT_EQ(got, want) << (rep ? "dense" : "sparse") << " scale " << scale;
    }
  }
}

TEST(SparseStream, PairBuffersAreReusedAcrossProducers) {
  SparseStream s = SparseStream::dense({1, 2, 3});
  auto pairs = s.start_pairs(100, 100);
  ASSERT_GE(pairs.indices.size(), 100u);
  pairs.indices[0] = 4, pairs.values[0] = 1.0f;
  pairs.indices[1] = 90, pairs.values[1] = -2.0f;
  s.finish_pairs(2);
  EXPECT_FALSE(s.is_dense());
  EXPECT_EQ(s.nnz(), 2u);
  EXPECT_EQ(dense_of(s)[90], -2.0f);
  const std::uint32_t* before = s.start_pairs(100, 50).indices.data();
  s.finish_pairs(0);
  EXPECT_EQ(s.indices().size(), 0u);
  EXPECT_EQ(s.start_pairs(100, 100).indices.data(), before);  // no reallocation
  EXPECT_THROW(s.finish_pairs(101), Error);
  // A stream with spare capacity still sums and copies by its live pairs.
  s.finish_pairs(1);
  expect_sum_matches_dense(s, on_support(100, {4, 5}, 0));
  const SparseStream copy = s;
  EXPECT_EQ(copy.nnz(), 1u);
  EXPECT_EQ(dense_of(copy), dense_of(s));
}

}  // namespace
}  // namespace sparq::compress
