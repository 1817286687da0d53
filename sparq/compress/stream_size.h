#pragma once
// Encoded sizes of sparse streams from counts alone, and the dense switch
// that follows from them (the wire format is in stream_codec.h).
//
// A sparse stream of k pairs in dimension N encodes to 12 + run + V(k) bytes,
// a dense one to 12 + V(N), with V(n) = n*v for v = 4, 2 or 1 value bytes
// (f32, bf16, fp8), and V(n) = ceil(n/32) + ceil(n/2) for fp4 (a scale byte
// per 32 values, 4 bits a value).
// The index run is k*c bytes with fixed-width indices (c = index_bytes(N)),
// or the delta-varint run; the encoder writes the shorter. Only the varint
// run depends on where the indices are. From counts alone we take its
// expectation for positions each chosen with probability p = k/N: every
// number in the run (the first index, then each gap minus one) is then
// geometric, P(number >= m) = q^m with q = 1 - p, and a number >= 2^(7j)
// takes one byte more for each of j = 1..4, so
//   E[run] = k * (1 + q^(2^7) + q^(2^14) + q^(2^21) + q^(2^28)).
// For uniformly random index sets this is within 2% of the encoder's run for
// k >= 1000 (tests/compress/stream_size_test.cc); index sets with a few wide
// gaps and many narrow ones encode longer (the run is at most
// k + sum_j (N - k) / 2^(7j) bytes), which is why a sender compares the
// exact size of the stream in hand before it sends (densify_if_smaller).
//
// The dense switch delta = sparse_capacity(N, vf) is the most pairs whose
// sparse size does not exceed the dense size. Every index takes at least a
// byte, so delta <= N v / (1 + v), a density of at least 1/2; there
// q^128 <= 2^-128 and each varint takes one byte, so with the encoder's
// choice delta = floor(N * v / (1 + v)) for every N: 0.8 N (f32), 2/3 N
// (bf16), N/2 (fp8); fp4's scale bytes make its delta a bisection's (347 of
// N = 1000). SparCML's delta = N * 4 / (4 + c) is the f32 case with
// fixed-width indices (IndexCoding::Fixed).
//
// Every rank must take the same dense/sparse decision for the same counts (a
// pair of partners that merged into different representations would send
// different bytes, and `auto` plans from the result's nnz). So these
// functions look at counts and formats only, never at indices, and use only
// IEEE-754 +, -, *, / (powers by repeated squaring, not std::pow; compiled
// without FMA contraction): each is correctly rounded, so the same counts
// give the same sizes on every host, whatever its libm.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sparq::compress {

inline constexpr std::size_t kStreamHeaderBytes = 12;

enum class ValueFormat : std::uint8_t { F32 = 0, Bf16 = 1, Fp8 = 2, Fp4 = 3 };
// Its name: f32, bf16, fp8 or fp4.
std::string_view value_format_name(ValueFormat vf);
// The format of such a name; InputError for any other.
ValueFormat value_format_named(std::string_view name);
inline constexpr std::size_t kFp4Group = 32;  // fp4 values per scale byte
// V(n): bytes of n values on the wire.
std::size_t values_bytes(std::size_t n, ValueFormat vf);

// c: fixed-width index bytes for dimension dim (1, 2 or 4: the least that holds dim - 1).
std::size_t index_bytes(std::size_t dim);

// How the index run is counted: as the encoder writes it (the shorter of the
// two runs), or one of the two alone.
enum class IndexCoding : std::uint8_t { Shorter, Fixed, Varint };

// Bytes of a sparse stream of k pairs (k <= dim, else InputError) in
// dimension dim: exact for fixed-width indices, the expectation above
// (rounded up to a byte) where a varint run is counted.
std::size_t sparse_encoded_size(std::size_t k, std::size_t dim, ValueFormat vf,
                                IndexCoding ic = IndexCoding::Shorter);
// Bytes of a dense stream of dimension dim.
std::size_t dense_encoded_size(std::size_t dim, ValueFormat vf);
// delta: the most pairs whose sparse size does not exceed the dense size.
std::size_t sparse_capacity(std::size_t dim, ValueFormat vf, IndexCoding ic = IndexCoding::Shorter);

}  // namespace sparq::compress
