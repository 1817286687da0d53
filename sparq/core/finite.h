#pragma once
// Finiteness of what enters a codec. A NaN or an infinity must stop a codec on
// the step it arrives: a threshold compare is false for NaN, so DCT-DP would
// park it in the error-feedback residual, unsent, until it surfaced steps
// later on every rank at once; a quantizer's range would turn every value of
// the row into NaN. Every exchange checks its input before any state changes.
#include <cstddef>
#include <source_location>
#include <span>
#include <string>

#include "sparq/core/error.h"

namespace sparq {

// Index of the first NaN or +-inf of x, or x.size() when every value is finite.
// One streaming pass (an OR of exponent tests, vectorized; the index is found
// only within a block that holds one).
std::size_t first_non_finite(std::span<const float> x);

// "nan", "inf" or "-inf" for a non-finite value (fmt prints these already; the
// name makes the messages' intent plain).
std::string non_finite_name(float v);

// Throws NonFiniteError "<what()> holds <value> at <i> of <n>" for the first
// non-finite value of x, located at the caller's file and line; `what` (a
// callable returning std::string) is only called on failure, so callers name
// the tensor, bucket, rank and step for free.
template <class What>
void check_finite(std::span<const float> x, What&& what, std::source_location at = std::source_location::current()) {
  const std::size_t i = first_non_finite(x);
  if (i != x.size()) [[unlikely]]
    throw NonFiniteError(detail::located(
        at.file_name(), static_cast<int>(at.line()),
        fmt::format("{} holds {} at {} of {}", what(), non_finite_name(x[i]), i, x.size())));
}

}  // namespace sparq
