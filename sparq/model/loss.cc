#include "sparq/model/loss.h"

#include <cmath>

#include "sparq/core/error.h"

namespace sparq {

template <class T>
T sigmoid(T z) {
  // Two branches so exp never overflows.
  if (z >= T(0)) return T(1) / (T(1) + std::exp(-z));
  const T e = std::exp(z);
  return e / (T(1) + e);
}

template <class T>
double bce_with_logits(std::span<const T> logits, std::span<const float> labels, std::span<T> dlogits) {
  const std::size_t B = logits.size();
  SPARQ_CHECK(labels.size() == B, "{} labels for {} logits", labels.size(), B);
  SPARQ_CHECK(dlogits.empty() || dlogits.size() == B, "dlogits size {} for batch {}", dlogits.size(), B);
  if (B == 0) return 0.0;
  double sum = 0.0;
  for (std::size_t i = 0; i < B; ++i) {
    const double z = static_cast<double>(logits[i]), y = labels[i];
    sum += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
  }
  if (!dlogits.empty()) {
    const T inv = T(1) / static_cast<T>(B);
    for (std::size_t i = 0; i < B; ++i) dlogits[i] = (sigmoid(logits[i]) - static_cast<T>(labels[i])) * inv;
  }
  return sum / static_cast<double>(B);
}

template float sigmoid<float>(float);
template double sigmoid<double>(double);
template double bce_with_logits<float>(std::span<const float>, std::span<const float>, std::span<float>);
template double bce_with_logits<double>(std::span<const double>, std::span<const float>, std::span<double>);

}  // namespace sparq
