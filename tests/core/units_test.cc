#include <gtest/gtest.h>

#include "sparq/core/dtype.h"
#include "sparq/core/units.h"

namespace sparq {
namespace {

TEST(Units, ParsesSizes) {
  EXPECT_EQ(parse_bytes("123"), 123u);
  EXPECT_EQ(parse_bytes("4KiB"), 4096u);
  EXPECT_EQ(parse_bytes("64MiB"), 64u << 20);
  EXPECT_EQ(parse_bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_bytes("3MB"), 3000000u);
  for (const char* bad : {"", "KiB", "4kib", "-1", "4 KiB", "99999999999999999999", "18446744073709551615GiB"})
    EXPECT_THROW(parse_bytes(bad), InputError) << bad;
}

TEST(Units, ParsesRanges) {
  EXPECT_EQ(parse_byte_range("4KiB:32KiB"), (std::vector<std::uint64_t>{4096, 8192, 16384, 32768}));
  EXPECT_EQ(parse_byte_range("1KiB,3000"), (std::vector<std::uint64_t>{1024, 3000}));
  EXPECT_EQ(parse_byte_range("5:5"), (std::vector<std::uint64_t>{5}));
  EXPECT_THROW(parse_byte_range("8KiB:4KiB"), InputError);
  EXPECT_THROW(parse_byte_range("0:4KiB"), InputError);
  EXPECT_THROW(parse_byte_range("1KiB,,2KiB"), InputError);
}

TEST(Errors, CarryLocationAndType) {
  try {
    SPARQ_THROW(InputError, "bad value {}", 42);
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bad value 42"), std::string::npos);
    EXPECT_NE(m.find("tests/core/units_test.cc:"), std::string::npos) << m;
  }
  try {
    try {
      SPARQ_THROW(TimeoutError, "slow");
    } catch (...) {
      rethrow_with_prefix("allreduce/ring");
    }
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("allreduce/ring: slow", 0), 0u);
  }
}

TEST(DType, ParsesAndDispatches) {
  EXPECT_EQ(parse_dtype("int64"), DType::I64);
  EXPECT_THROW(parse_dtype("bfloat16"), InputError);
  EXPECT_EQ(dispatch_dtype(DType::F64, []<class T>() { return sizeof(T); }), 8u);
}

}  // namespace
}  // namespace sparq
