#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "sparq/core/error.h"
#include "sparq/data/tsv_stream.h"
#include "tests/data/temp_dir.h"

namespace sparq {
namespace {

// Line i carries i in I1 and in C1, so records identify their line.
std::string lines(std::size_t n, std::size_t bad_at = ~std::size_t{0}) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    if (i == bad_at) {
      s += "1\tnot-a-number\n";
      continue;
    }
    s += std::to_string(i % 2) + "\t" + std::to_string(i);
    for (int k = 1; k < 13; ++k) s += "\t";
    s += fmt::format("\t{:x}", i);
    for (int k = 1; k < 26; ++k) s += "\t";
    s += "\n";
  }
  return s;
}

std::vector<std::uint32_t> ids(TsvStream& s) {
  std::vector<std::uint32_t> out;
  CriteoRecord r;
  while (s.next(r)) out.push_back(r.sparse[0]);
  return out;
}

TEST(TsvStream, ReadsAllInOrderAcrossChunksAndFiles) {
  test::TempDir d;
  const auto a = d.file("a.tsv", lines(1000)), b = d.file("b.tsv", lines(37));
  TsvOptions o;
  o.chunk_records = 64;
  o.queue_chunks = 2;
  TsvStream s({a, b}, o);
  const auto got = ids(s);
  ASSERT_EQ(got.size(), 1037u);
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(got[i], i);
  for (std::uint32_t i = 0; i < 37; ++i) ASSERT_EQ(got[1000 + i], i);
  EXPECT_EQ(s.lines(), 1037u);
}

TEST(TsvStream, LastLineWithoutNewline) {
  test::TempDir d;
  auto text = lines(3);
  text.pop_back();
  TsvStream s({d.file("a.tsv", text)}, {});
  EXPECT_EQ(ids(s).size(), 3u);
}

TEST(TsvStream, ShardsAreDisjointBlocksCoveringAll) {
  test::TempDir d;
  const auto a = d.file("a.tsv", lines(1003));
  std::vector<std::uint32_t> all;
  for (int r = 0; r < 3; ++r) {
    TsvOptions o;
    o.rank = r;
    o.nranks = 3;
    o.shard_block = 10;
    TsvStream s({a}, o);
    for (auto v : ids(s)) {
      EXPECT_EQ((v / 10) % 3, static_cast<std::uint32_t>(r));
      all.push_back(v);
    }
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 1003u);
  for (std::uint32_t i = 0; i < 1003; ++i) ASSERT_EQ(all[i], i);
}

TEST(TsvStream, ShuffleIsSeededPermutation) {
  test::TempDir d;
  const auto a = d.file("a.tsv", lines(500));
  auto run = [&](std::uint64_t seed) {
    TsvOptions o;
    o.shuffle_buffer = 64;
    o.seed = seed;
    o.chunk_records = 50;
    TsvStream s({a}, o);
    return ids(s);
  };
  const auto x = run(1), y = run(1), z = run(2);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  auto sorted = x;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 500; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(x, sorted);
}

TEST(TsvStream, BadLineNamesFileAndLine) {
  test::TempDir d;
  const auto a = d.file("bad.tsv", lines(100, 41));
  TsvStream s({a}, {});
  try {
    ids(s);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(a + ":42:"), std::string::npos) << e.what();
  }
}

TEST(TsvStream, SkipBadLinesCounts) {
  test::TempDir d;
  const auto a = d.file("bad.tsv", lines(100, 41) + "\n");  // plus an empty line
  TsvOptions o;
  o.skip_bad_lines = true;
  TsvStream s({a}, o);
  EXPECT_EQ(ids(s).size(), 99u);
  EXPECT_EQ(s.bad_lines(), 2u);
}

TEST(TsvStream, MissingFileIsInputError) {
  EXPECT_THROW(TsvStream({"/nonexistent/x.tsv"}, {}), InputError);
}

TEST(TsvStream, EarlyDestructionDoesNotHang) {
  test::TempDir d;
  const auto a = d.file("a.tsv", lines(5000));
  TsvOptions o;
  o.chunk_records = 16;
  o.queue_chunks = 1;
  TsvStream s({a}, o);
  CriteoRecord r;
  ASSERT_TRUE(s.next(r));
}  // destructor joins a parser blocked on a full queue

TEST(TsvStream, MaxRecords) {
  test::TempDir d;
  TsvOptions o;
  o.max_records = 10;
  TsvStream s({d.file("a.tsv", lines(100))}, o);
  EXPECT_EQ(ids(s).size(), 10u);
}

}  // namespace
}  // namespace sparq
