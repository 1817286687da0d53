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
#include <cstdint>

#include "sparq/cuda/launch.h"
#include "sparq/cuda/rowwise_row.h"

namespace {

using sparq::cuda_row::dequantize_row;
using sparq::cuda_row::for_warp_values;
using sparq::cuda_row::pitch_of;
using sparq::cuda_row::quantize_row;

// The kernels' names start with _sparq_, as sparq.gpu's Triton kernels do:
// examples/dlrm_ddp.py --profile-steps counts them as sparq's GPU time.
constexpr int kThreads = 128;  // the thread-per-row kernels' block

struct RowOut {
  std::uint8_t* row;
  bool aligned;  // the row starts on a 4-byte boundary: whole words go as words
  __device__ void operator()(int off, std::uint32_t w, int n) const {
    if (aligned && n == 4) {
      *reinterpret_cast<std::uint32_t*>(row + off) = w;
    } else {
      for (int k = 0; k < n; ++k) row[off + k] = static_cast<std::uint8_t>(w >> (8 * k));
    }
  }
};

template <bool EC>
__global__ void _sparq_quantize_rows(const float* __restrict__ x, float* __restrict__ err,
                                     std::uint8_t* __restrict__ out, std::int8_t* __restrict__ faults,
                                     std::int64_t rows, int cols, int row_bytes, int bits, bool f16) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float* er = EC ? err + r * cols : nullptr;
  std::uint8_t* o = out + r * row_bytes;
  const RowOut put{o, (reinterpret_cast<std::uintptr_t>(o) & 3) == 0};
  faults[r] = quantize_row(
      cols, bits, f16, [&](int j) { return EC ? __fadd_rn(xr[j], er[j]) : xr[j]; }, put,
      [&](int j, float v) {
        if (EC) er[j] = v;
      });
}

__global__ void _sparq_dequantize_rows(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                       std::int8_t* __restrict__ faults, std::int64_t rows, int cols, int row_bytes,
                                       int bits, bool f16) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::uint8_t* row = in + r * row_bytes;
  float* o = out + r * cols;
  faults[r] = dequantize_row(
      cols, bits, f16, [&](int k) { return static_cast<std::uint32_t>(row[k]); }, [&](int j, float v) { o[j] = v; });
}

// Rows that fit go through shared memory, 32 a warp: the warp reads its
// rows (and their residuals, or their bytes) with coalesced loads, each
// thread then works on its row there, and the residuals and decoded values
// go back coalesced. A thread reading its own row straight from global
// memory touches 32 sectors with each load instruction, one for every
// thread, and the L1 cache's bandwidth becomes the limit (at 128 values
// with residuals, 0.035 of a device-to-device copy's bytes per second on
// the H200, against 0.41 staged at 64). A block holds at most 48 KiB (no
// opt-in needed): 4 warps of up to 12 KiB each (rows of up to 47 values with
// residuals, 95 without), 2 of up to 24 KiB (95 and 191) or 1 of up to 48
// KiB (191 and 383); wider rows take the thread-per-row kernels.
constexpr int kStagedBytes = 12 * 1024;

template <bool EC>
__global__ void _sparq_quantize_staged(const float* __restrict__ x, float* __restrict__ err,
                                       std::uint8_t* __restrict__ out, std::int8_t* __restrict__ faults,
                                       std::int64_t rows, int cols, int row_bytes, int bits, bool f16) {
  float* staged = dynamic_shared<float>();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, pitch = pitch_of(cols);
  const std::int64_t r0 = (static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + warp) * 32;
  if (r0 >= rows) return;  // the whole warp
  float* sx = staged + warp * 32 * pitch * (EC ? 2 : 1);
  float* se = sx + 32 * pitch;
  const int nrows = static_cast<int>(rows - r0 < 32 ? rows - r0 : 32), n = nrows * cols;
  const float* gx = x + r0 * cols;
  float* ge = EC ? err + r0 * cols : nullptr;
  for_warp_values(lane, n, cols, [&](int i, int s) {
    sx[s] = gx[i];
    if (EC) se[s] = ge[i];
  });
  __syncwarp();
  if (lane < nrows) {
    const float* v = sx + lane * pitch;
    float* e = se + lane * pitch;
    std::uint8_t* o = out + (r0 + lane) * row_bytes;
    faults[r0 + lane] = quantize_row(
        cols, bits, f16, [&](int j) { return EC ? __fadd_rn(v[j], e[j]) : v[j]; },
        RowOut{o, (reinterpret_cast<std::uintptr_t>(o) & 3) == 0},
        [&](int j, float left) {
          if (EC) e[j] = left;
        });
  }
  __syncwarp();
  if (EC) for_warp_values(lane, n, cols, [&](int i, int s) { ge[i] = se[s]; });
}

