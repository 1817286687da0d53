#pragma once
// The rows sparq/cuda's row-wise code is tested on (as the GPU codecs' are,
// tests/python/gpu_codec_cases.py): random and adversarial rows of `cols`
// values, and a residual for error compensation.
#include <random>
#include <string>
#include <vector>

namespace sparq::cuda_test {

struct Input {
  std::string name;
  std::vector<float> x;
};

inline std::vector<Input> inputs(int cols) {
  std::mt19937 g(static_cast<unsigned>(cols));
  std::normal_distribution<float> normal;
  const int rows = 37, n = rows * cols;
  std::vector<Input> v;
  auto make = [&](std::string name, auto f) {
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = f(i);
    v.push_back({std::move(name), std::move(x)});
  };
  make("random", [&](int) { return normal(g); });
  make("zeros", [](int) { return 0.0f; });
  std::vector<float> row_value(rows);
  for (float& r : row_value) r = normal(g);
  make("constant rows", [&](int i) { return row_value[i / cols]; });
  make("one huge value", [&](int i) { return i % (cols + 1) == 0 ? 3e37f : normal(g); });
  make("denormals", [](int i) { return static_cast<float>(i % 97) * 1e-41f; });
  make("signed zeros", [](int i) { return i % 3 == 0 ? -0.0f : 0.0f; });
  make("half steps", [&](int) { return static_cast<float>(static_cast<int>(g() % 9) - 4) * 0.5f; });
  make("wide", [&](int) { return normal(g) * 1e5f; });
  make("just below fp16's top", [&](int i) { return i % 2 ? 65504.0f : -65504.0f + normal(g); });
  return v;
}

inline std::vector<float> residual(std::size_t n) {
  std::mt19937 g(5);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> e(n);
  for (float& v : e) v = normal(g);
  return e;
}

}  // namespace sparq::cuda_test
