#include "sparq/compress/threshold_pack.h"

#include <cmath>
#include <limits>

#include "sparq/core/error.h"

namespace sparq::compress {

namespace {

// At DCT-DP's sparsities (90-99.9% dropped) most blocks of 16 hold no kept
// entry: a vectorized any-test skips them, and only blocks with a hit run the
// branch-free compaction (write every pair, advance the cursor by the mask).
constexpr std::size_t kBlock = 16;

void check_sizes(std::size_t n, std::size_t idx, std::size_t val) {
  SPARQ_CHECK_AS(InputError, idx >= n && val >= n, "threshold pack: outputs of {} and {} for {} values", idx, val, n);
  SPARQ_CHECK_AS(InputError, n <= std::numeric_limits<std::uint32_t>::max(), "threshold pack: {} values exceed 2^32",
                 n);
}

// One block of n <= kBlock values starting at index `base`, already in w.
inline std::size_t pack_block(const float* w, std::size_t n, std::size_t base, float tau, std::uint32_t* idx,
                              float* val, std::size_t k) {
  for (std::size_t j = 0; j < n; ++j) {
    idx[k] = static_cast<std::uint32_t>(base + j);
    val[k] = w[j];
    k += std::fabs(w[j]) >= tau ? 1 : 0;
  }
  return k;
}

}  // namespace

std::size_t threshold_pack(std::span<const float> x, float tau, std::span<std::uint32_t> idx, std::span<float> val) {
  const std::size_t n = x.size();
  check_sizes(n, idx.size(), val.size());
  const float* p = x.data();
  std::size_t k = 0, i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int any = 0;
    for (std::size_t j = 0; j < kBlock; ++j) any |= std::fabs(p[i + j]) >= tau ? 1 : 0;
    if (any) k = pack_block(p + i, kBlock, i, tau, idx.data(), val.data(), k);
  }
  // The cursor k never passes the index being written (k <= i + j), so the
  // unconditional stores stay inside the n-sized outputs.
  return pack_block(p + i, n - i, i, tau, idx.data(), val.data(), k);
}

std::size_t feedback_threshold_pack(std::span<const float> grad, std::span<float> err, float tau,
                                    std::span<std::uint32_t> idx, std::span<float> val) {
  const std::size_t n = err.size();
  SPARQ_CHECK_AS(InputError, grad.empty() || grad.size() == n, "feedback pack: gradient {} vs residual {} values",
                 grad.size(), n);
  check_sizes(n, idx.size(), val.size());
  const float* g = grad.data();
  float* e = err.data();
  const bool has_grad = !grad.empty();
  float w[kBlock];
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; i += kBlock) {
    const std::size_t len = n - i < kBlock ? n - i : kBlock;
    int any = 0;
    if (len == kBlock && has_grad) {
      // The common case as a fixed-trip loop GCC vectorizes fully.
      for (std::size_t j = 0; j < kBlock; ++j) {
        w[j] = g[i + j] + e[i + j];
        const bool keep = std::fabs(w[j]) >= tau;
        any |= keep ? 1 : 0;
        e[i + j] = keep ? 0.0f : w[j];
      }
    } else {
      for (std::size_t j = 0; j < len; ++j) {
        w[j] = has_grad ? g[i + j] + e[i + j] : e[i + j];
        const bool keep = std::fabs(w[j]) >= tau;
        any |= keep ? 1 : 0;
        e[i + j] = keep ? 0.0f : w[j];
      }
    }
    if (any) k = pack_block(w, len, i, tau, idx.data(), val.data(), k);
  }
  return k;
}

}  // namespace sparq::compress
