#pragma once
// Wire format of a SparseStream (little-endian), 12-byte header:
//
//   offset size  field
//   0      1     kind: 1 = sparse, 2 = dense
//   1      1     index coding (sparse): c = index_bytes(dim) (1, 2 or 4) for
//                fixed-width indices, or 0x80 for delta-varint; 0 if dense
//   2      1     value format: 0 = f32, 1 = bf16, 2 = fp8 (E4M3), 3 = fp4 (E2M1)
//   3      1     fp8: scale exponent e (int8), value = fp8 * 2^e; else 0
//   4      4     dim (u32)
//   8      4     n: pairs if sparse (<= dim), = dim if dense
//   12           sparse: the index run, then n values
//                dense:  dim values
//
// Fixed-width run: n indices of c bytes. Delta-varint run: n LEB128 numbers,
// the first index itself, then each index minus its predecessor minus one (so
// any decoded run is strictly increasing); no number longer than 5 bytes. The
// encoder takes whichever run is shorter (fixed on a tie): at the ~2% density
// of DCT-DP most gaps fit one byte, against 4 for a fixed index of a tensor of
// more than 65536 values. Values are f32, or on request bf16, fp8 E4M3 or
// fp4 E2M1 (round to nearest even). fp8 shares one power-of-two scale per
// message, chosen so that the largest magnitude lands in (128, 256] (so
// rounded values round to themselves):
// relative error at most 2^-4, values below max * 2^-17 flush to zero. fp4
// (magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6) takes a power-of-two scale per
// group of 32 values, as OCP's MXFP4 does: each group is its scale byte
// (int8 e, value = fp4 * 2^e; the least e that holds the group's largest
// magnitude without clipping), then its codes, two a byte, low nibble
// first; relative error at most 1/6 above 2^e, values below 2^(e-2) flush
// to zero. bf16, fp8 and fp4 are lossy; a sender that must hold what its
// peers decode calls round_values().
//
// Sizes: 12 + run + V(n), V(n) = n * v with v = 4 (f32), 2 (bf16) or 1
// (fp8), ceil(n / 32) + ceil(n / 2) for fp4; the same from counts alone, and
// the dense switch, are in stream_size.h. A sparse message larger than the
// dense one is legal (just wasteful).
#include <cstddef>
#include <span>

#include "sparq/compress/sparse_stream.h"
#include "sparq/compress/stream_size.h"

namespace sparq::compress {

// Rounds values to vf in place, as a peer decodes them from one message (no-op
// for F32); fp8 and fp4 throw InputError on a non-finite value.
void round_values(std::span<float> values, ValueFormat vf);
void round_values(SparseStream& s, ValueFormat vf);
// The values as a message carries them: values_bytes(values.size(), vf)
// bytes at out, and back (scale: fp8's message scale, else 0). Sizes are the
// caller's to check.
void store_values(std::span<const float> values, ValueFormat vf, int scale, std::byte* out);
void load_values(const std::byte* in, ValueFormat vf, int scale, std::span<float> values);

// Exact bytes of s on the wire (from its indices).
std::size_t encoded_size(const SparseStream& s, ValueFormat vf = ValueFormat::F32);
// Makes s dense if that encodes smaller than its exact sparse encoding: a
// stream with at most delta pairs can still be larger, where a few wide gaps
// make long varints. A sender that keeps s after sending it calls this on s
// itself, so that it holds the representation its peers receive.
void densify_if_smaller(SparseStream& s, ValueFormat vf);
// out.size() == encoded_size(s, vf), else InputError.
void encode_stream(const SparseStream& s, std::span<std::byte> out, ValueFormat vf = ValueFormat::F32);
// Validates everything before use: size >= header, known kind, index coding
// and value format, zero reserved byte, fixed width matching dim, n <= dim
// (= dim if dense), exact total size, every varint complete, at most 5 bytes
// and the run consumed exactly, indices < dim and strictly increasing. Any
// violation throws WireError; the decoder never reads past `in`.
SparseStream decode_stream(std::span<const std::byte> in);

}  // namespace sparq::compress
