#include "sparq/data/libsvm.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sparq/core/error.h"
#include "tests/data/temp_dir.h"

namespace sparq {
namespace {

// The reference: a plain reading of the format with the standard streams,
// sharing no code with the reader (valid input only).
SparseRows reference(const std::string& text) {
  SparseRows r;
  std::istringstream in(text);
  std::string line, tok;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (const auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    ls >> tok;
    const double y = std::stod(tok);
    std::vector<std::uint32_t> idx;
    std::vector<float> val;
    while (ls >> tok) {
      const auto colon = tok.find(':');
      idx.push_back(static_cast<std::uint32_t>(std::stoull(tok.substr(0, colon)) - 1));
      // strtof, not stof: stof throws for the subnormals the format allows.
      val.push_back(std::strtof(tok.substr(colon + 1).c_str(), nullptr));
      r.num_features = std::max<std::size_t>(r.num_features, idx.back() + std::size_t{1});
    }
    r.add_row(y > 0 ? 1.f : -1.f, idx, val);
  }
  return r;
}

// Same rows, values compared bit for bit (-0 is not 0).
void expect_same(const SparseRows& a, const SparseRows& b, const std::string& what) {
  ASSERT_EQ(a.labels, b.labels) << what;
  ASSERT_EQ(a.offsets, b.offsets) << what;
  ASSERT_EQ(a.indices, b.indices) << what;
  ASSERT_EQ(a.values.size(), b.values.size()) << what;
  for (std::size_t i = 0; i < a.values.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a.values[i]), std::bit_cast<std::uint32_t>(b.values[i]))
        << what << " value " << i << ": " << a.values[i] << " vs " << b.values[i];
  EXPECT_EQ(a.num_features, b.num_features) << what;
}

// The S shards read one by one and put together in shard order.
struct Shards {
  SparseRows rows;
  std::size_t lines = 0, bad_lines = 0, empty_shards = 0;
  unsigned label_kinds = 0;
};

Shards read_shards(const std::string& path, int S, LibsvmOptions o = {}) {
  Shards all;
  o.shards = S;
  for (int s = 0; s < S; ++s) {
    o.shard = s;
    const auto got = read_libsvm(path, o);
    for (std::size_t i = 0; i < got.rows.rows(); ++i)
      all.rows.add_row(got.rows.labels[i], got.rows.row_indices(i), got.rows.row_values(i));
    all.rows.num_features = std::max(all.rows.num_features, got.rows.num_features);
    all.lines += got.lines;
    all.bad_lines += got.bad_lines;
    all.empty_shards += got.lines == 0;
    all.label_kinds |= got.label_kinds;
  }
  return all;
}

// Random valid text in many spellings of the format.
struct Gen {
  std::mt19937_64 g;
  bool zero_one;  // labels 0/1, else -1/+1
  bool crlf, tabs, comments;

  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(g); }
  std::string blank() { return tabs && pick(3) == 0 ? (pick(2) ? "\t" : " \t ") : (pick(8) ? " " : "  "); }
  std::string label() {
    static const char* const zo[] = {"1", "+1", "1.0", "0", "0.0", "0", "1e0"};
    static const char* const pm[] = {"1", "+1", "1.0", "-1", "-1.0", "-1", "-1e0"};
    return (zero_one ? zo : pm)[pick(7)];
  }
  std::string value() {
    std::uniform_real_distribution<float> u(-1000.f, 1000.f);
    switch (pick(9)) {
      case 0: return std::to_string(static_cast<int>(pick(2001)) - 1000);
      case 1: return fmt::format("{}", u(g));
      case 2: return fmt::format("{:.3e}", u(g) * 1e-6f);
      case 3: return fmt::format("{:E}", u(g) * 1e20f);
      case 4: return "0";
      case 5: return "-0.0";
      case 6: return fmt::format("+{:.2f}", std::abs(u(g)));
      case 7: return fmt::format(".{}", pick(1000));
      default: return fmt::format("{}", std::ldexp(u(g), -130));  // subnormal
    }
  }
  std::string line() {
    std::string s = pick(10) ? "" : blank();
    s += label();
    const std::size_t k = pick(4) == 0 ? 0 : pick(30);
    std::uint64_t idx = 0;
    for (std::size_t j = 0; j < k; ++j) {
      idx += 1 + (pick(4) ? pick(20) : pick(100000));
      s += blank() + std::to_string(idx) + ":" + value();
    }
    if (pick(12) == 0) s += " 4294967295:1";  // the largest index
    if (pick(6) == 0) s += blank();
    if (comments && pick(5) == 0) s += (pick(2) ? " # note 3:4 #" : "#x");
    return s + (crlf ? "\r\n" : "\n");
  }
  std::string text(std::size_t lines, bool trailing_newline) {
    std::string t;
    for (std::size_t i = 0; i < lines; ++i) t += line();
    if (!trailing_newline && !t.empty()) t.erase(t.size() - (crlf ? 2 : 1));
    return t;
  }
};

