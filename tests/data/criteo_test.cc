#include <gtest/gtest.h>

#include <cmath>

#include "sparq/data/criteo.h"
#include "sparq/data/hash.h"

namespace sparq {
namespace {

std::string line_with(const std::string& label, const std::string& i1, const std::string& c1) {
  std::string s = label + "\t" + i1;
  // '\t' and the number appended one by one: g++ 12 warns falsely
  // (-Wrestrict) on s += "\t" + std::to_string(i).
  for (int i = 1; i < 13; ++i) (s += '\t') += std::to_string(i);
  s += "\t" + c1;
  for (int i = 1; i < 26; ++i) s += "\tff";
  return s;
}

TEST(Criteo, ParsesAndTransforms) {
  CriteoRecord r;
  std::string why;
  ASSERT_TRUE(parse_criteo_line(line_with("1", "5", "68fd1e64"), r, why)) << why;
  EXPECT_EQ(r.label, 1.f);
  EXPECT_FLOAT_EQ(r.dense[0], std::log1p(5.f));
  EXPECT_FLOAT_EQ(r.dense[12], std::log1p(12.f));
  EXPECT_EQ(r.sparse[0], 0x68fd1e64u);
  EXPECT_EQ(r.sparse[25], 0xffu);
}

TEST(Criteo, EmptyAndNegativeFields) {
  CriteoRecord r;
  std::string why;
  ASSERT_TRUE(parse_criteo_line(line_with("0", "", "") + "\r", r, why)) << why;
  EXPECT_EQ(r.dense[0], 0.f);
  EXPECT_EQ(r.sparse[0], 0u);
  ASSERT_TRUE(parse_criteo_line(line_with("0", "-3", "0"), r, why)) << why;
  EXPECT_EQ(r.dense[0], 0.f);  // log(1 + max(x, 0))
}

TEST(Criteo, MalformedLinesSayWhy) {
  CriteoRecord r;
  std::string why;
  EXPECT_FALSE(parse_criteo_line(line_with("2", "1", "a"), r, why));
  EXPECT_NE(why.find("label"), std::string::npos) << why;
  EXPECT_FALSE(parse_criteo_line(line_with("1", "x1", "a"), r, why));
  EXPECT_NE(why.find("not an integer"), std::string::npos) << why;
  EXPECT_FALSE(parse_criteo_line(line_with("1", "99999999999999999999", "a"), r, why));
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
  EXPECT_FALSE(parse_criteo_line(line_with("1", "1", "zz"), r, why));
  EXPECT_NE(why.find("hex"), std::string::npos) << why;
  EXPECT_FALSE(parse_criteo_line(line_with("1", "1", "123456789"), r, why));
  EXPECT_NE(why.find("8 hex digits"), std::string::npos) << why;
  EXPECT_FALSE(parse_criteo_line("1\t2\t3", r, why));
  EXPECT_NE(why.find("3 tab-separated fields"), std::string::npos) << why;
  EXPECT_FALSE(parse_criteo_line(line_with("1", "1", "a") + "\t7", r, why));
  EXPECT_NE(why.find("more than 40"), std::string::npos) << why;
}

TEST(Criteo, FormatParsesBack) {
  std::int64_t ints[13];
  bool present[13];
  std::uint32_t cats[26];
  for (int i = 0; i < 13; ++i) ints[i] = i * 1000 - 1, present[i] = i % 3 != 0;
  for (int i = 0; i < 26; ++i) cats[i] = 0x9E3779B1u * static_cast<std::uint32_t>(i);
  std::string s;
  format_criteo_line(1.f, ints, present, cats, s);
  ASSERT_EQ(s.back(), '\n');
  s.pop_back();
  CriteoRecord r;
  std::string why;
  ASSERT_TRUE(parse_criteo_line(s, r, why)) << why;
  for (int i = 0; i < 13; ++i) EXPECT_EQ(r.dense[i], criteo_dense_transform(present[i] ? ints[i] : 0));
  for (int i = 0; i < 26; ++i) EXPECT_EQ(r.sparse[i], cats[i]);
}

TEST(Hash, InRangeAndSpread) {
  std::vector<int> hist(10, 0);
  for (std::uint32_t v = 0; v < 10000; ++v) {
    const auto r = categorical_row(v, 3, 10);
    ASSERT_LT(r, 10u);
    ++hist[r];
  }
  for (int h : hist) EXPECT_NEAR(h, 1000, 150);
  EXPECT_NE(categorical_row(12345, 0, 1u << 20), categorical_row(12345, 1, 1u << 20));
}

}  // namespace
}  // namespace sparq
