#include "sparq/compress/rowwise_quant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "sparq/compress/bitpack.h"
#include "sparq/compress/half.h"
#include "sparq/compress/rowwise_kernels.h"
#include "sparq/core/error.h"

namespace sparq::compress {

static_assert(std::endian::native == std::endian::little, "the wire formats are little-endian");

namespace {

struct Grid {
  float scale, bias;
  std::uint16_t half_scale, half_bias;  // ScaleType::F16: the header's bits
};

constexpr std::size_t kBlock = 8;  // rows whose ranges, then grids, then codes are made together

// The grids of nb <= kBlock rows (row0 numbers the first in errors).
void make_grids(const RowRange* r, std::size_t nb, RowwiseFormat fmt, std::size_t row0, Grid* g) {
  for (std::size_t j = 0; j < nb; ++j)
    SPARQ_CHECK_AS(NonFiniteError, std::isfinite(r[j].lo) && std::isfinite(r[j].hi),
                   "row-wise quantize: row {} holds NaN or inf", row0 + j);
  const float levels = static_cast<float>((1 << fmt.bits) - 1);
  if (fmt.scale == ScaleType::F32) {
    for (std::size_t j = 0; j < nb; ++j) {
      float s = (r[j].hi - r[j].lo) / levels;
      // A subnormal range can underflow to s = 0, which would pass the row off
      // as constant; the smallest positive step still covers it.
      if (s == 0.0f && r[j].hi > r[j].lo) s = std::numeric_limits<float>::denorm_min();
      SPARQ_CHECK_AS(InputError, std::isfinite(s), "row-wise quantize: row {} range [{}, {}] overflows float",
                     row0 + j, r[j].lo, r[j].hi);
      g[j] = {s, r[j].lo, 0, 0};
    }
    return;
  }
  // fp16: bias rounded down and scale rounded up, so lo' <= lo and
  // lo' + levels * s' >= hi: the whole row stays inside the sent grid.
  float lo[kBlock] = {}, hi[kBlock] = {};  // the first nb filled; zeros keep g++ from seeing the rest read
  std::uint16_t bias[kBlock], scale[kBlock];
  for (std::size_t j = 0; j < nb; ++j) lo[j] = r[j].lo, hi[j] = r[j].hi;
  half_grids(lo, hi, nb, levels, bias, scale);
  for (std::size_t j = 0; j < nb; ++j) {
    g[j] = {half_to_float(scale[j]), half_to_float(bias[j]), scale[j], bias[j]};
    SPARQ_CHECK_AS(InputError, std::isfinite(g[j].bias) && std::isfinite(g[j].scale),
                   "row-wise quantize: row {} range [{}, {}] exceeds fp16 scales (use F32)", row0 + j, lo[j], hi[j]);
  }
}

void write_header(std::uint8_t* p, const Grid& g, ScaleType t) {
  if (t == ScaleType::F32) {
    std::memcpy(p, &g.scale, 4);
    std::memcpy(p + 4, &g.bias, 4);
  } else {
    const std::uint16_t h[2] = {g.half_scale, g.half_bias};
    std::memcpy(p, h, 4);
  }
}

Grid read_header(const std::uint8_t* p, ScaleType t, std::size_t row) {
  Grid g{};
  if (t == ScaleType::F32) {
    std::memcpy(&g.scale, p, 4);
    std::memcpy(&g.bias, p + 4, 4);
  } else {
    std::uint16_t h[2];
    std::memcpy(h, p, 4);
    g = {half_to_float(h[0]), half_to_float(h[1]), h[0], h[1]};
  }
  SPARQ_CHECK_AS(WireError, std::isfinite(g.scale) && g.scale >= 0.0f && std::isfinite(g.bias),
                 "row-wise dequantize: row {} has scale {} bias {}", row, g.scale, g.bias);
  return g;
}

// Q of `rows` rows into out. With `err` (error compensation): Q(z) for
// z = x + err, and err <- z - D(Q(z)), from the codes just made with the
// decoder's arithmetic (bias + scale * code), so bit for bit what decoding
// would give; z is summed into err in the range pass and the residual
// written in the encoding pass, so a row is read twice, not four times.
//
// Rows go in blocks: the ranges of the block's rows first, then their grids
// (the fp16 ones 8 at a time), then their encodings. Per row, range ->
// scale -> 1 / scale -> encode is a chain of long latencies (reductions, two
// divisions) that would otherwise stall every short row; a block (4 KiB of
// 128-value rows) stays in L1.
// `first` numbers the rows in error messages.
void quantize_rows(const RowwiseKernels& k, const float* x, float* err, std::size_t rows, std::size_t cols,
                   RowwiseFormat fmt, std::uint8_t* out, std::size_t first = 0) {
  const RowwiseLayout lay{cols, fmt};
  RowRange range[kBlock];
  Grid grid[kBlock];
  for (std::size_t r0 = 0; r0 < rows; r0 += kBlock) {
    const std::size_t nb = std::min(kBlock, rows - r0);
    for (std::size_t j = 0; j < nb; ++j)
      range[j] = k.range(x + (r0 + j) * cols, err ? err + (r0 + j) * cols : nullptr, cols);
    make_grids(range, nb, fmt, first + r0, grid);
    for (std::size_t j = 0; j < nb; ++j) {
      const std::size_t r = r0 + j;
      std::uint8_t* o = out + r * lay.row_bytes();
      write_header(o, grid[j], fmt.scale);
      const float* z = err ? err + r * cols : x + r * cols;
      k.encode(z, cols, grid[j].scale, grid[j].bias, fmt.bits, o + lay.header_bytes(), err ? err + r * cols : nullptr);
    }
  }
}

void dequantize_row(const RowwiseKernels& k, const std::uint8_t* in, std::size_t cols, RowwiseFormat fmt, float* out,
                    std::size_t row) {
  const Grid g = read_header(in, fmt.scale, row);
  k.decode(in + RowwiseLayout{cols, fmt}.header_bytes(), cols, g.scale, g.bias, fmt.bits, out);
}

std::size_t checked_rows(std::size_t count, std::size_t cols, RowwiseFormat fmt) {
  check_code_bits(fmt.bits);
  SPARQ_CHECK_AS(InputError, cols > 0 || count == 0, "row-wise quantize: cols must be > 0");
  if (count == 0) return 0;
  SPARQ_CHECK_AS(InputError, count % cols == 0, "row-wise quantize: {} values are not rows of {}", count, cols);
  return count / cols;
}

}  // namespace

void rowwise_quantize(std::span<const float> x, std::size_t cols, RowwiseFormat fmt, std::span<std::byte> out) {
  const std::size_t rows = checked_rows(x.size(), cols, fmt);
  const RowwiseKernels& k = rowwise_kernels();  // once per call: the level is fixed while it runs
  const RowwiseLayout lay{cols, fmt};
  SPARQ_CHECK_AS(InputError, out.size() == lay.bytes(rows), "row-wise quantize: output has {} bytes, needs {}",
                 out.size(), lay.bytes(rows));
  auto* o = reinterpret_cast<std::uint8_t*>(out.data());
  quantize_rows(k, x.data(), nullptr, rows, cols, fmt, o);
}

void rowwise_quantize_ec(std::span<const float> x, std::span<float> err, std::size_t cols, RowwiseFormat fmt,
                         std::span<std::byte> out) {
  const std::size_t rows = checked_rows(x.size(), cols, fmt);
  const RowwiseKernels& k = rowwise_kernels();  // once per call: the level is fixed while it runs
  const RowwiseLayout lay{cols, fmt};
  SPARQ_CHECK_AS(InputError, err.size() == x.size() && out.size() == lay.bytes(rows),
                 "row-wise quantize with error compensation: {} values, {} residuals, {} output bytes (needs {})",
                 x.size(), err.size(), out.size(), lay.bytes(rows));
  auto* o = reinterpret_cast<std::uint8_t*>(out.data());
  quantize_rows(k, x.data(), err.data(), rows, cols, fmt, o);
}

void rowwise_dequantize(std::span<const std::byte> in, std::size_t cols, RowwiseFormat fmt, std::span<float> out) {
  const std::size_t rows = checked_rows(out.size(), cols, fmt);
  const RowwiseKernels& k = rowwise_kernels();  // once per call: the level is fixed while it runs
  const RowwiseLayout lay{cols, fmt};
  SPARQ_CHECK_AS(WireError, in.size() == lay.bytes(rows), "row-wise dequantize: got {} bytes, {} rows of {} need {}",
                 in.size(), rows, cols, lay.bytes(rows));
  const auto* p = reinterpret_cast<const std::uint8_t*>(in.data());
  for (std::size_t r = 0; r < rows; ++r) dequantize_row(k, p + r * lay.row_bytes(), cols, fmt, out.data() + r * cols, r);
}

void rowwise_dq(std::span<const float> x, std::size_t cols, RowwiseFormat fmt, std::span<float> out) {
  const std::size_t rows = checked_rows(x.size(), cols, fmt);
  const RowwiseKernels& k = rowwise_kernels();  // once per call: the level is fixed while it runs
  SPARQ_CHECK_AS(InputError, out.size() == x.size(), "row-wise DQ: output size {} != input size {}", out.size(),
                 x.size());
  // One encoded row at a time: the same code path as Q then D, so DQ is
  // bitwise what a receiver would see, in O(cols) scratch.
  std::vector<std::uint8_t> row_buf(RowwiseLayout{cols, fmt}.row_bytes());
  for (std::size_t r = 0; r < rows; ++r) {
    quantize_rows(k, x.data() + r * cols, nullptr, 1, cols, fmt, row_buf.data(), r);
    dequantize_row(k, row_buf.data(), cols, fmt, out.data() + r * cols, r);
  }
}

void rowwise_dqe(std::span<const float> t, std::span<const float> y, std::span<float> err, std::size_t cols,
                 RowwiseFormat fmt, std::span<float> out) {
  const std::size_t n = t.size();
  const std::size_t rows = checked_rows(n, cols, fmt);
  const RowwiseKernels& k = rowwise_kernels();  // once per call: the level is fixed while it runs
  SPARQ_CHECK_AS(InputError, (y.empty() || y.size() == n) && err.size() == n && out.size() == n,
                 "row-wise DQE: sizes t {} y {} err {} out {}", n, y.size(), err.size(), out.size());
  std::vector<float> z(cols);
  std::vector<std::uint8_t> row_buf(RowwiseLayout{cols, fmt}.row_bytes());
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t off = r * cols;
    for (std::size_t i = 0; i < cols; ++i) z[i] = (y.empty() ? t[off + i] : t[off + i] + y[off + i]) + err[off + i];
    quantize_rows(k, z.data(), nullptr, 1, cols, fmt, row_buf.data(), r);
    dequantize_row(k, row_buf.data(), cols, fmt, out.data() + off, r);
    for (std::size_t i = 0; i < cols; ++i) err[off + i] = z[i] - out[off + i];
  }
}

}  // namespace sparq::compress