TEST(LibsvmRandom, MatchesReferencePlainAndGzipForShards1To8) {
  test::TempDir d;
  for (std::uint64_t seed = 0; seed < 24; ++seed) {
    Gen gen{std::mt19937_64(seed), seed % 2 == 0, seed % 3 == 0, seed % 4 < 2, seed % 5 != 0};
    const std::size_t n = std::vector<std::size_t>{1, 2, 3, 5, 17, 200}[seed % 6];
    const auto text = gen.text(n, seed % 7 != 3);
    const auto want = reference(text);
    ASSERT_EQ(want.rows(), n);
    for (const auto& path : {d.file("a.svm", text), d.gzip_file("a.svm.z", text)}) {
      const auto what = fmt::format("seed {} {}", seed, path);
      const auto one = read_libsvm(path, {});
      expect_same(one.rows, want, what);
      EXPECT_EQ(one.lines, n);
      EXPECT_EQ(one.label_kinds & (gen.zero_one ? 2u : 1u), 0u) << what;
      for (int S = 1; S <= 8; ++S) {
        const auto all = read_shards(path, S);
        expect_same(all.rows, want, fmt::format("{} shards {}", what, S));
        EXPECT_EQ(all.lines, n) << what << " shards " << S;
        EXPECT_EQ(all.label_kinds, one.label_kinds);
      }
    }
  }
}

TEST(LibsvmShards, MoreShardsThanLinesLeavesEmptyShards) {
  test::TempDir d;
  const std::string text = "+1 1:1\n-1 2:2\n+1 3:3";  // no trailing newline
  const auto path = d.file("a.svm", text);
  for (int S = 1; S <= 8; ++S) {
    const auto all = read_shards(path, S);
    expect_same(all.rows, reference(text), fmt::format("S {}", S));
    EXPECT_EQ(all.lines, 3u);
    EXPECT_EQ(all.empty_shards, static_cast<std::size_t>(S > 3 ? S - 3 : 0)) << S;
  }
  // 20 shards of 20 bytes: most own no line start.
  EXPECT_EQ(read_shards(path, 20).empty_shards, 17u);
}

TEST(LibsvmShards, LinesLongerThanABlockCrossReads) {
  test::TempDir d;
  std::string text;
  for (int r = 0; r < 5; ++r) {
    text += r % 2 ? "-1" : "+1";
    for (int j = 1; j <= 3000 * (r + 1); ++j) text += fmt::format(" {}:{}", j, j * 0.5);
    text += r == 2 ? "\r\n" : "\n";
  }
  const auto want = reference(text);
  for (const auto& path : {d.file("a.svm", text), d.gzip_file("b", text)})
    for (int S = 1; S <= 8; ++S) expect_same(read_shards(path, S).rows, want, fmt::format("{} S {}", path, S));
}

