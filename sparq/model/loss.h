#pragma once
// Binary cross-entropy computed from logits, never from a rounded sigmoid:
//   l(z, y) = max(z, 0) - z y + log(1 + exp(-|z|))
// is exact for any z (no overflow of exp, no log(0)), and
//   dl/dz = sigmoid(z) - y.
// The batch loss is the mean, as the reference's BCELoss(reduction="mean").
#include <cstddef>
#include <span>

namespace sparq {

// Returns the mean loss over the batch; writes dlogits = (sigmoid(z) - y) / B.
// dlogits may be empty (evaluation only).
template <class T>
double bce_with_logits(std::span<const T> logits, std::span<const float> labels, std::span<T> dlogits);

template <class T>
T sigmoid(T z);

}  // namespace sparq
