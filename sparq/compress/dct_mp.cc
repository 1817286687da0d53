#include "sparq/compress/dct_mp.h"

#include <bit>
#include <cstring>

#include "sparq/compress/stream_codec.h"
#include "sparq/compress/topk.h"
#include "sparq/core/error.h"
#include "sparq/core/finite.h"

namespace sparq::compress {

static_assert(std::endian::native == std::endian::little, "the wire formats are little-endian");

RowMask::RowMask(std::size_t rows, std::size_t cols, std::size_t keep)
    : rows_(rows), cols_(cols), keep_(keep), bits_(rows * ((cols + 7) / 8), 0) {
  SPARQ_CHECK_AS(InputError, keep <= cols, "row mask: keep {} > cols {}", keep, cols);
}

RowMask dct_mp_select(std::span<const float> act, std::size_t cols, double eta) {
  SPARQ_CHECK_AS(InputError, cols > 0 && act.size() % cols == 0, "DCT-MP: {} values are not rows of {}", act.size(),
                 cols);
  SPARQ_CHECK_FINITE(act, [] { return std::string("DCT-MP: the activation matrix"); });
  const std::size_t rows = act.size() / cols;
  RowMask mask(rows, cols, kept_count(cols, eta));
  std::vector<std::uint32_t> idx;
  std::vector<float> scratch;
  for (std::size_t r = 0; r < rows; ++r) {
    topk_indices(act.subspan(r * cols, cols), mask.keep(), idx, scratch);
    for (std::uint32_t c : idx) mask.set(r, c);
  }
  return mask;
}

void dct_mp_gather(const RowMask& mask, std::span<const float> x, std::span<float> packed) {
  SPARQ_CHECK_AS(InputError, x.size() == mask.rows() * mask.cols() && packed.size() == mask.rows() * mask.keep(),
                 "DCT-MP gather: {} values / {} packed for a {}x{} mask keeping {}", x.size(), packed.size(),
                 mask.rows(), mask.cols(), mask.keep());
  std::size_t k = 0;
  for (std::size_t r = 0; r < mask.rows(); ++r)
    for (std::size_t c = 0; c < mask.cols(); ++c)
      if (mask.test(r, c)) packed[k++] = x[r * mask.cols() + c];
}

void dct_mp_scatter(const RowMask& mask, std::span<const float> packed, std::span<float> dense) {
  SPARQ_CHECK_AS(InputError, dense.size() == mask.rows() * mask.cols() && packed.size() == mask.rows() * mask.keep(),
                 "DCT-MP scatter: {} values / {} packed for a {}x{} mask keeping {}", dense.size(), packed.size(),
                 mask.rows(), mask.cols(), mask.keep());
  std::size_t k = 0;
  for (std::size_t r = 0; r < mask.rows(); ++r)
    for (std::size_t c = 0; c < mask.cols(); ++c) dense[r * mask.cols() + c] = mask.test(r, c) ? packed[k++] : 0.0f;
}

static std::size_t dct_mp_values_bytes(std::size_t n, ValueFormat vf) {
  SPARQ_CHECK_AS(InputError, vf == ValueFormat::F32 || vf == ValueFormat::Bf16,
                 "DCT-MP: values are f32 or bf16, not fp8 or fp4 (they need scales)");
  return values_bytes(n, vf);
}

std::size_t dct_mp_message_bytes(std::size_t rows, std::size_t cols, std::size_t keep, ValueFormat vf) {
  return rows * ((cols + 7) / 8) + dct_mp_values_bytes(rows * keep, vf);
}

void dct_mp_encode_values(std::span<const float> values, std::span<std::byte> out, ValueFormat vf) {
  SPARQ_CHECK_AS(InputError, out.size() == dct_mp_values_bytes(values.size(), vf),
                 "DCT-MP values: {} values into {} bytes", values.size(), out.size());
  store_values(values, vf, 0, out.data());
}

void dct_mp_decode_values(std::span<const std::byte> in, std::span<float> values, ValueFormat vf) {
  SPARQ_CHECK_AS(WireError, in.size() == dct_mp_values_bytes(values.size(), vf),
                 "DCT-MP values: a message of {} bytes for {} values", in.size(), values.size());
  load_values(in.data(), vf, 0, values);
}

void dct_mp_encode(const RowMask& mask, std::span<const float> values, std::span<std::byte> out, ValueFormat vf) {
  const std::size_t need = dct_mp_message_bytes(mask.rows(), mask.cols(), mask.keep(), vf);
  SPARQ_CHECK_AS(InputError, values.size() == mask.rows() * mask.keep() && out.size() == need,
                 "DCT-MP encode: {} values, {} bytes (need {} and {})", values.size(), out.size(),
                 mask.rows() * mask.keep(), need);
  const std::size_t mb = mask.bytes().size();
  if (mb) std::memcpy(out.data(), mask.bytes().data(), mb);
  dct_mp_encode_values(values, out.subspan(mb), vf);
}

RowMask decode_row_mask(std::span<const std::byte> in, std::size_t rows, std::size_t cols, std::size_t keep,
                        ValueFormat vf) {
  SPARQ_CHECK_AS(WireError, keep <= cols, "DCT-MP: keep {} > cols {}", keep, cols);
  const std::size_t need = dct_mp_message_bytes(rows, cols, keep, vf);
  SPARQ_CHECK_AS(WireError, in.size() == need, "DCT-MP: message of {} bytes, {}x{} keeping {} needs {}", in.size(),
                 rows, cols, keep, need);
  RowMask m(rows, cols, keep);
  const std::size_t rb = m.row_bytes();
  const auto* p = reinterpret_cast<const std::uint8_t*>(in.data());
  // Padding bits of the last byte of a row must be zero, so that popcount
  // counts columns < d only.
  const unsigned pad_mask = cols % 8 ? static_cast<unsigned>(0xFFu << (cols % 8)) & 0xFFu : 0u;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::uint8_t* row = p + r * rb;
    std::size_t count = 0;
    for (std::size_t b = 0; b < rb; ++b) count += static_cast<std::size_t>(std::popcount(row[b]));
    SPARQ_CHECK_AS(WireError, rb == 0 || (row[rb - 1] & pad_mask) == 0, "DCT-MP: row {} sets padding bits", r);
    SPARQ_CHECK_AS(WireError, count == keep, "DCT-MP: row {} keeps {} columns, expected {}", r, count, keep);
  }
  if (rows != 0 && rb != 0) std::memcpy(m.bits_.data(), p, rows * rb);  // memcpy of nullptr is UB even for 0 bytes
  return m;
}

void dct_mp_decode(std::span<const std::byte> in, std::size_t rows, std::size_t cols, std::size_t keep, RowMask& mask,
                   std::span<float> values, ValueFormat vf) {
  mask = decode_row_mask(in, rows, cols, keep, vf);
  SPARQ_CHECK_AS(InputError, values.size() == rows * keep, "DCT-MP decode: output of {} values, need {}",
                 values.size(), rows * keep);
  dct_mp_decode_values(in.subspan(mask.bytes().size()), values, vf);
}

}  // namespace sparq::compress
