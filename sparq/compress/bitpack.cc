#include "sparq/compress/bitpack.h"

#include <bit>
#include <cstring>

#include "sparq/core/error.h"

namespace sparq::compress {

static_assert(std::endian::native == std::endian::little, "byte order of the u32 spread below");

void check_code_bits(int bits) {
  SPARQ_CHECK_AS(InputError, bits == 2 || bits == 4 || bits == 8, "code width must be 2, 4 or 8 bits, got {}", bits);
}

void pack_codes(std::span<const std::uint8_t> codes, int bits, std::span<std::uint8_t> out) {
  check_code_bits(bits);
  const std::size_t n = codes.size();
  SPARQ_CHECK(out.size() == packed_bytes(n, bits), "packed size {} for {} codes at {} bits", out.size(), n, bits);
  const std::uint8_t* c = codes.data();
  std::uint8_t* o = out.data();
  // Full groups first, written as fixed-width expressions GCC vectorizes; the
  // ragged tail (fewer codes than a byte holds) is padded with zero codes.
  if (bits == 8) {
    for (std::size_t i = 0; i < n; ++i) o[i] = c[i];
  } else if (bits == 4) {
    const std::size_t full = n / 2;
    for (std::size_t j = 0; j < full; ++j)
      o[j] = static_cast<std::uint8_t>((c[2 * j] & 0xF) | (c[2 * j + 1] << 4));
    if (n % 2) o[full] = c[n - 1] & 0xF;
  } else {
    const std::size_t full = n / 4;
    for (std::size_t j = 0; j < full; ++j)
      o[j] = static_cast<std::uint8_t>((c[4 * j] & 3) | (c[4 * j + 1] & 3) << 2 | (c[4 * j + 2] & 3) << 4 |
                                       (c[4 * j + 3] << 6));
    if (n % 4) {
      std::uint8_t b = 0;
      for (std::size_t i = 4 * full; i < n; ++i) b |= static_cast<std::uint8_t>((c[i] & 3) << (2 * (i - 4 * full)));
      o[full] = b;
    }
  }
}

void unpack_codes(std::span<const std::uint8_t> in, int bits, std::span<std::uint8_t> codes) {
  check_code_bits(bits);
  const std::size_t n = codes.size();
  SPARQ_CHECK(in.size() == packed_bytes(n, bits), "packed size {} for {} codes at {} bits", in.size(), n, bits);
  const std::uint8_t* p = in.data();
  std::uint8_t* c = codes.data();
  // Per-width loops with constant shifts, the mirror of pack_codes.
  if (bits == 8) {
    for (std::size_t i = 0; i < n; ++i) c[i] = p[i];
  } else if (bits == 4) {
    const std::size_t full = n / 2;
    for (std::size_t j = 0; j < full; ++j) {
      c[2 * j] = p[j] & 0xF;
      c[2 * j + 1] = static_cast<std::uint8_t>(p[j] >> 4);
    }
    if (n % 2) c[n - 1] = p[full] & 0xF;
  } else {
    const std::size_t full = n / 4;
    // Spread the four 2-bit fields of a byte into the four bytes of a
    // little-endian u32 with shifts and one mask: an element-wise loop GCC
    // vectorizes, where four strided byte stores would stay scalar.
    for (std::size_t j = 0; j < full; ++j) {
      const std::uint32_t b = p[j];
      const std::uint32_t w = (b | b << 6 | b << 12 | b << 18) & 0x03030303u;
      std::memcpy(c + 4 * j, &w, 4);
    }
    for (std::size_t i = 4 * full; i < n; ++i) c[i] = (p[full] >> (2 * (i - 4 * full))) & 3;
  }
}

}  // namespace sparq::compress
