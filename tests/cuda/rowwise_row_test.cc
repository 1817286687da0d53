// The CUDA kernels' row (sparq/cuda/rowwise_row.h), compiled for the host,
// against the CPU codec (compress/rowwise_quant.h) bit for bit: bytes,
// decoded floats and residuals, on random and adversarial rows (the inputs
// of tests/python/gpu_codec_cases.py), and its faults where the CPU codec
// throws. Everything of the kernels but the thread mapping runs here; the
// kernels themselves are checked on a GPU (scripts/device-check).
#include "sparq/cuda/rowwise_row.h"
#include "tests/cuda/rowwise_inputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sparq/compress/rowwise_quant.h"
#include "sparq/core/error.h"

namespace sparq {
namespace {

using compress::RowwiseFormat;
using compress::RowwiseLayout;
using compress::ScaleType;
namespace row = cuda_row;

using cuda_test::inputs;
using cuda_test::Input;
using cuda_test::residual;

// One row through the kernels' code: its bytes and fault; with `err`, x +
// err encoded and err left as the kernel leaves it.
row::Fault encode_row(const float* x, float* err, int cols, RowwiseFormat f, std::uint8_t* out) {
  return row::quantize_row(
      cols, f.bits, f.scale == ScaleType::F16, [&](int j) { return err ? x[j] + err[j] : x[j]; },
      [&](int off, std::uint32_t w, int n) {
        for (int k = 0; k < n; ++k) out[off + k] = static_cast<std::uint8_t>(w >> (8 * k));
      },
      [&](int j, float v) {
        if (err) err[j] = v;
      });
}

row::Fault decode_row(const std::uint8_t* in, int cols, RowwiseFormat f, float* out) {
  return row::dequantize_row(
      cols, f.bits, f.scale == ScaleType::F16, [&](int k) { return static_cast<std::uint32_t>(in[k]); },
      [&](int j, float v) { out[j] = v; });
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(CudaRow, EncodesDecodesAndCompensatesAsTheCpuCodec) {
  int compared = 0, refused = 0;
  for (int cols : {64, 1, 7, 16, 33, 128, 300}) {
    for (const Input& in : inputs(cols)) {
      for (int bits : {8, 4, 2}) {
        for (ScaleType scale : {ScaleType::F16, ScaleType::F32}) {
          const RowwiseFormat f{bits, scale};
          const RowwiseLayout lay{static_cast<std::size_t>(cols), f};
          const std::size_t rb = lay.row_bytes(), rows = in.x.size() / cols;
          const std::vector<float> e0 = residual(in.x.size());
          for (std::size_t r = 0; r < rows; ++r) {
            SCOPED_TRACE(in.name + ", " + std::to_string(cols) + " cols, q" + std::to_string(bits) +
                         (scale == ScaleType::F16 ? " f16" : " f32") + ", row " + std::to_string(r));
            const std::span<const float> x(in.x.data() + r * cols, cols);
            std::vector<std::byte> want(rb), want_ec(rb);
            std::vector<float> want_err(e0.begin() + r * cols, e0.begin() + (r + 1) * cols), got_err = want_err;
            std::vector<std::uint8_t> got(rb), got_ec(rb);
            const row::Fault fault = encode_row(x.data(), nullptr, cols, f, got.data());
            const row::Fault fault_ec = encode_row(x.data(), got_err.data(), cols, f, got_ec.data());
            // Where the CPU codec refuses a row (beyond fp16, the only
            // refusal these inputs meet), the kernel flags it.
            try {
              compress::rowwise_quantize(x, cols, f, want);
              ASSERT_EQ(fault, row::kOk);
              ASSERT_EQ(std::memcmp(got.data(), want.data(), rb), 0);
              ++compared;
            } catch (const InputError&) {
              EXPECT_EQ(fault, row::kBeyondFp16);
              ++refused;
              continue;
            }
            try {
              compress::rowwise_quantize_ec(x, want_err, cols, f, want_ec);
              ASSERT_EQ(fault_ec, row::kOk);
              ASSERT_EQ(std::memcmp(got_ec.data(), want_ec.data(), rb), 0);
              ASSERT_TRUE(same_bits(got_err.data(), want_err.data(), cols));
            } catch (const InputError&) {
              EXPECT_EQ(fault_ec, row::kBeyondFp16);
              ++refused;
            }
            std::vector<float> want_back(cols), got_back(cols);
            compress::rowwise_dequantize(want, cols, f, want_back);
            ASSERT_EQ(decode_row(got.data(), cols, f, got_back.data()), row::kOk);
            ASSERT_TRUE(same_bits(got_back.data(), want_back.data(), cols));
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 10000);
  EXPECT_GT(refused, 0);  // the fp16 refusals were met, and flagged
}

TEST(CudaRow, FlagsTheRowsTheCpuCodecRefuses) {
  const RowwiseFormat f16{4, ScaleType::F16}, f32{4, ScaleType::F32};
  struct Case {
    std::vector<float> x;
    RowwiseFormat f;
    row::Fault fault;
  };
  for (const Case& c :
       {Case{{1.0f, NAN, 2.0f}, f32, row::kNotFinite}, Case{{1.0f, INFINITY, 2.0f}, f16, row::kNotFinite},
        Case{{-3e38f, 3e38f}, f32, row::kRangeOverflow}, Case{{0.0f, 1.05e6f}, f16, row::kBeyondFp16},
        Case{{-70000.0f, 0.0f}, f16, row::kBeyondFp16}}) {
    const int cols = static_cast<int>(c.x.size());
    std::vector<std::uint8_t> out(RowwiseLayout{c.x.size(), c.f}.row_bytes());
    EXPECT_EQ(encode_row(c.x.data(), nullptr, cols, c.f, out.data()), c.fault) << c.x[0];
    std::vector<std::byte> cpu(out.size());
    EXPECT_THROW(compress::rowwise_quantize(c.x, c.x.size(), c.f, cpu), InputError) << c.x[0];
    // With a residual, a faulty row's residual holds x + err (as the CPU's).
    std::vector<float> err(c.x.size(), 0.5f);
    EXPECT_EQ(encode_row(c.x.data(), err.data(), cols, c.f, out.data()), c.fault);
    for (std::size_t j = 0; j < c.x.size(); ++j) {
      if (std::isfinite(c.x[j])) {
        EXPECT_EQ(err[j], c.x[j] + 0.5f) << j;
      }
    }
  }
}

TEST(CudaRow, RefusesTheHeadersTheCpuDecoderRefuses) {
  const RowwiseFormat f32{8, ScaleType::F32}, f16{8, ScaleType::F16};
  float out[2];
  auto header32 = [](float scale, float bias) {
    std::vector<std::uint8_t> b(10, 0);
    std::memcpy(b.data(), &scale, 4);
    std::memcpy(b.data() + 4, &bias, 4);
    return b;
  };
  for (const auto& [scale, bias] :
       {std::pair{NAN, 0.0f}, {-1.0f, 0.0f}, {INFINITY, 0.0f}, {1.0f, INFINITY}, {1.0f, NAN}}) {
    const auto b = header32(scale, bias);
    EXPECT_EQ(decode_row(b.data(), 2, f32, out), row::kBadHeader);
    std::vector<float> cpu(2);
    EXPECT_THROW(compress::rowwise_dequantize(std::as_bytes(std::span(b)), 2, f32, cpu), WireError);
  }
  const std::uint8_t half_nan[6] = {0x00, 0x7e, 0x00, 0x00, 1, 2}, half_ok[6] = {0x00, 0x3c, 0x00, 0xbc, 1, 2};
  EXPECT_EQ(decode_row(half_nan, 2, f16, out), row::kBadHeader);
  ASSERT_EQ(decode_row(half_ok, 2, f16, out), row::kOk);  // scale 1, bias -1
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
}

// The staged kernels' copies: the 32 lanes together move each of a warp's
// values once, to its row's padded place, and padding keeps the banks apart.
TEST(CudaRow, WarpStagingMovesEveryValueOnceToItsPlace) {
  for (int cols : {1, 2, 3, 7, 16, 17, 31, 32, 33, 64, 95, 191}) {
    for (int rows : {1, 5, 32}) {
      const int n = rows * cols, pitch = row::pitch_of(cols);
      ASSERT_EQ(pitch % 2, 1);
      ASSERT_GE(pitch, cols);
      std::vector<int> seen(n, 0);
      for (int lane = 0; lane < 32; ++lane) {
        int last = -1;
        row::for_warp_values(lane, n, cols, [&](int i, int s) {
          ASSERT_GT(i, last);
          last = i;
          ASSERT_EQ(i % 32, lane);
          ASSERT_EQ(s, i / cols * pitch + i % cols) << cols << " " << i;
          ++seen[i];
        });
      }
      for (int i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << cols << " cols, value " << i;
      // Value j of 32 rows: 32 different banks.
      for (int j = 0; j < cols; ++j) {
        std::vector<bool> bank(32, false);
        for (int lane = 0; lane < 32; ++lane) bank[(lane * pitch + j) % 32] = true;
        ASSERT_EQ(std::count(bank.begin(), bank.end(), true), 32) << cols;
      }
    }
  }
}

}  // namespace
}  // namespace sparq
