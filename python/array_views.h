#pragma once
// numpy arrays as spans for the bindings. Arrays cross as views of CPU
// tensors, never copied: an array that would need a copy (another dtype, not
// contiguous, read-only where the result is written) is refused, because the
// result would land in the copy.
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "sparq/core/error.h"

namespace sparq::py_views {

namespace py = pybind11;

// A contiguous array of T as a span (one the result is written into when
// `writable`); `what` names it in errors.
template <class T>
std::span<T> span_of(py::array& a, const std::string& what, bool writable, const char* type_name) {
  SPARQ_CHECK_AS(InputError, a.dtype().is(py::dtype::of<std::remove_const_t<T>>()), "{}: dtype {} where {} is needed",
                 what, std::string(py::str(a.dtype())), type_name);
  SPARQ_CHECK_AS(InputError, (a.flags() & py::array::c_style) != 0, "{}: not contiguous", what);
  SPARQ_CHECK_AS(InputError, !writable || a.writeable(), "{}: read-only", what);
  return {static_cast<T*>(const_cast<void*>(a.data())), static_cast<std::size_t>(a.size())};
}

inline std::span<float> float_span(py::array& a, const std::string& what, bool writable = true) {
  return span_of<float>(a, what, writable, "float32");
}

inline std::span<std::byte> byte_span(py::array& a, const std::string& what, bool writable) {
  auto s = span_of<std::uint8_t>(a, what, writable, "uint8");
  return std::as_writable_bytes(s);
}

// Any contiguous array as its bytes (what a point-to-point message carries).
inline std::span<const std::byte> raw_bytes(const py::array& a, const std::string& what) {
  SPARQ_CHECK_AS(InputError, (a.flags() & py::array::c_style) != 0, "{}: not contiguous", what);
  return {static_cast<const std::byte*>(a.data()), static_cast<std::size_t>(a.nbytes())};
}

// A new numpy array holding a copy of `v` (a result handed to Python).
template <class T>
py::array_t<T> array_of(std::span<const T> v) {
  py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

}  // namespace sparq::py_views
