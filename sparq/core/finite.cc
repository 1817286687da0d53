#include "sparq/core/finite.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "sparq/core/kernel_costs.h"

namespace sparq {

std::size_t first_non_finite(std::span<const float> x) {
  // An all-ones exponent is NaN or inf. Blocks of 1024 keep the test a
  // branch-free OR (which vectorizes) while bounding the rescan of a hit.
  constexpr std::size_t kBlock = 1024;
  constexpr std::uint32_t kExp = 0x7f800000u;
  const std::size_t n = x.size();
  const ChargedKernel charged("finite_check_per_value", Units{n});
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    std::uint32_t bad = 0;
    for (std::size_t i = b; i < e; ++i) bad |= (std::bit_cast<std::uint32_t>(x[i]) & kExp) == kExp ? 1u : 0u;
    if (bad) [[unlikely]]
      for (std::size_t i = b; i < e; ++i)
        if (!std::isfinite(x[i])) return i;
  }
  return n;
}

std::string non_finite_name(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

}  // namespace sparq
