#include "sparq/compress/stream_size.h"

#include <algorithm>
#include <cmath>

#include "sparq/core/error.h"

namespace sparq::compress {

namespace {

// E[varint run] for k of dim positions (header comment), rounded up.
std::size_t expected_varint_run(std::size_t k, std::size_t dim) {
  if (k == 0) return 0;
  const double q = 1.0 - static_cast<double>(k) / static_cast<double>(dim);
  double qm = q, longer = 0;  // qm = q^(2^(7j)): 7 more squarings per j
  for (int j = 1; j <= 4; ++j) {
    for (int s = 0; s < 7; ++s) qm *= qm;
    longer += qm;
  }
  return static_cast<std::size_t>(std::ceil(static_cast<double>(k) * (1.0 + longer)));
}

std::size_t index_run(std::size_t k, std::size_t dim, IndexCoding ic) {
  switch (ic) {
    case IndexCoding::Fixed: return k * index_bytes(dim);
    case IndexCoding::Varint: return expected_varint_run(k, dim);
    case IndexCoding::Shorter: return std::min(k * index_bytes(dim), expected_varint_run(k, dim));
  }
  return 0;
}

constexpr std::string_view kValueFormatNames[] = {"f32", "bf16", "fp8", "fp4"};  // by ValueFormat

}  // namespace

std::string_view value_format_name(ValueFormat vf) { return kValueFormatNames[static_cast<int>(vf)]; }

ValueFormat value_format_named(std::string_view name) {
  for (int i = 0; i < 4; ++i)
    if (name == kValueFormatNames[i]) return static_cast<ValueFormat>(i);
  SPARQ_THROW(InputError, "value format '{}'; it is f32, bf16, fp8 or fp4", name);
}

std::size_t values_bytes(std::size_t n, ValueFormat vf) {
  switch (vf) {
    case ValueFormat::F32: return 4 * n;
    case ValueFormat::Bf16: return 2 * n;
    case ValueFormat::Fp8: return n;
    case ValueFormat::Fp4: return (n + kFp4Group - 1) / kFp4Group + (n + 1) / 2;
  }
  return 4 * n;
}

std::size_t index_bytes(std::size_t dim) { return dim <= (1u << 8) ? 1 : dim <= (1u << 16) ? 2 : 4; }

std::size_t sparse_encoded_size(std::size_t k, std::size_t dim, ValueFormat vf, IndexCoding ic) {
  SPARQ_CHECK_AS(InputError, k <= dim, "sparse stream size: {} pairs in dimension {}", k, dim);
  return kStreamHeaderBytes + index_run(k, dim, ic) + values_bytes(k, vf);
}

std::size_t dense_encoded_size(std::size_t dim, ValueFormat vf) { return kStreamHeaderBytes + values_bytes(dim, vf); }

std::size_t sparse_capacity(std::size_t dim, ValueFormat vf, IndexCoding ic) {
  // Every index takes at least a byte, so at most dim v / (1 + v) pairs fit
  // (v bytes a value; for fp4's v < 1, dim / 2 bounds it); at that density
  // (>= 1/2) a varint takes one byte, so for the encoder's choice that bound
  // is delta itself, found in one step (sums ask on every call). Otherwise
  // bisect below it: sizes grow with k (a varint's expected length falls
  // more slowly than k rises), and k = 0 always fits.
  const std::size_t dense = dense_encoded_size(dim, vf), v = values_bytes(1, vf);
  std::size_t lo = 0, hi = vf == ValueFormat::Fp4 ? dim / 2 : dim * v / (1 + v);
  if (sparse_encoded_size(hi, dim, vf, ic) <= dense) return hi;
  while (lo < hi) {
    const std::size_t mid = hi - (hi - lo) / 2;
    if (sparse_encoded_size(mid, dim, vf, ic) <= dense) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace sparq::compress
