#include "sparq/compress/topk.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sparq/core/error.h"
#include "sparq/core/finite.h"

namespace sparq::compress {

namespace {

// |x| (or |x + y|) into scratch (resized to x.size()); NonFiniteError on NaN
// or inf (an infinite magnitude would always be kept, and sent).
void magnitudes(std::span<const float> x, std::span<const float> y, std::vector<float>& scratch) {
  scratch.resize(x.size());
  float* m = scratch.data();
  if (y.empty()) {
    for (std::size_t i = 0; i < x.size(); ++i) m[i] = std::fabs(x[i]);
  } else {
    for (std::size_t i = 0; i < x.size(); ++i) m[i] = std::fabs(x[i] + y[i]);
  }
  SPARQ_CHECK_AS(NonFiniteError, first_non_finite(scratch) == x.size(),
                 "magnitude selection: input of {} values holds NaN or inf", x.size());
}

// Element `pos` (< size) of the ascending order of the magnitudes in scratch;
// reorders scratch.
float select_ascending(std::vector<float>& scratch, std::size_t pos) {
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(pos), scratch.end());
  return scratch[pos];
}

}  // namespace

std::size_t dropped_count(std::size_t n, double eta) {
  SPARQ_CHECK_AS(InputError, eta >= 0.0 && eta <= 1.0, "sparsity factor eta = {} outside [0, 1]", eta);
  const auto d = static_cast<std::size_t>(std::floor(static_cast<double>(n) * eta + 1e-9));
  return std::min(d, n);
}

float sparsity_threshold(std::span<const float> x, double eta, std::vector<float>& scratch) {
  return sparsity_threshold_of_sum(x, {}, eta, scratch);
}

float sparsity_threshold_of_sum(std::span<const float> x, std::span<const float> y, double eta,
                                std::vector<float>& scratch) {
  SPARQ_CHECK_AS(InputError, y.empty() || y.size() == x.size(), "sparsity threshold: sizes {} and {} differ",
                 x.size(), y.size());
  const std::size_t pos = dropped_count(x.size(), eta);
  magnitudes(x, y, scratch);
  if (pos >= x.size()) return std::numeric_limits<float>::infinity();
  return select_ascending(scratch, pos);
}

void topk_indices(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& idx,
                  std::vector<float>& scratch) {
  const std::size_t n = x.size();
  SPARQ_CHECK_AS(InputError, n <= std::numeric_limits<std::uint32_t>::max(), "top-k: {} values exceed 2^32", n);
  k = std::min(k, n);
  magnitudes(x, {}, scratch);
  idx.clear();
  if (k == 0) return;
  // tau = the k-th largest magnitude; everything above it is in, and the
  // remaining slots go to the lowest indices holding exactly tau.
  const float tau = select_ascending(scratch, n - k);
  std::size_t above = 0;
  for (std::size_t i = 0; i < n; ++i) above += std::fabs(x[i]) > tau ? 1 : 0;
  std::size_t ties = k - above;
  idx.reserve(k);
  for (std::size_t i = 0; i < n; ++i) {
    const float m = std::fabs(x[i]);
    if (m > tau || (m == tau && ties > 0)) {
      if (m == tau) --ties;
      idx.push_back(static_cast<std::uint32_t>(i));
    }
  }
}

void bucket_topk(std::span<const float> x, std::size_t bucket, std::size_t k, std::vector<std::uint32_t>& idx,
                 std::vector<float>& val) {
  SPARQ_CHECK_AS(InputError, bucket > 0, "bucket top-k: bucket size must be > 0");
  SPARQ_CHECK_AS(InputError, x.size() <= std::numeric_limits<std::uint32_t>::max(),
                 "bucket top-k: {} values exceed 2^32", x.size());
  idx.clear();
  val.clear();
  std::vector<std::uint32_t> local;
  std::vector<float> scratch;
  for (std::size_t first = 0; first < x.size(); first += bucket) {
    const std::size_t len = std::min(bucket, x.size() - first);
    topk_indices(x.subspan(first, len), k, local, scratch);
    for (std::uint32_t j : local) {
      idx.push_back(static_cast<std::uint32_t>(first + j));
      val.push_back(x[first + j]);
    }
  }
}

}  // namespace sparq::compress
