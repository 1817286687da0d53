#pragma once
// Plain sequential references for the collective tests: every rank's input
// is a pure function of (seed, rank, index), so any rank can compute what
// every other rank holds, and the expected result, with a simple loop.
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "sparq/coll/reduce_op.h"

namespace sparq::test {

template <class T>
std::vector<T> rank_input(std::size_t n, int rank, std::uint64_t seed = 1) {
  std::mt19937_64 g(seed * 1000003 + static_cast<std::uint64_t>(rank));
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(-1, 1);
    for (auto& x : v) x = d(g);
  } else {
    std::uniform_int_distribution<T> d(-1000, 1000);
    for (auto& x : v) x = d(g);
  }
  return v;
}

// The reduction in rank order 0, 1, ..., P-1, plus the bound on how far any
// other summation order can be from it: (P-1) * eps * sum |x| per element.
template <class T>
struct Reference {
  std::vector<T> value;
  std::vector<double> tolerance;
};

template <class T>
Reference<T> reference_reduce(std::size_t n, int nranks, ReduceOp op, std::uint64_t seed = 1) {
  Reference<T> ref{rank_input<T>(n, 0, seed), std::vector<double>(n, 0.0)};
  std::vector<double> abs_sum(n);
  for (std::size_t i = 0; i < n; ++i) abs_sum[i] = std::abs(static_cast<double>(ref.value[i]));
  for (int r = 1; r < nranks; ++r) {
    const auto x = rank_input<T>(n, r, seed);
    for (std::size_t i = 0; i < n; ++i) {
      T& a = ref.value[i];
      a = op == ReduceOp::Sum ? a + x[i] : op == ReduceOp::Min ? (x[i] < a ? x[i] : a) : (a < x[i] ? x[i] : a);
      abs_sum[i] += std::abs(static_cast<double>(x[i]));
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (op == ReduceOp::Sum)
      for (std::size_t i = 0; i < n; ++i)
        ref.tolerance[i] = (nranks - 1) * std::numeric_limits<T>::epsilon() * abs_sum[i];
  }
  return ref;
}

}  // namespace sparq::test
