#pragma once
// Wire format of a SparseStream (little-endian), 12-byte header:
//
//   offset size  field
//   0      1     kind: 1 = sparse, 2 = dense
//   1      1     index coding (sparse): c = index_bytes(dim) (1, 2 or 4) for
//                fixed-width indices, or 0x80 for delta-varint; 0 if dense
//   2      1     value format: 0 = f32, 1 = bf16, 2 = fp8 (E4M3)
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
// more than 65536 values. Values are f32, or on request bf16 or fp8 E4M3
// (round to nearest even). fp8 shares one power-of-two scale per message,
// chosen so that the largest magnitude lands in [128, 256): relative error
// at most 2^-4, values below max * 2^-17 flush to zero. bf16 and fp8 are
// lossy; a sender that must hold what its peers decode calls round_values().
//
// Sizes: 12 + run + n * v with v = 4 (f32), 2 (bf16) or 1 (fp8); the same
// from counts alone, and the dense switch, are in stream_size.h. A sparse
// message larger than the dense one is legal (just wasteful).
#include <cstddef>
#include <span>

#include "sparq/compress/sparse_stream.h"
#include "sparq/compress/stream_size.h"

namespace sparq::compress {

// The fp8 scale exponent for these values (0 for the other formats); throws
// InputError on a non-finite value when vf is Fp8.
int value_scale(std::span<const float> values, ValueFormat vf);
// v as a peer decodes it from a message of format vf and that scale.
float round_value(float v, ValueFormat vf, int scale);
// Rounds s's values to vf in place (no-op for F32).
void round_values(SparseStream& s, ValueFormat vf);
// The values as a message carries them: values.size() * value_bytes(vf)
// bytes at out, and back (scale: value_scale's, 0 for f32 and bf16). Sizes
// are the caller's to check.
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