__global__ void _sparq_dequantize_staged(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                         std::int8_t* __restrict__ faults, std::int64_t rows, int cols, int row_bytes,
                                         int bits, bool f16) {
  float* staged = dynamic_shared<float>();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, pitch = pitch_of(cols);
  const std::int64_t r0 = (static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + warp) * 32;
  if (r0 >= rows) return;
  const int words = (32 * row_bytes + 3) / 4;  // the warp's bytes, padded to a word
  float* so = staged + warp * (32 * pitch + words);
  auto* sb = reinterpret_cast<std::uint8_t*>(so + 32 * pitch);
  const int nrows = static_cast<int>(rows - r0 < 32 ? rows - r0 : 32);
  const std::uint8_t* gb = in + r0 * row_bytes;
  for (int i = lane; i < nrows * row_bytes; i += 32) sb[i] = gb[i];
  __syncwarp();
  if (lane < nrows) {
    const std::uint8_t* b = sb + lane * row_bytes;
    float* v = so + lane * pitch;
    faults[r0 + lane] = dequantize_row(
        cols, bits, f16, [&](int k) { return static_cast<std::uint32_t>(b[k]); }, [&](int j, float d) { v[j] = d; });
  }
  __syncwarp();
  float* go = out + r0 * cols;
  for_warp_values(lane, nrows * cols, cols, [&](int i, int s) { go[i] = so[s]; });
}

// Warps a block of the staged kernels for `per_warp` bytes of shared memory
// a warp, or 0: the rows do not fit.
int staged_warps(std::size_t per_warp) {
  if (per_warp <= kStagedBytes) return 4;
  if (per_warp <= 2 * kStagedBytes) return 2;
  if (per_warp <= 4 * kStagedBytes) return 1;
  return 0;
}

unsigned blocks(std::int64_t rows, int rows_a_block) {
  return static_cast<unsigned>((rows + rows_a_block - 1) / rows_a_block);
}

}  // namespace

extern "C" {

// x, err (or null), out, faults: device pointers; stream: a cudaStream_t.
// Returns a cudaError_t (0: launched).
int sparq_cuda_quantize(const float* x, float* err, void* out, std::int8_t* faults, std::int64_t rows, int cols,
                        int bits, int f16, void* stream) {
  if (rows == 0) return 0;
  const int row_bytes = (f16 ? 4 : 8) + (cols * bits + 7) / 8;
  auto* o = static_cast<std::uint8_t*>(out);
  auto s = static_cast<cudaStream_t>(stream);
  const std::size_t per_warp = 32u * pitch_of(cols) * sizeof(float) * (err ? 2 : 1);
  if (const int w = staged_warps(per_warp)) {
    const unsigned grid = blocks(rows, 32 * w);
    if (err)
      SPARQ_LAUNCH(grid, 32 * w, w * per_warp, s, _sparq_quantize_staged<true>)
      (x, err, o, faults, rows, cols, row_bytes, bits, f16);
    else
      SPARQ_LAUNCH(grid, 32 * w, w * per_warp, s, _sparq_quantize_staged<false>)
      (x, nullptr, o, faults, rows, cols, row_bytes, bits, f16);
  } else if (err) {
    SPARQ_LAUNCH(blocks(rows, kThreads), kThreads, 0, s, _sparq_quantize_rows<true>)
    (x, err, o, faults, rows, cols, row_bytes, bits, f16);
  } else {
    SPARQ_LAUNCH(blocks(rows, kThreads), kThreads, 0, s, _sparq_quantize_rows<false>)
    (x, nullptr, o, faults, rows, cols, row_bytes, bits, f16);
  }
  return static_cast<int>(cudaGetLastError());
}

int sparq_cuda_dequantize(const void* in, float* out, std::int8_t* faults, std::int64_t rows, int cols, int bits,
                          int f16, void* stream) {
  if (rows == 0) return 0;
  const int row_bytes = (f16 ? 4 : 8) + (cols * bits + 7) / 8;
  const auto* b = static_cast<const std::uint8_t*>(in);
  auto s = static_cast<cudaStream_t>(stream);
  const std::size_t per_warp = (32u * pitch_of(cols) + (32u * row_bytes + 3) / 4) * sizeof(float);
  if (const int w = staged_warps(per_warp))
    SPARQ_LAUNCH(blocks(rows, 32 * w), 32 * w, w * per_warp, s, _sparq_dequantize_staged)
    (b, out, faults, rows, cols, row_bytes, bits, f16);
  else
    SPARQ_LAUNCH(blocks(rows, kThreads), kThreads, 0, s, _sparq_dequantize_rows)
    (b, out, faults, rows, cols, row_bytes, bits, f16);
  return static_cast<int>(cudaGetLastError());
}

const char* sparq_cuda_error(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // extern "C"
