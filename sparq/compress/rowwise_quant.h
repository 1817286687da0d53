#pragma once
// Row-wise asymmetric integer quantization (Yang et al., DLP-KDD'20, sec. 3.1)
// of a rows x cols float matrix, for embedding alltoall and ring allreduce.
//
// Per row: lo = min, hi = max, s = (hi - lo) / (2^q - 1), and each value x is
// sent as the q-bit code c = rne((x - lo) / s) (round to nearest, ties to even;
// the paper writes rndint(x/s + z) with z = -lo/s, which is the same grid).
// The receiver computes lo + s * c. Every finite input lands within s/2 of its
// dequantized value (up to float rounding of that expression).
//
// We send the bias lo instead of the zero point z = -lo/s: z blows up when s is
// tiny (a nearly constant row) and would not fit an fp16.
//
// Wire layout of one row, rows back to back, no padding between rows:
//   [scale: f32 | f16][bias: f32 | f16][codes: ceil(cols*q/8) bytes, see bitpack.h]
// Little-endian. With fp16 (ScaleType::F16) the bias is rounded down and the
// scale up to fp16 *before* computing the codes, so the s/2 bound holds for the
// fp16 scale that is sent; rows whose bias or scale exceed the fp16 range
// (|lo| > 65504) are rejected with InputError.
//
// Edge cases: a constant row (hi == lo) has s = 0, all codes 0, and dequantizes
// exactly to lo (exactly only with F32 scales: with F16, lo itself is rounded).
// A row holding NaN or +-inf, or whose range hi - lo overflows float, throws
// InputError naming the row: there is no meaningful grid for it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sparq/compress/bitpack.h"

namespace sparq::compress {

enum class ScaleType : std::uint8_t { F32, F16 };

struct RowwiseFormat {
  int bits = 8;                      // q in {8, 4, 2}
  ScaleType scale = ScaleType::F32;  // width of the per-row scale and bias
};

// Byte sizes of the encoding of a matrix with `cols` columns.
struct RowwiseLayout {
  std::size_t cols;
  RowwiseFormat fmt;
  std::size_t header_bytes() const { return fmt.scale == ScaleType::F32 ? 8 : 4; }
  std::size_t code_bytes() const { return packed_bytes(cols, fmt.bits); }
  std::size_t row_bytes() const { return header_bytes() + code_bytes(); }
  std::size_t bytes(std::size_t rows) const { return rows * row_bytes(); }
};

// Q: x is row-major with x.size() divisible by cols (cols > 0);
// out.size() == RowwiseLayout{cols, fmt}.bytes(rows). Throws InputError.
void rowwise_quantize(std::span<const float> x, std::size_t cols, RowwiseFormat fmt, std::span<std::byte> out);

// D: the inverse map for out.size() / cols rows. Throws WireError if in.size()
// is not the layout's size or a row's scale/bias is not finite (or scale < 0).
void rowwise_dequantize(std::span<const std::byte> in, std::size_t cols, RowwiseFormat fmt, std::span<float> out);

// Error-compensated Q in one pass per row (the row stays in L1): with
// z = x + err, out <- Q(z) and err <- z - D(Q(z)), bit for bit what
// rowwise_quantize(z) and rowwise_dequantize would give, without decoding
// the bytes just written. On an InputError (NaN or inf) err is left
// holding x + err for the row that failed (and for up to 7 rows after it).
void rowwise_quantize_ec(std::span<const float> x, std::span<float> err, std::size_t cols, RowwiseFormat fmt,
                         std::span<std::byte> out);

// DQ = D(Q(x)) without materializing the whole encoding (bitwise identical to
// quantize followed by dequantize). out may alias x.
void rowwise_dq(std::span<const float> x, std::size_t cols, RowwiseFormat fmt, std::span<float> out);

// DQE (the paper's Algorithm 1), error-compensated DQ:
//   Z = (T + Y) + E in fp32;  out = DQ(Z);  E = Z - out.
// `y` may be empty (Z = T + E). All non-empty spans have equal size; out may
// alias t or y.
void rowwise_dqe(std::span<const float> t, std::span<const float> y, std::span<float> err, std::size_t cols,
                 RowwiseFormat fmt, std::span<float> out);

}  // namespace sparq::compress
