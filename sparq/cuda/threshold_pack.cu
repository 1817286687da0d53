// DCT-DP's fused feedback-threshold-pack as CUDA kernels, pair for pair the
// CPU's feedback_threshold_pack (compress/threshold_pack.h) and sparq.gpu's
// Triton kernels (python/sparq/gpu/threshold.py, whose layout this keeps):
//
//   w = g + e;  |w| >= tau: pair (i, w) kept, e[i] = 0;  else e[i] = w
//
// with the kept pairs in index order. A stream compaction in two kernels:
// each block of 4096 values reads g and e once, writes e, and writes its
// kept pairs, in order, to the start of its slot in a staging buffer, with
// their count; after a cumulative sum of the counts (torch's, between the
// two launches) the second kernel moves only the kept pairs to their place.
// A thread takes 16 consecutive values, so a block's order is the threads'
// order: one exclusive scan of the threads' counts places every pair.
#include <cstdint>

#include "sparq/cuda/launch.h"

namespace {

constexpr int kThreads = 256, kPerThread = 16, kBlock = kThreads * kPerThread;

// The exclusive prefix sum of v over the block, and the block's total.
__device__ int block_exclusive_scan(int v, int& total) {
  __shared__ int warp_sums[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int x = v;
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int k = 0; k < kThreads / 32; ++k) {
    if (k < warp) before += warp_sums[k];
    total += warp_sums[k];
  }
  return before + x - v;
}

// VEC: g and e are 16-byte aligned, so a thread's 16 values load as 4 float4.
template <bool EC, bool VEC>
__global__ void _sparq_select_pairs(const float* __restrict__ g, float* __restrict__ e, float tau, std::int64_t n,
                                    std::int32_t* __restrict__ stage_idx, float* __restrict__ stage_val,
                                    std::int32_t* __restrict__ counts, std::int8_t* __restrict__ faults) {
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * kBlock;
  const std::int64_t first = base + static_cast<std::int64_t>(threadIdx.x) * kPerThread;
  float w[kPerThread];
  if (VEC && first + kPerThread <= n) {
#pragma unroll
    for (int k = 0; k < kPerThread; k += 4) {
      const float4 a = *reinterpret_cast<const float4*>(g + first + k);
      w[k] = a.x, w[k + 1] = a.y, w[k + 2] = a.z, w[k + 3] = a.w;
      if (EC) {
        const float4 b = *reinterpret_cast<const float4*>(e + first + k);
        w[k] = __fadd_rn(w[k], b.x), w[k + 1] = __fadd_rn(w[k + 1], b.y);
        w[k + 2] = __fadd_rn(w[k + 2], b.z), w[k + 3] = __fadd_rn(w[k + 3], b.w);
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const std::int64_t i = first + k;
      w[k] = i < n ? (EC ? __fadd_rn(g[i], e[i]) : g[i]) : 0.0f;
    }
  }
  unsigned keep = 0;
  bool bad = false;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const bool in = first + k < n;
    if (in && fabsf(w[k]) >= tau) keep |= 1u << k;
    bad = bad || (in && __fsub_rn(w[k], w[k]) != 0.0f);  // NaN for NaN and +-inf
  }
  if (EC) {
    if (VEC && first + kPerThread <= n) {
#pragma unroll
      for (int k = 0; k < kPerThread; k += 4) {
        float4 r;
        r.x = (keep >> k) & 1 ? 0.0f : w[k], r.y = (keep >> (k + 1)) & 1 ? 0.0f : w[k + 1];
        r.z = (keep >> (k + 2)) & 1 ? 0.0f : w[k + 2], r.w = (keep >> (k + 3)) & 1 ? 0.0f : w[k + 3];
        *reinterpret_cast<float4*>(e + first + k) = r;
      }
    } else {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k)
        if (first + k < n) e[first + k] = (keep >> k) & 1 ? 0.0f : w[k];
    }
  }
  int total;
  int slot = block_exclusive_scan(__popc(keep), total);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    if ((keep >> k) & 1) {
      stage_idx[base + slot] = static_cast<std::int32_t>(first + k);
      stage_val[base + slot] = w[k];
      ++slot;
    }
  }
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
  if (__syncthreads_or(bad) && threadIdx.x == 0) faults[blockIdx.x] = 1;
}

__global__ void _sparq_move_pairs(const std::int32_t* __restrict__ stage_idx, const float* __restrict__ stage_val,
                                  const std::int32_t* __restrict__ counts, const std::int32_t* __restrict__ ends,
                                  std::int32_t* __restrict__ out_idx, float* __restrict__ out_val) {
  const int count = counts[blockIdx.x];
  const std::int64_t start = ends[blockIdx.x] - count, base = static_cast<std::int64_t>(blockIdx.x) * kBlock;
  for (int j = threadIdx.x; j < count; j += kThreads) {
    out_idx[start + j] = stage_idx[base + j];
    out_val[start + j] = stage_val[base + j];
  }
}

template <bool EC>
void launch_select(const float* g, float* e, float tau, std::int64_t n, std::int32_t* stage_idx, float* stage_val,
                   std::int32_t* counts, std::int8_t* faults, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((n + kBlock - 1) / kBlock);
  const bool vec = (reinterpret_cast<std::uintptr_t>(g) | (EC ? reinterpret_cast<std::uintptr_t>(e) : 0)) % 16 == 0;
  if (vec)
    SPARQ_LAUNCH(blocks, kThreads, 0, s, _sparq_select_pairs<EC, true>)
    (g, e, tau, n, stage_idx, stage_val, counts, faults);
  else
    SPARQ_LAUNCH(blocks, kThreads, 0, s, _sparq_select_pairs<EC, false>)
    (g, e, tau, n, stage_idx, stage_val, counts, faults);
}

}  // namespace

extern "C" {

// The values a block selects from: the staging buffers hold blocks * this.
int sparq_cuda_pack_block() { return kBlock; }

// g, e (or null), the staging buffers, counts and faults (a block each,
// faults zeroed by the caller): device pointers. Returns a cudaError_t.
int sparq_cuda_select_pairs(const float* g, float* e, float tau, std::int64_t n, std::int32_t* stage_idx,
                            float* stage_val, std::int32_t* counts, std::int8_t* faults, void* stream) {
  if (n == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  if (e)
    launch_select<true>(g, e, tau, n, stage_idx, stage_val, counts, faults, s);
  else
    launch_select<false>(g, nullptr, tau, n, stage_idx, stage_val, counts, faults, s);
  return static_cast<int>(cudaGetLastError());
}

// ends: the inclusive cumulative sum of counts.
int sparq_cuda_move_pairs(const std::int32_t* stage_idx, const float* stage_val, const std::int32_t* counts,
                          const std::int32_t* ends, std::int64_t blocks, std::int32_t* out_idx, float* out_val,
                          void* stream) {
  if (blocks == 0) return 0;
  SPARQ_LAUNCH(static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream), _sparq_move_pairs)
  (stage_idx, stage_val, counts, ends, out_idx, out_val);
  return static_cast<int>(cudaGetLastError());
}

}  // extern "C"
