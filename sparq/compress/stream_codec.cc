#include "sparq/compress/stream_codec.h"

#include <bit>
#include <cstdint>
#include <cstring>

#include "sparq/core/error.h"

namespace sparq::compress {

static_assert(std::endian::native == std::endian::little, "the wire formats are little-endian");

namespace {

enum Kind : std::uint8_t { kSparse = 1, kDense = 2 };

std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Index i of a run of c-byte indices.
template <std::size_t C>
std::uint32_t load_index(const std::uint8_t* p, std::size_t i) {
  if constexpr (C == 1) {
    return p[i];
  } else if constexpr (C == 2) {
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  } else {
    return load_u32(p + 4 * i);
  }
}

template <std::size_t C>
void store_indices(std::span<const std::uint32_t> idx, std::uint8_t* p) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if constexpr (C == 1) {
      p[i] = static_cast<std::uint8_t>(idx[i]);
    } else if constexpr (C == 2) {
      const auto v = static_cast<std::uint16_t>(idx[i]);
      std::memcpy(p + 2 * i, &v, 2);
    } else {
      std::memcpy(p + 4 * i, &idx[i], 4);
    }
  }
}

// Reads n indices into out, rejecting any out of range or out of order.
template <std::size_t C>
void load_indices(const std::uint8_t* p, std::size_t n, std::uint32_t dim, std::uint32_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t v = load_index<C>(p, i);
    SPARQ_CHECK_AS(WireError, v < dim, "sparse stream: index {} at {} out of range [0, {})", v, i, dim);
    SPARQ_CHECK_AS(WireError, i == 0 || out[i - 1] < v, "sparse stream: index {} at {} not above {}", v, i,
                   out[i - 1]);
    out[i] = v;
  }
}

}  // namespace

std::size_t encoded_size(const SparseStream& s) {
  return kStreamHeaderBytes + s.nnz() * (4 + (s.is_dense() ? 0 : index_bytes(s.dim())));
}

void encode_stream(const SparseStream& s, std::span<std::byte> out) {
  SPARQ_CHECK_AS(InputError, out.size() == encoded_size(s), "sparse stream encode: buffer {} bytes, needs {}",
                 out.size(), encoded_size(s));
  auto* p = reinterpret_cast<std::uint8_t*>(out.data());
  const std::size_t c = s.is_dense() ? 0 : index_bytes(s.dim());
  const auto dim = static_cast<std::uint32_t>(s.dim()), n = static_cast<std::uint32_t>(s.nnz());
  p[0] = s.is_dense() ? kDense : kSparse;
  p[1] = static_cast<std::uint8_t>(c);
  p[2] = p[3] = 0;
  std::memcpy(p + 4, &dim, 4);
  std::memcpy(p + 8, &n, 4);
  std::uint8_t* body = p + kStreamHeaderBytes;
  if (c == 1) store_indices<1>(s.indices(), body);
  if (c == 2) store_indices<2>(s.indices(), body);
  if (c == 4) store_indices<4>(s.indices(), body);
  if (n) std::memcpy(body + c * n, s.values().data(), 4 * static_cast<std::size_t>(n));
}

SparseStream decode_stream(std::span<const std::byte> in) {
  SPARQ_CHECK_AS(WireError, in.size() >= kStreamHeaderBytes, "sparse stream: {} bytes, shorter than the header",
                 in.size());
  const auto* p = reinterpret_cast<const std::uint8_t*>(in.data());
  const std::uint8_t kind = p[0], c = p[1];
  const std::uint32_t dim = load_u32(p + 4), n = load_u32(p + 8);
  SPARQ_CHECK_AS(WireError, kind == kSparse || kind == kDense, "sparse stream: unknown kind {}", kind);
  SPARQ_CHECK_AS(WireError, p[2] == 0 && p[3] == 0, "sparse stream: reserved bytes {} {} not zero", p[2], p[3]);
  const bool dense = kind == kDense;
  const std::size_t want_c = dense ? 0 : index_bytes(dim);
  SPARQ_CHECK_AS(WireError, c == want_c, "sparse stream: index width {} for dimension {} (expected {})", c, dim,
                 want_c);
  SPARQ_CHECK_AS(WireError, dense ? n == dim : n <= dim, "sparse stream: {} entries for dimension {}", n, dim);
  // 64-bit arithmetic: n < 2^32 and c + 4 <= 8, so no overflow.
  const std::uint64_t want = kStreamHeaderBytes + static_cast<std::uint64_t>(n) * (c + 4);
  SPARQ_CHECK_AS(WireError, in.size() == want, "sparse stream: {} bytes, header says {}", in.size(), want);
  SparseStream s(dim);
  s.dense_ = dense;
  s.count_ = n;
  const std::uint8_t* body = p + kStreamHeaderBytes;
  if (!dense) {
    s.indices_.resize(n);
    if (c == 1) load_indices<1>(body, n, dim, s.indices_.data());
    if (c == 2) load_indices<2>(body, n, dim, s.indices_.data());
    if (c == 4) load_indices<4>(body, n, dim, s.indices_.data());
  }
  s.values_.resize(n);
  if (n) std::memcpy(s.values_.data(), body + static_cast<std::size_t>(c) * n, 4 * static_cast<std::size_t>(n));
  return s;
}

}  // namespace sparq::compress
