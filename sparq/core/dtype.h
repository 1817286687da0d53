#pragma once
// Element types the collectives reduce, with a runtime tag for the CLI and a
// dispatcher from the tag to a template instantiation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sparq/core/error.h"

namespace sparq {

enum class DType { F32, F64, I32, I64 };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::I64; }

constexpr std::size_t dtype_size(DType t) {
  return (t == DType::F32 || t == DType::I32) ? 4 : 8;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
  }
  return "?";
}

inline DType parse_dtype(std::string_view s) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64})
    if (s == dtype_name(t)) return t;
  SPARQ_THROW(InputError, "unknown dtype '{}' (float32, float64, int32, int64)", s);
}

// Calls f.template operator()<T>() for the C++ type of `t`.
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: return f.template operator()<float>();
    case DType::F64: return f.template operator()<double>();
    case DType::I32: return f.template operator()<std::int32_t>();
    case DType::I64: return f.template operator()<std::int64_t>();
  }
  SPARQ_THROW(Error, "bad dtype tag {}", static_cast<int>(t));
}

}  // namespace sparq
