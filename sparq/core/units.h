#pragma once
// Human byte sizes ("4KiB", "64MiB", "1000") and size ranges for the CLI.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sparq {

// "123", "4KiB", "16MiB", "1GiB", "2kB", "3MB" -> bytes. Throws InputError.
std::uint64_t parse_bytes(std::string_view s);

// "4KiB:64MiB" -> every power-of-two multiple from 4 KiB to 64 MiB;
// "1KiB,3KiB,1MiB" -> that list. Throws InputError.
std::vector<std::uint64_t> parse_byte_range(std::string_view s);

}  // namespace sparq
