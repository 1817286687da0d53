#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sparq/core/error.h"
#include "sparq/data/binary_format.h"
#include "tests/data/temp_dir.h"

namespace sparq {
namespace {

std::vector<CriteoRecord> some(std::size_t n) {
  std::vector<CriteoRecord> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i].label = static_cast<float>(i % 2);
    for (std::size_t f = 0; f < kCriteoDense; ++f) v[i].dense[f] = static_cast<float>(i) * 0.5f + f;
    for (std::size_t t = 0; t < kCriteoSparse; ++t) v[i].sparse[t] = static_cast<std::uint32_t>(i * 31 + t);
  }
  return v;
}

TEST(BinaryFormat, RoundTrip) {
  test::TempDir d;
  const auto p = (d.path / "x.bin").string();
  const auto v = some(1000);
  {
    BinaryWriter w(p);
    w.write(std::span(v).first(400));
    w.write(std::span(v).subspan(400));
    w.close(7);
  }
  EXPECT_TRUE(is_binary_records(p));
  MappedRecords m(p);
  ASSERT_EQ(m.records().size(), 1000u);
  EXPECT_EQ(m.bad_lines(), 7u);
  EXPECT_EQ(std::memcmp(m.records().data(), v.data(), v.size() * sizeof(CriteoRecord)), 0);
}

TEST(BinaryFormat, TruncatedOrForeignFilesAreInputErrors) {
  test::TempDir d;
  const auto p = (d.path / "x.bin").string();
  {
    BinaryWriter w(p);
    w.write(some(10));
  }
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 1);
  try {
    MappedRecords m(p);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos);
  }
  EXPECT_THROW(MappedRecords(d.file("t.tsv", std::string(100, 'x'))), InputError);
  EXPECT_THROW(MappedRecords(d.file("e.bin", "")), InputError);
  EXPECT_THROW(MappedRecords("/nonexistent"), InputError);
  EXPECT_FALSE(is_binary_records(d.file("t2.tsv", "0\t1\n")));
}

// A header count whose byte size wraps around 2^64 onto the file's size
// (10 + 2^59 records of 160 bytes) must not pass the size check.
TEST(BinaryFormat, CountThatOverflowsIsAnInputError) {
  test::TempDir d;
  const auto p = (d.path / "x.bin").string();
  {
    BinaryWriter w(p);
    w.write(some(10));
  }
  {
    std::FILE* f = std::fopen(p.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const std::uint64_t count = 10 + (std::uint64_t{1} << 59);
    std::fseek(f, 24, SEEK_SET);  // the header's count
    std::fwrite(&count, 8, 1, f);
    std::fclose(f);
  }
  EXPECT_THROW(MappedRecords{p}, InputError);
}

}  // namespace
}  // namespace sparq
