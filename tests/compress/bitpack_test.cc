#include "sparq/compress/bitpack.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

TEST(Bitpack, LayoutIsLowBitsFirst) {
  const std::vector<std::uint8_t> codes{1, 2, 3};
  std::vector<std::uint8_t> out(packed_bytes(3, 4));
  pack_codes(codes, 4, out);
  EXPECT_EQ(out, (std::vector<std::uint8_t>{0x21, 0x03}));
  std::vector<std::uint8_t> out2(packed_bytes(5, 2));
  pack_codes(std::vector<std::uint8_t>{3, 0, 1, 2, 1}, 2, out2);
  EXPECT_EQ(out2, (std::vector<std::uint8_t>{0b10010011, 0b01}));
}

TEST(Bitpack, RoundTripsEveryWidthAndLength) {
  std::mt19937 rng(1);
  for (int bits : {2, 4, 8})
    for (std::size_t n = 0; n < 70; ++n) {
      std::vector<std::uint8_t> codes(n);
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng() % (1u << bits));
      std::vector<std::uint8_t> packed(packed_bytes(n, bits)), back(n);
      pack_codes(codes, bits, packed);
      // Reference bit reader: code i at bit offset i*bits of a little-endian stream.
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t bit = i * static_cast<std::size_t>(bits);
        ASSERT_EQ((packed[bit / 8] >> (bit % 8)) & ((1u << bits) - 1), codes[i]) << bits << " " << i;
      }
      if (n * bits % 8) {
        ASSERT_EQ(packed.back() >> (n * bits % 8), 0) << "padding bits must be zero";
      }
      unpack_codes(packed, bits, back);
      ASSERT_EQ(back, codes);
    }
}

TEST(Bitpack, RejectsBadWidthAndSizes) {
  std::vector<std::uint8_t> codes(4), out(2);
  EXPECT_THROW(pack_codes(codes, 3, out), InputError);
  EXPECT_THROW(pack_codes(codes, 4, std::span(out).first(1)), Error);
  EXPECT_THROW(unpack_codes(std::span(out).first(1), 4, codes), Error);
}

}  // namespace
}  // namespace sparq::compress
