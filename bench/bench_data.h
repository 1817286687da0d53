#pragma once
// Inputs shared by the benchmarks: gradient-like data (normal, fixed seed)
// and the compression benchmarks' sizes.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace sparq::bench {

inline constexpr std::int64_t k1M = 1 << 20, k16M = 1 << 24;

inline std::vector<float> normal_floats(std::size_t n, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace sparq::bench
