#pragma once
// Wire format of a SparseStream (little-endian), 12-byte header:
//
//   offset size  field
//   0      1     kind: 1 = sparse, 2 = dense
//   1      1     c: index bytes, = index_bytes(dim) (1, 2 or 4) if sparse, 0 if dense
//   2      2     reserved, 0
//   4      4     dim (u32)
//   8      4     n: pairs if sparse (<= dim), = dim if dense
//   12           sparse: n indices of c bytes each, then n f32 values
//                dense:  dim f32 values
//
// Indices and values are in separate runs so both encode and decode are
// straight copies. The total size is exactly 12 + n * (c + 4) (sparse) or
// 12 + 4 * dim (dense). A sparse message with more than delta pairs is legal
// (just wasteful).
#include <cstddef>
#include <span>

#include "sparq/compress/sparse_stream.h"

namespace sparq::compress {

inline constexpr std::size_t kStreamHeaderBytes = 12;

std::size_t encoded_size(const SparseStream& s);
// out.size() == encoded_size(s), else InputError.
void encode_stream(const SparseStream& s, std::span<std::byte> out);
// Validates everything before use: size >= header, known kind, zero reserved
// bytes, c matching dim, n <= dim (= dim if dense), exact total size, indices
// < dim and strictly increasing. Any violation throws WireError; the decoder
// never reads past `in`.
SparseStream decode_stream(std::span<const std::byte> in);

}  // namespace sparq::compress
