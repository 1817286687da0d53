#pragma once
// CRC-32 of zlib and gzip (reflected polynomial 0xEDB88320), the checksum of
// sparq's checkpoint files: crc32(crc32(0, a), b) == crc32(0, a ++ b), as
// zlib's crc32_z, whose values it returns.
#include <cstddef>
#include <cstdint>

namespace sparq {

std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t n);

}  // namespace sparq
