#pragma once
// Seeded test inputs shared by the compression tests.
#include <random>
#include <vector>

namespace sparq::compress::test {

// n draws of N(0, 1), reproducible from the seed.
inline std::vector<float> normal(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace sparq::compress::test
