#include "sparq/core/crc32.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <vector>

namespace sparq {
namespace {

std::uint32_t zlib_crc(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  return n == 0 ? crc : static_cast<std::uint32_t>(crc32_z(crc, p, n));
}

// Against zlib's crc32_z: every length to 1 KiB and some long ones, at every
// alignment of the first byte, from zero and from a running CRC.
TEST(Crc32, EqualsZlib) {
  std::mt19937 rng(7);
  std::vector<unsigned char> buf((1 << 20) + 64);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 1024; ++n) lengths.push_back(n);
  for (std::size_t n : {4095u, 4096u, 65537u, 1u << 20}) lengths.push_back(n);
  for (std::size_t n : lengths)
    for (std::size_t at : {0u, 1u, 3u, 8u, 15u}) {
      const unsigned char* p = buf.data() + at;
      ASSERT_EQ(crc32(0, p, n), zlib_crc(0, p, n)) << n << " bytes at +" << at;
      ASSERT_EQ(crc32(0xdeadbeef, p, n), zlib_crc(0xdeadbeef, p, n)) << n << " bytes at +" << at;
    }
}

TEST(Crc32, ChainsAndKnownValue) {
  const char text[] = "123456789";
  EXPECT_EQ(crc32(0, text, 9), 0xcbf43926u);  // the CRC-32 check value
  std::vector<unsigned char> buf(10000);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 31 + 7);
  for (std::size_t cut : {0u, 1u, 255u, 256u, 5000u, 9999u})
    EXPECT_EQ(crc32(crc32(0, buf.data(), cut), buf.data() + cut, buf.size() - cut), crc32(0, buf.data(), buf.size()));
  buf.assign(4096, 0);  // all zeros: the folds' constants alone
  EXPECT_EQ(crc32(0, buf.data(), buf.size()), zlib_crc(0, buf.data(), buf.size()));
}

}  // namespace
}  // namespace sparq
