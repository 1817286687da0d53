#pragma once
// Packing of small unsigned codes (2, 4 or 8 bits) into bytes, shared by the
// row-wise and QSGD quantizers. Little-endian within a byte: code i of a group
// sits at bits [(i % per_byte) * bits, ...), so a 4-bit pair (a, b) becomes the
// byte a | b << 4. A packed run always starts on a byte boundary; unused high
// bits of its last byte are zero.
#include <cstddef>
#include <cstdint>
#include <span>

namespace sparq::compress {

// Throws InputError unless bits is 2, 4 or 8.
void check_code_bits(int bits);

constexpr std::size_t packed_bytes(std::size_t n, int bits) {
  return (n * static_cast<std::size_t>(bits) + 7) / 8;
}

// codes[i] < 2^bits (higher bits are masked off); out.size() == packed_bytes(codes.size(), bits).
void pack_codes(std::span<const std::uint8_t> codes, int bits, std::span<std::uint8_t> out);
// Inverse of pack_codes; in.size() == packed_bytes(codes.size(), bits).
void unpack_codes(std::span<const std::uint8_t> in, int bits, std::span<std::uint8_t> codes);

}  // namespace sparq::compress
