#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "sparq/core/error.h"
#include "sparq/data/criteo_days.h"
#include "sparq/data/text_file.h"
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

namespace sparq {
namespace {

TEST(TsvStream, GzipReadsLikePlain) {
  test::TempDir d;
  const auto text = lines(5000);
  TsvStream plain({d.file("a.tsv", text)}, {}), gz({d.gzip_file("a.tsv.gz", text)}, {});
  EXPECT_EQ(ids(plain), ids(gz));
}

TEST(TsvStream, TruncatedGzipIsAnErrorNamingTheFile) {
  test::TempDir d;
  std::string bytes;
  {
    std::ifstream in(d.gzip_file("a.gz", lines(20000)), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto cut = d.file("cut.gz", bytes.substr(0, bytes.size() / 2));
  TsvStream s({cut}, {});
  try {
    ids(s);
    FAIL() << "a truncated gzip file must not read as a short file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.gz': "), std::string::npos) << e.what();
  }
  EXPECT_THROW(count_lines(cut), InputError);
}

// Global lines [first_line, end_line) across files, sharded in blocks from first_line.
TEST(TsvStream, LineRangeAcrossFilesAndShards) {
  test::TempDir d;
  const auto a = d.file("a.tsv", lines(500)), b = d.file("b.tsv", lines(500));
  std::multiset<std::uint32_t> got;
  for (int r = 0; r < 3; ++r) {
    TsvOptions o;
    o.first_line = 100;
    o.end_line = 700;
    o.rank = r;
    o.nranks = 3;
    o.shard_block = 7;
    TsvStream s({a, b}, o);
    for (auto id : ids(s)) got.insert(id);
  }
  std::multiset<std::uint32_t> want;
  for (std::uint32_t g = 100; g < 700; ++g) want.insert(g < 500 ? g : g - 500);  // ids restart in b
  EXPECT_EQ(got, want);
}

// --data-sub-sample-rate: negatives dropped by line number, whatever the
// sharding; positives all kept.
TEST(TsvStream, DroppedNegativesDoNotDependOnSharding) {
  test::TempDir d;
  const auto a = d.file("a.tsv", lines(8000));  // line i has label i % 2
  auto kept = [&](int P) {
    std::set<std::uint32_t> out;
    for (int r = 0; r < P; ++r) {
      TsvOptions o;
      o.drop_negatives = 0.5;
      o.sample_seed = 9;
      o.rank = r;
      o.nranks = P;
      o.shard_block = 64;
      TsvStream s({a}, o);
      for (auto id : ids(s)) out.insert(id);
    }
    return out;
  };
  const auto one = kept(1);
  EXPECT_EQ(one, kept(3));
  std::size_t neg = 0;
  for (std::uint32_t i = 0; i < 8000; ++i) {
    if (i % 2) EXPECT_TRUE(one.count(i));
    else neg += one.count(i);
  }
  EXPECT_GT(neg, 1800u);  // 4000 negatives, half kept: 2000 +- 32 (1 sigma)
  EXPECT_LT(neg, 2200u);
  TsvOptions bad;
  bad.drop_negatives = 1;
  EXPECT_THROW(TsvStream({a}, bad), InputError);
}

TEST(CriteoSplit, KaggleDaysByLineCount) {
  test::TempDir d;
  const auto f = d.file("train.txt", lines(100));
  const CriteoSplit s = plan_criteo_split(CriteoSet::Kaggle, f, 7);
  // 100 = 7 x 14 + 2: days 0 and 1 hold 15 lines, days 2-6 14.
  EXPECT_EQ(s.train_end, 86u);
  EXPECT_EQ(s.test_begin, 86u);
  EXPECT_EQ(s.test_end, 93u);  // ceil(14 / 2) test lines first
  EXPECT_EQ(s.val_begin, 93u);
  EXPECT_EQ(s.val_end, 100u);
  EXPECT_EQ(s.train_files, s.eval_files);
}

TEST(CriteoSplit, TerabyteDayFilesPlainOrGzip) {
  test::TempDir d;
  const auto prefix = (d.path / "day").string();
  d.file("day_0", lines(10));
  d.gzip_file("day_1.gz", lines(7));
  d.file("day_2", lines(9));
  const CriteoSplit s = plan_criteo_split(CriteoSet::Terabyte, prefix, 3);
  EXPECT_EQ(s.train_files, (std::vector<std::string>{prefix + "_0", prefix + "_1.gz"}));
  EXPECT_EQ(s.train_end, 17u);
  EXPECT_EQ(s.eval_files, std::vector<std::string>{prefix + "_2"});
  EXPECT_EQ(s.test_end, 5u);
  EXPECT_EQ(s.val_begin, 5u);
  EXPECT_EQ(s.val_end, 9u);
  try {
    plan_criteo_split(CriteoSet::Terabyte, prefix, 4);
    FAIL() << "a missing day must be an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("day_3.gz"), std::string::npos) << e.what();
  }
  d.file("day_1", lines(7));
  EXPECT_THROW(plan_criteo_split(CriteoSet::Terabyte, prefix, 3), InputError);  // day_1 and day_1.gz
}

}  // namespace
}  // namespace sparq
