#pragma once
// Element-wise reductions used by every reducing collective.
#include <cstddef>
#include <string_view>

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"

namespace sparq {

enum class ReduceOp { Sum, Min, Max };

constexpr std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

inline ReduceOp parse_reduce_op(std::string_view s) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max})
    if (s == reduce_op_name(op)) return op;
  SPARQ_THROW(InputError, "unknown reduce op '{}' (sum, min, max)", s);
}

// out[i] = a[i] (op) b[i]. `out` may alias `a` or `b`. Every op is
// commutative bit for bit (a+b == b+a in IEEE arithmetic), which is what lets
// two partners that each combine "mine (op) yours" hold identical results.
template <class T>
void reduce3(ReduceOp op, T* out, const T* a, const T* b, std::size_t n) {
  const ChargedKernel charged("reduce_per_value", Units{n}, static_cast<std::size_t>(op), sizeof(T));
  switch (op) {
    case ReduceOp::Sum:
      for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
      return;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i) out[i] = b[i] < a[i] ? b[i] : a[i];
      return;
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i) out[i] = a[i] < b[i] ? b[i] : a[i];
      return;
  }
}

}  // namespace sparq
