// The row-wise codec as CUDA kernels, a thread to a row (rowwise_row.h holds
// the row's work, shared with the host test that checks it against the CPU
// codec). Where sparq.gpu's Triton kernels spread a row over lanes and
// reduce across them, here a row's min, max, grid and codes stay in one
// thread's registers: no shuffles, no block-wide barrier, and a division
// only for the values that need one.
//
// A C interface, loaded by python/sparq/gpu/cuda.py through ctypes with the
// tensors' device pointers and torch's current stream: nothing here links
// to torch, so one build serves any torch of the same CUDA major version.
#include <cuda_runtime.h>

#include <cstdint>

#include "sparq/cuda/rowwise_row.h"

namespace {

using sparq::cuda_row::dequantize_row;
using sparq::cuda_row::quantize_row;

constexpr int kThreads = 128;
// The kernels' names start with _sparq_, as sparq.gpu's Triton kernels do:
// examples/dlrm_ddp.py --profile-steps counts them as sparq's GPU time.

struct RowOut {
  std::uint8_t *row;
  bool aligned;  // the row starts on a 4-byte boundary: whole words are stored
                 // as words
  __device__ void operator()(int off, std::uint32_t w, int n) const {
    if (aligned && n == 4) {
      *reinterpret_cast<std::uint32_t *>(row + off) = w;
    } else {
      for (int k = 0; k < n; ++k) row[off + k] = static_cast<std::uint8_t>(w >> (8 * k));
    }
  }
};

template <bool EC>
__global__ void _sparq_quantize_rows(const float *__restrict__ x, float *__restrict__ err,
                                     std::uint8_t *__restrict__ out, std::int8_t *__restrict__ faults,
                                     std::int64_t rows, int cols, int row_bytes, int bits, bool f16) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *xr = x + r * cols;
  float *er = EC ? err + r * cols : nullptr;
  std::uint8_t *o = out + r * row_bytes;
  const RowOut put{o, (reinterpret_cast<std::uintptr_t>(o) & 3) == 0};
  faults[r] = quantize_row(
      cols, bits, f16, [&](int j) { return EC ? __fadd_rn(xr[j], er[j]) : xr[j]; }, put,
      [&](int j, float v) {
        if (EC) er[j] = v;
      });
}

__global__ void _sparq_dequantize_rows(const std::uint8_t *__restrict__ in, float *__restrict__ out,
                                       std::int8_t *__restrict__ faults, std::int64_t rows, int cols, int row_bytes,
                                       int bits, bool f16) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::uint8_t *row = in + r * row_bytes;
  float *o = out + r * cols;
  faults[r] = dequantize_row(
      cols, bits, f16, [&](int k) { return static_cast<std::uint32_t>(row[k]); }, [&](int j, float v) { o[j] = v; });
}

unsigned blocks(std::int64_t rows) { return static_cast<unsigned>((rows + kThreads - 1) / kThreads); }

}  // namespace

extern "C" {

// x, err (or null), out, faults: device pointers; stream: a cudaStream_t.
// Returns a cudaError_t (0: launched).
int sparq_cuda_quantize(const float *x, float *err, void *out, std::int8_t *faults, std::int64_t rows, int cols,
                        int bits, int f16, void *stream) {
  if (rows == 0) return 0;
  const int row_bytes = (f16 ? 4 : 8) + (cols * bits + 7) / 8;
  auto *o = static_cast<std::uint8_t *>(out);
  auto s = static_cast<cudaStream_t>(stream);
  if (err)
    _sparq_quantize_rows<true><<<blocks(rows), kThreads, 0, s>>>(x, err, o, faults, rows, cols, row_bytes, bits, f16);
  else
    _sparq_quantize_rows<false>
        <<<blocks(rows), kThreads, 0, s>>>(x, nullptr, o, faults, rows, cols, row_bytes, bits, f16);
  return static_cast<int>(cudaGetLastError());
}

int sparq_cuda_dequantize(const void *in, float *out, std::int8_t *faults, std::int64_t rows, int cols, int bits,
                          int f16, void *stream) {
  if (rows == 0) return 0;
  const int row_bytes = (f16 ? 4 : 8) + (cols * bits + 7) / 8;
  _sparq_dequantize_rows<<<blocks(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const std::uint8_t *>(in), out, faults, rows, cols, row_bytes, bits, f16);
  return static_cast<int>(cudaGetLastError());
}

const char *sparq_cuda_error(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // extern "C"
