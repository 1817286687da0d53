// sparq/cuda/rowwise.cu itself, its kernels run on the host under
// tests/cuda/simt.h (a block's threads as std::threads, barriers for
// __syncthreads/__syncwarp), through its C entry points: the bytes, the
// decoded floats, the residuals and the fault flags against the CPU codec,
// bit for bit, for rows that take each kernel (staged 4, 2 or 1 warps a
// block, thread per row) and for misaligned outputs.
#include "tests/cuda/simt.h"
// clang-format off: the kernels after the emulation they compile against
#include "sparq/cuda/rowwise.cu"
// clang-format on

#include <gtest/gtest.h>

#include "sparq/compress/rowwise_quant.h"
#include "sparq/core/error.h"
#include "tests/cuda/rowwise_inputs.h"

namespace sparq {
namespace {

using compress::RowwiseFormat;
using compress::RowwiseLayout;
using compress::ScaleType;

TEST(CudaRowwiseKernels, EncodeDecodeAndCompensateAsTheCpuCodec) {
  int compared = 0;
  // 16 and 33: staged, 4 warps; 64: 4 warps, 2 with residuals; 128: 2
  // warps, 1 with residuals; 300: 1 warp, a thread a row with residuals;
  // 400: a thread a row.
  for (int cols : {1, 16, 33, 64, 128, 300, 400}) {
    for (const cuda_test::Input& in : cuda_test::inputs(cols)) {
      // The mapping is what this test is for (cuda_row_test has every input
      // row by row); each emulated launch starts a thread per GPU thread.
      if (in.name != "random" && in.name != "half steps" && in.name != "signed zeros") continue;
      for (int bits : {8, 4, 2}) {
        for (ScaleType scale : {ScaleType::F16, ScaleType::F32}) {
          SCOPED_TRACE(in.name + ", " + std::to_string(cols) + " cols, q" + std::to_string(bits) +
                       (scale == ScaleType::F16 ? " f16" : " f32"));
          const RowwiseFormat f{bits, scale};
          const std::size_t rows = in.x.size() / cols, rb = RowwiseLayout{std::size_t(cols), f}.row_bytes();
          std::vector<std::byte> want(rows * rb), want_ec(rows * rb);
          std::vector<float> want_err = cuda_test::residual(in.x.size());
          try {
            compress::rowwise_quantize(in.x, cols, f, want);
            compress::rowwise_quantize_ec(in.x, want_err, cols, f, want_ec);
          } catch (const InputError&) {
            continue;  // beyond fp16: the flags are cuda_row_test's (row by row)
          }
          const bool f16 = scale == ScaleType::F16;
          // One byte in front of the output: rows whose start is not a word's.
          for (std::size_t shift : {0, 1}) {
            if (shift && in.name != "random") continue;
            std::vector<std::uint8_t> got(rows * rb + shift), got_ec(rows * rb + shift);
            std::vector<std::int8_t> faults(rows, -1), faults_ec(rows, -1);
            std::vector<float> err = cuda_test::residual(in.x.size());
            ASSERT_EQ(sparq_cuda_quantize(in.x.data(), nullptr, got.data() + shift, faults.data(),
                                          static_cast<std::int64_t>(rows), cols, bits, f16, nullptr),
                      0);
            ASSERT_EQ(sparq_cuda_quantize(in.x.data(), err.data(), got_ec.data() + shift, faults_ec.data(),
                                          static_cast<std::int64_t>(rows), cols, bits, f16, nullptr),
                      0);
            for (std::size_t r = 0; r < rows; ++r) ASSERT_EQ(faults[r] | faults_ec[r], 0) << r;
            ASSERT_EQ(std::memcmp(got.data() + shift, want.data(), want.size()), 0);
            ASSERT_EQ(std::memcmp(got_ec.data() + shift, want_ec.data(), want.size()), 0);
            ASSERT_EQ(std::memcmp(err.data(), want_err.data(), err.size() * sizeof(float)), 0);
            std::vector<float> back(in.x.size()), want_back(in.x.size());
            compress::rowwise_dequantize(want, cols, f, want_back);
            std::vector<std::int8_t> bad(rows, -1);
            ASSERT_EQ(sparq_cuda_dequantize(got.data() + shift, back.data(), bad.data(),
                                            static_cast<std::int64_t>(rows), cols, bits, f16, nullptr),
                      0);
            for (std::size_t r = 0; r < rows; ++r) ASSERT_EQ(bad[r], 0) << r;
            ASSERT_EQ(std::memcmp(back.data(), want_back.data(), back.size() * sizeof(float)), 0);
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

TEST(CudaRowwiseKernels, FlagTheRowsAndHeadersTheCpuCodecRefuses) {
  for (int cols : {16, 300, 400}) {  // staged 4 warps and 1, and a thread a row
    std::vector<float> x(5 * cols, 1.0f);
    x[3 * cols + 2] = NAN;
    std::vector<std::uint8_t> out(5 * RowwiseLayout{std::size_t(cols), {4, ScaleType::F16}}.row_bytes());
    std::vector<std::int8_t> faults(5, -1);
    ASSERT_EQ(sparq_cuda_quantize(x.data(), nullptr, out.data(), faults.data(), 5, cols, 4, 1, nullptr), 0);
    EXPECT_EQ(faults, (std::vector<std::int8_t>{0, 0, 0, cuda_row::kNotFinite, 0})) << cols;
    const std::uint8_t half_nan[2] = {0x00, 0x7e};
    std::memcpy(out.data() + 1 * (out.size() / 5), half_nan, 2);  // row 1's fp16 scale
    std::vector<float> back(x.size());
    ASSERT_EQ(sparq_cuda_dequantize(out.data(), back.data(), faults.data(), 5, cols, 4, 1, nullptr), 0);
    EXPECT_EQ(faults[1], cuda_row::kBadHeader) << cols;
    EXPECT_EQ(faults[0], 0) << cols;
  }
}

}  // namespace
}  // namespace sparq