TEST(LibsvmRead, ValueAndLabelSpellings) {
  test::TempDir d;
  const auto path = d.file("a.svm",
                           "\t+1\t1:+2.5  2:.5 3:1e-50 4:-7E+2 5:0 6:1e-40 7:-0#c 8:9\r\n"
                           "1.0 1:3.4028235e38 2:1.#comment\n"
                           "-1.0 # 1:2\r\n"
                           "-1e0 1:1e-45\n");
  const auto got = read_libsvm(path, {});
  ASSERT_EQ(got.rows.rows(), 4u);
  EXPECT_EQ(got.rows.labels, (std::vector<float>{1, 1, -1, -1}));
  EXPECT_EQ(got.rows.offsets, (std::vector<std::uint64_t>{0, 7, 9, 9, 10}));
  EXPECT_EQ(got.rows.indices, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 0, 1, 0}));
  const std::vector<float> want{2.5f, 0.5f, 0.f, -700.f, 0.f, 1e-40f, -0.f, FLT_MAX, 1.f, 1e-45f};
  ASSERT_EQ(got.rows.values.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got.rows.values[i]), std::bit_cast<std::uint32_t>(want[i])) << i;
  EXPECT_EQ(got.rows.num_features, 7u);
  EXPECT_EQ(got.label_kinds, 2u);
}

// A file whose line 4 is `bad`, among 8 good ones.
const std::string kGoodHead = "+1 1:1 3:0.5\n-1 2:2\n+1\n", kGoodTail = "-1 4:1\n+1 1:1\n-1 5:-1\n+1 6:6\n+1 1:2\n";
std::string with_bad_line(const std::string& bad) { return kGoodHead + bad + "\n" + kGoodTail; }

struct BadCase {
  std::string line, reason;
};

const std::vector<BadCase> kBadCases = {
    {"2 1:1", "label '2' is not one of -1/+1 or 0/1"},
    {"0.5 1:1", "label '0.5' is not one of -1/+1 or 0/1"},
    {"abc 1:1", "label 'abc' is not one of -1/+1 or 0/1"},
    {"+-1 1:1", "label '+-1' is not"},
    {"1:1 2:2", "label '1:1' is not"},
    {"nan 1:1", "label 'nan' is not"},
    {"1 0:1", "index 0 (indices are 1-based)"},
    {"1 3:1 2:1", "index 2 after index 3 (indices must be strictly increasing)"},
    {"1 3:1 3:2", "index 3 after index 3 (indices must be strictly increasing)"},
    {"1 4294967296:1", "index 4294967296 is too large"},
    {"1 99999999999999999999999:1", "index 99999999999999999999999 is too large"},
    {"1 3:nan", "value in '3:nan' is not a finite float"},
    {"1 3:inf", "value in '3:inf' is not a finite float"},
    {"1 3:-inf", "value in '3:-inf' is not a finite float"},
    {"1 3:1e39", "value in '3:1e39' is not a finite float"},
    {"1 3:abc", "bad value in '3:abc'"},
    {"1 3:", "bad value in '3:'"},
    {"1 3:1x", "bad value in '3:1x'"},
    {"1 3:1:2", "bad value in '3:1:2'"},
    {"1 3:+-1", "bad value in '3:+-1'"},
    {"1 3", "bad entry '3' (expected <index>:<value>)"},
    {"1 :3", "bad entry ':3'"},
    {"1 -3:1", "bad entry '-3:1'"},
    {"1 3 :1", "bad entry '3'"},
    {"1 a:1", "bad entry 'a:1'"},
    {"1 3:1\r 4:1", "bad value in '3:1\r'"},
    {"", "empty line"},
    {" \t ", "empty line"},
    {"\r", "empty line"},
    {"# a comment", "empty line"},
};

TEST(LibsvmErrors, EveryBadLineNamesFileAndLineAndSkipCountsIt) {
  test::TempDir d;
  for (const auto& c : kBadCases) {
    for (const auto& path : {d.file("bad.svm", with_bad_line(c.line)), d.gzip_file("bad.gz", with_bad_line(c.line))}) {
      try {
        read_libsvm(path, {});
        ADD_FAILURE() << "no error for '" << c.line << "'";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(path + ":4: " + c.reason), std::string::npos)
            << "line '" << c.line << "': " << e.what();
      }
      LibsvmOptions o;
      o.skip_bad_lines = true;
      const auto got = read_libsvm(path, o);
      EXPECT_EQ(got.lines, 9u);
      EXPECT_EQ(got.bad_lines, 1u);
      EXPECT_EQ(got.first_bad.rfind(path + ":4: " + c.reason, 0), 0u) << got.first_bad;
      expect_same(got.rows, reference(kGoodHead + kGoodTail), c.line);
      for (int S = 2; S <= 8; ++S) EXPECT_EQ(read_shards(path, S, o).bad_lines, 1u) << c.line << " S " << S;
    }
  }
}

