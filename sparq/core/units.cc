#include "sparq/core/units.h"

#include <charconv>

#include "sparq/core/error.h"

namespace sparq {

std::uint64_t parse_bytes(std::string_view s) {
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  SPARQ_CHECK_AS(InputError, ec == std::errc() && p != s.data(),
                 "bad size '{}': expected a number with an optional unit (KiB, MiB, GiB, kB, MB, GB)", s);
  std::string_view unit(p, s.data() + s.size() - p);
  struct U { std::string_view name; std::uint64_t mult; };
  static constexpr U units[] = {{"", 1},          {"B", 1},
                                {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
                                {"kB", 1000},     {"KB", 1000},
                                {"MB", 1000000},  {"GB", 1000000000}};
  for (const U& u : units) {
    if (unit == u.name) {
      SPARQ_CHECK_AS(InputError, n <= UINT64_MAX / u.mult, "size '{}' overflows", s);
      return n * u.mult;
    }
  }
  SPARQ_THROW(InputError, "bad size unit in '{}' (KiB, MiB, GiB, kB, MB, GB)", s);
}

std::vector<std::uint64_t> parse_byte_range(std::string_view s) {
  std::vector<std::uint64_t> out;
  if (auto colon = s.find(':'); colon != std::string_view::npos) {
    std::uint64_t lo = parse_bytes(s.substr(0, colon));
    std::uint64_t hi = parse_bytes(s.substr(colon + 1));
    SPARQ_CHECK_AS(InputError, lo > 0 && lo <= hi, "bad size range '{}': need 0 < low <= high", s);
    for (std::uint64_t b = lo; b <= hi; b *= 2) {
      out.push_back(b);
      if (b > UINT64_MAX / 2) break;
    }
    return out;
  }
  while (!s.empty()) {
    auto comma = s.find(',');
    out.push_back(parse_bytes(s.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  SPARQ_CHECK_AS(InputError, !out.empty(), "empty size list");
  return out;
}

}  // namespace sparq
