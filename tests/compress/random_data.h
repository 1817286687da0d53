#pragma once
// Seeded test inputs shared by the compression tests.
#include <random>
#include <vector>

namespace sparq::compress::test {

// n draws of N(mean, sd^2), reproducible from the seed.
inline std::vector<float> normal(std::size_t n, unsigned seed, float sd = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace sparq::compress::test
