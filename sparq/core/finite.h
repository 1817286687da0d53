#pragma once
// Finiteness of what enters a codec. A NaN or an infinity must stop a codec on
// the step it arrives: a threshold compare is false for NaN, so DCT-DP would
// park it in the error-feedback residual, unsent, until it surfaced steps
// later on every rank at once; a quantizer's range would turn every value of
// the row into NaN. Every exchange checks its input before any state changes.
#include <cstddef>
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

// Throws NonFiniteError "<what()> holds <value> at <i> of <n> [file:line]" for
// the first non-finite value of x; `what` (a callable returning std::string)
// is only called on failure, so callers name the tensor, bucket, rank and step
// for free. SPARQ_CHECK_FINITE passes the caller's file and line (clang 14,
// the fuzz build's compiler, has no std::source_location with libstdc++ 12).
template <class What>
void check_finite_at(std::span<const float> x, What&& what, const char* file, int line) {
  const std::size_t i = first_non_finite(x);
  if (i != x.size()) [[unlikely]]
    throw NonFiniteError(
        detail::located(file, line, fmt::format("{} holds {} at {} of {}", what(), non_finite_name(x[i]), i, x.size())));
}

}  // namespace sparq

// SPARQ_CHECK_FINITE(values, what): check_finite_at() at this file and line.
#define SPARQ_CHECK_FINITE(values, ...) ::sparq::check_finite_at((values), __VA_ARGS__, __FILE__, __LINE__)