TEST(LibsvmErrors, LineNumberIsTheWholeFilesInAnyShard) {
  test::TempDir d;
  std::string text;
  for (int i = 1; i <= 100; ++i) text += i == 70 ? "+1 5:bad!\n" : "-1 5:0.25\n";  // 10 bytes each
  for (const auto& path : {d.file("a.svm", text), d.gzip_file("a.gz", text)}) {
    LibsvmOptions o;
    o.shards = 4;
    for (o.shard = 0; o.shard < 4; ++o.shard) {
      if (o.shard != 2) {
        EXPECT_EQ(read_libsvm(path, o).lines, 25u);
        continue;
      }
      try {
        read_libsvm(path, o);
        ADD_FAILURE() << "shard 2 of 4 read the bad line";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(path + ":70: bad value in '5:bad!'"), std::string::npos) << e.what();
      }
    }
    o.shard = 2;
    o.skip_bad_lines = true;
    const auto got = read_libsvm(path, o);
    EXPECT_EQ(got.lines, 25u);
    EXPECT_EQ(got.rows.rows(), 24u);
    EXPECT_EQ(got.bad_lines, 1u);
    EXPECT_EQ(got.first_bad.rfind(path + ":70: ", 0), 0u) << got.first_bad;
  }
}

TEST(LibsvmErrors, LabelsMixingZeroAndMinusOne) {
  test::TempDir d;
  for (const auto& [text, kinds] : {std::pair{"+1 1:1\n0 1:1\n1\n-1 2:1\n0 3:1\n", 1u},
                                    std::pair{"-1 1:1\n1 1:1\n0 2:1\n-1 3:1\n", 2u}}) {
    const auto path = d.file("mix.svm", text);
    try {
      read_libsvm(path, {});
      ADD_FAILURE() << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path + (kinds == 1 ? ":4: " : ":3: ") + "labels mix 0/1 and -1/+1"),
                std::string::npos)
          << e.what();
    }
    LibsvmOptions o;
    o.skip_bad_lines = true;
    const auto got = read_libsvm(path, o);
    EXPECT_EQ(got.label_kinds, kinds);  // the skipped line set no bit
    EXPECT_EQ(got.bad_lines, 1u);
  }
  // Each shard sees one convention; the caller ORs the kinds and finds the mix.
  const auto path = d.file("split.svm", "0 1:1\n1 1:1\n-1 2:2\n1 1:1\n");  // 0 in shard 0, -1 in shard 1
  EXPECT_EQ(read_shards(path, 2).label_kinds, 3u);
  EXPECT_EQ(read_libsvm(d.file("p.svm", "1\n+1 2:1\n"), {}).label_kinds, 0u);
}

TEST(LibsvmNumFeatures, FromFileBoundAndDropBeyond) {
  test::TempDir d;
  const std::string text = "+1 1:1 7:2 12:3\n-1 2:1\n+1 11:1 30:4 31:5\n-1\n";
  const auto path = d.file("a.svm", text);
  EXPECT_EQ(read_libsvm(path, {}).rows.num_features, 31u);
  EXPECT_EQ(read_libsvm(d.file("none.svm", "1\n-1\n"), {}).rows.num_features, 0u);

  LibsvmOptions o;
  o.num_features = 31;
  EXPECT_EQ(read_libsvm(path, o).rows.num_features, 31u);
  o.num_features = 40;
  EXPECT_EQ(read_libsvm(path, o).rows.num_features, 40u);  // as given, not as seen
  o.num_features = 11;
  try {
    read_libsvm(path, o);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":1: index 12 is beyond num_features 11"), std::string::npos)
        << e.what();
  }
  o.drop_beyond = true;
  const auto got = read_libsvm(path, o);
  EXPECT_EQ(got.dropped, 3u);
  EXPECT_EQ(got.bad_lines, 0u);
  EXPECT_EQ(got.rows.num_features, 11u);
  EXPECT_EQ(got.rows.offsets, (std::vector<std::uint64_t>{0, 2, 3, 4, 4}));
  EXPECT_EQ(got.rows.indices, (std::vector<std::uint32_t>{0, 6, 1, 10}));
  // A bad line's drops do not count: the line is dropped whole.
  o.skip_bad_lines = true;
  const auto skipped = read_libsvm(d.file("b.svm", "1 20:1 2:1\n1 1:1 30:1\n"), o);
  EXPECT_EQ(skipped.dropped, 1u);
  EXPECT_EQ(skipped.bad_lines, 1u);
}

