#pragma once
// Errors at the library boundary. Every failure is an exception carrying the
// values that explain it and the source location that raised it; the CLI turns
// it into one line and a non-zero exit. Library code never calls exit().
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace sparq {

// Base of every error sparq throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A blocking wait that saw no progress within its timeout.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A message from a peer that violates its format (sizes, index ranges, ...).
class WireError : public Error {
 public:
  using Error::Error;
};

// Bad input from the user: a flag, a file, a value out of range.
class InputError : public Error {
 public:
  using Error::Error;
};

// A NaN or an infinity where a codec needs finite values (a diverging model,
// a bad input feature). Caught apart from other bad input where the user
// asked to skip such steps (--non-finite skip).
class NonFiniteError : public InputError {
 public:
  using InputError::InputError;
};

// Another rank failed, so this one stopped waiting.
class AbortedError : public Error {
 public:
  using Error::Error;
};

namespace detail {
std::string located(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace sparq

// SPARQ_THROW(Type, "fmt {}", args...): throw Type with "file:line: message".
#define SPARQ_THROW(Type, ...) \
  throw Type(::sparq::detail::located(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)))

// SPARQ_CHECK(cond, "fmt {}", args...): throw sparq::Error unless cond holds.
#define SPARQ_CHECK(cond, ...)                                                  \
  do {                                                                          \
    if (!(cond)) [[unlikely]]                                                   \
      SPARQ_THROW(::sparq::Error, "check failed: {}: {}", #cond,                \
                  ::fmt::format(__VA_ARGS__));                                  \
  } while (0)

// SPARQ_CHECK_AS(Type, cond, ...): same, with a chosen error type.
#define SPARQ_CHECK_AS(Type, cond, ...)                \
  do {                                                 \
    if (!(cond)) [[unlikely]] SPARQ_THROW(Type, __VA_ARGS__); \
  } while (0)

namespace sparq {
// Inside a catch block: rethrows the current exception with "prefix: " put in
// front of its message, keeping its sparq error type (callers dispatch on it).
// Non-sparq exceptions become sparq::Error.
[[noreturn]] void rethrow_with_prefix(const std::string& prefix);
}  // namespace sparq
