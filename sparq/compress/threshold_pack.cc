#include "sparq/compress/threshold_pack.h"

#include <bit>
#include <cmath>
#include <limits>

#include "sparq/compress/vec4.h"
#include "sparq/core/error.h"

namespace sparq::compress {

namespace {

// Blocks of 16 values: four vector compares give a 16-bit keep mask. At
// DCT-DP's sparsities most masks are 0 and the block costs four compares;
// otherwise only the set bits are visited (count-trailing-zeros), so the cost
// follows the kept count, with no unpredictable branch per value.
constexpr std::size_t kBlock = 16;

void check_sizes(std::size_t n, std::size_t idx, std::size_t val) {
  SPARQ_CHECK_AS(InputError, idx >= n && val >= n, "threshold pack: outputs of {} and {} for {} values", idx, val, n);
  SPARQ_CHECK_AS(InputError, n <= std::numeric_limits<std::uint32_t>::max(), "threshold pack: {} values exceed 2^32",
                 n);
}

inline std::size_t emit(unsigned mask, const float* w, std::size_t base, std::uint32_t* idx, float* val,
                        std::size_t k) {
  while (mask) {
    const int j = std::countr_zero(mask);
    idx[k] = static_cast<std::uint32_t>(base + static_cast<std::size_t>(j));
    val[k] = w[j];
    ++k;
    mask &= mask - 1;
  }
  return k;
}

// The ragged end (< kBlock values), scalar: the feedback form when g and err
// are given, else plain x.
std::size_t tail(const float* g, float* err, const float* x, std::size_t base, std::size_t n, float tau,
                 std::uint32_t* idx, float* val, std::size_t k) {
  for (std::size_t j = 0; j < n; ++j) {
    const float w = g ? g[j] + err[j] : x[j];
    const bool keep = std::fabs(w) >= tau;
    if (keep) idx[k] = static_cast<std::uint32_t>(base + j), val[k++] = w;
    if (err) err[j] = keep ? 0.0f : w;
  }
  return k;
}

}  // namespace

std::size_t threshold_pack(std::span<const float> x, float tau, std::span<std::uint32_t> idx, std::span<float> val) {
  const std::size_t n = x.size();
  check_sizes(n, idx.size(), val.size());
  const float* p = x.data();
  const Vec4 t = splat4(tau);
  std::size_t k = 0, i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    unsigned mask = 0;
    for (std::size_t q = 0; q < kBlock / 4; ++q)
      mask |= lane_bits(abs4(load4(p + i + 4 * q)) >= t) << (4 * q);
    if (mask) k = emit(mask, p + i, i, idx.data(), val.data(), k);
  }
  return tail(nullptr, nullptr, p + i, i, n - i, tau, idx.data(), val.data(), k);
}

std::size_t feedback_threshold_pack(std::span<const float> grad, std::span<float> err, float tau,
                                    std::span<std::uint32_t> idx, std::span<float> val) {
  const std::size_t n = err.size();
  SPARQ_CHECK_AS(InputError, grad.size() == n, "feedback pack: gradient {} vs residual {} values", grad.size(), n);
  check_sizes(n, idx.size(), val.size());
  const float* g = grad.data();
  float* e = err.data();
  const Vec4 t = splat4(tau), zero = splat4(0.0f);
  float w[kBlock];
  std::size_t k = 0, i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    unsigned mask = 0;
    for (std::size_t q = 0; q < kBlock / 4; ++q) {
      const Vec4 e4 = load4(e + i + 4 * q);
      const Vec4 w4 = load4(g + i + 4 * q) + e4;
      const Vec4i keep = abs4(w4) >= t;
      store4(w + 4 * q, w4);
      store4(e + i + 4 * q, keep ? zero : w4);
      mask |= lane_bits(keep) << (4 * q);
    }
    if (mask) k = emit(mask, w, i, idx.data(), val.data(), k);
  }
  return tail(g + i, e + i, nullptr, i, n - i, tau, idx.data(), val.data(), k);
}

}  // namespace sparq::compress