TEST(LibsvmRead, EmptyFileHasNoRowsInAnyShard) {
  test::TempDir d;
  for (const auto& path : {d.file("empty.svm", ""), d.gzip_file("empty.gz", "")}) {
    for (int S = 1; S <= 8; ++S) {
      const auto all = read_shards(path, S);
      EXPECT_EQ(all.lines, 0u);
      EXPECT_EQ(all.rows.rows(), 0u);
      EXPECT_EQ(all.rows.offsets, std::vector<std::uint64_t>{0});
      EXPECT_EQ(all.rows.num_features, 0u);
    }
  }
}

TEST(LibsvmRead, MissingFileTruncatedGzipAndBadShardAreInputErrors) {
  test::TempDir d;
  EXPECT_THROW(read_libsvm((d.path / "nope.svm").string(), {}), InputError);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += fmt::format("+1 {}:{}\n", i + 1, i);
  const auto gz = d.gzip_file("t.gz", text);
  std::filesystem::resize_file(gz, std::filesystem::file_size(gz) / 2);
  EXPECT_THROW(read_libsvm(gz, {}), InputError);
  EXPECT_THROW(read_libsvm(gz, {.shard = 1, .shards = 2}), InputError);
  const auto path = d.file("a.svm", "1 1:1\n");
  EXPECT_THROW(read_libsvm(path, {.shard = 2, .shards = 2}), InputError);
  EXPECT_THROW(read_libsvm(path, {.shard = -1, .shards = 2}), InputError);
  EXPECT_THROW(read_libsvm(path, {.shard = 0, .shards = 0}), InputError);
}

TEST(LibsvmFormat, RowsReadBackExactly) {
  test::TempDir d;
  std::mt19937_64 g(7);
  SparseRows rows;
  const std::vector<float> special{0.1f, -0.f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f, 1.f / 3, 16777217.f, 0.f};
  std::string text;
  for (int r = 0; r < 300; ++r) {
    std::vector<std::uint32_t> idx;
    std::vector<float> val;
    std::uint32_t at = 0;
    for (std::size_t k = g() % 20; k > 0; --k) {
      at += 1 + static_cast<std::uint32_t>(g() % 1000);
      idx.push_back(at - 1);
      const auto bits = static_cast<std::uint32_t>(g());
      const float f = std::bit_cast<float>(bits);
      val.push_back(g() % 3 == 0 ? special[g() % special.size()] : std::isfinite(f) ? f : 1.5f);
    }
    if (r == 0) idx.push_back(4294967294u), val.push_back(2.f);  // index 2^32 - 1 in the file
    rows.add_row(g() % 2 ? 1.f : -1.f, idx, val);
    rows.num_features = std::max<std::size_t>(rows.num_features, idx.empty() ? 0 : idx.back() + std::size_t{1});
    format_libsvm_row(rows.labels.back(), idx, val, text);
  }
  EXPECT_EQ(text.substr(0, 3), rows.labels[0] > 0 ? "+1 " : "-1 ");
  const auto got = read_libsvm(d.file("rt.svm", text), {});
  expect_same(got.rows, rows, "round trip");
  expect_same(reference(text), rows, "reference reads it too");
}

}  // namespace
}  // namespace sparq
