#pragma once
// DCT-MP (Gupta et al., KDD'21, Algorithm 2): at a model-parallel split, per
// sample (row of the B x d activation matrix) keep only the largest
// magnitudes, send values + mask forward, and reuse the same mask for the
// B x d activation gradient on the way back.
//
// Each row keeps exactly keep = d - floor(d * eta) = ceil((1 - eta) * d)
// entries (see topk.h for how eta is read). The paper's mask |x| >= tau_i
// keeps every tie at tau_i; we keep exactly `keep`, giving ties at the
// smallest kept magnitude to the lowest column indices, so the message size
// is fixed by (B, d, eta) alone and the receiver can validate it.
//
// Wire layout (little-endian), one message per direction:
//   [mask: B rows of ceil(d/8) bytes; bit j%8 of byte j/8 = column j kept]
//   [values: B * keep f32, row-major, kept columns in ascending order]
// Padding bits past column d are zero. The backward message has the same
// layout without the mask (the receiver already holds it).
//
// Values in bf16 (ValueFormat::Bf16, 2 bytes, rounded to nearest even) are
// sparq's extension beyond the paper, for sparsities where fp32 values alone
// would be more than a tenth of the dense tensor (keep/d > 0.1 at eta = 0.9).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/compress/stream_size.h"  // ValueFormat

namespace sparq::compress {

class RowMask {
 public:
  RowMask() = default;
  RowMask(std::size_t rows, std::size_t cols, std::size_t keep);

  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t keep() const { return keep_; }
  std::size_t row_bytes() const { return (cols_ + 7) / 8; }
  bool test(std::size_t r, std::size_t c) const { return (bits_[r * row_bytes() + c / 8] >> (c % 8)) & 1u; }
  void set(std::size_t r, std::size_t c) { bits_[r * row_bytes() + c / 8] |= static_cast<std::uint8_t>(1u << (c % 8)); }
  std::span<const std::uint8_t> bytes() const { return bits_; }

 private:
  friend RowMask decode_row_mask(std::span<const std::byte> in, std::size_t rows, std::size_t cols, std::size_t keep,
                                 ValueFormat vf);
  std::size_t rows_ = 0, cols_ = 0, keep_ = 0;
  std::vector<std::uint8_t> bits_;
};

// The forward selection on a row-major B x d matrix (act.size() == B * cols).
// Throws InputError on bad sizes/eta or NaN.
RowMask dct_mp_select(std::span<const float> act, std::size_t cols, double eta);

// x (B x d) at the mask's positions -> packed (B * keep), forward for the
// activations and backward for their gradients.
void dct_mp_gather(const RowMask& mask, std::span<const float> x, std::span<float> packed);
// packed (B * keep) -> dense B x d with zeros elsewhere (the receiver's side).
void dct_mp_scatter(const RowMask& mask, std::span<const float> packed, std::span<float> dense);

// Forward message: mask then values (values.size() == B * keep), the values
// in f32 or bf16 (InputError for another format).
std::size_t dct_mp_message_bytes(std::size_t rows, std::size_t cols, std::size_t keep,
                                 ValueFormat vf = ValueFormat::F32);
void dct_mp_encode(const RowMask& mask, std::span<const float> values, std::span<std::byte> out,
                   ValueFormat vf = ValueFormat::F32);
// Splits and validates a forward message for known (B, d, keep): exact size,
// exactly `keep` bits per row, zero padding bits. WireError otherwise.
RowMask decode_row_mask(std::span<const std::byte> in, std::size_t rows, std::size_t cols, std::size_t keep,
                        ValueFormat vf = ValueFormat::F32);
void dct_mp_decode(std::span<const std::byte> in, std::size_t rows, std::size_t cols, std::size_t keep, RowMask& mask,
                   std::span<float> values, ValueFormat vf = ValueFormat::F32);
// The values alone (the backward message, or the forward one's tail):
// out.size() == values_bytes(values.size(), vf); decode checks the size
// (WireError).
void dct_mp_encode_values(std::span<const float> values, std::span<std::byte> out, ValueFormat vf);
void dct_mp_decode_values(std::span<const std::byte> in, std::span<float> values, ValueFormat vf);

}  // namespace sparq::compress
