#pragma once
// CUDA's execution model on the host, as much of it as sparq/cuda's kernels
// use, so that CI runs the kernels themselves (their thread mapping, shared
// memory, shuffles and barriers), not only their per-row code:
//  - a launch runs the grid's blocks one after another, and a block's
//    threads as std::threads, each with threadIdx/blockIdx/blockDim of its
//    own (thread-local);
//  - __syncthreads and __syncwarp are barriers (a returning thread drops
//    out of them, as an exited GPU thread does); __shfl_up_sync and
//    __syncthreads_or go through the block's memory between barriers;
//  - a block's static __shared__ variables are plain statics (one block at
//    a time), its dynamic shared memory a buffer of the launch's size;
//  - the _rn intrinsics are the operators, to be compiled with
//    -ffp-contract=off.
// Include it before the .cu file. Warp-synchronous code that relies on
// lockstep without a __syncwarp would pass here and fail on a GPU; the
// kernels have none.
#define SPARQ_SIMT 1

#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct dim3 {
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  unsigned x, y, z;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
using cudaStream_t = void*;
enum cudaError_t { cudaSuccess = 0 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t) { return "no error"; }

inline thread_local dim3 threadIdx, blockIdx, blockDim;

namespace sparq::simt {

struct Block {
  explicit Block(unsigned threads, std::size_t smem)
      : all(threads), shared((smem + sizeof(float4) - 1) / sizeof(float4)), lanes(threads) {
    for (unsigned w = 0; w < (threads + 31) / 32; ++w)
      warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, threads - 32 * w)));
  }
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float4> shared;
  std::vector<std::uint64_t> lanes;  // one word a thread, for shuffles
  int any = 0;
};
inline thread_local Block* block = nullptr;

// SPARQ_LAUNCH(grid, block, smem, stream, kernel)(args...)
template <class... P>
struct Launch {
  void (*kernel)(P...);
  dim3 grid, threads;
  std::size_t smem;
  template <class... A>
  void operator()(A&&... args) const {
    for (unsigned b = 0; b < grid.x; ++b) {
      Block blk(threads.x, smem);
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < threads.x; ++t)
        ts.emplace_back([&, b, t] {
          blockIdx = dim3(b), threadIdx = dim3(t), blockDim = threads;
          block = &blk;
          kernel(static_cast<P>(args)...);
          blk.warps[t / 32]->arrive_and_drop();
          blk.all.arrive_and_drop();
        });
      for (auto& th : ts) th.join();
    }
  }
};
template <class... P>
Launch<P...> launch(void (*kernel)(P...), dim3 grid, dim3 threads, std::size_t smem) {
  return {kernel, grid, threads, smem};
}

}  // namespace sparq::simt

#define SPARQ_LAUNCH(grid, threads, smem, stream, ...) \
  (static_cast<void>(stream), sparq::simt::launch(__VA_ARGS__, grid, threads, smem))

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(sparq::simt::block->shared.data());
}

inline void __syncthreads() { sparq::simt::block->all.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { sparq::simt::block->warps[threadIdx.x / 32]->arrive_and_wait(); }
inline int __syncthreads_or(int p) {
  auto* b = sparq::simt::block;
  b->all.arrive_and_wait();  // nobody still reads an earlier result
  if (p) __atomic_store_n(&b->any, 1, __ATOMIC_RELAXED);
  b->all.arrive_and_wait();
  const int r = __atomic_load_n(&b->any, __ATOMIC_RELAXED);
  b->all.arrive_and_wait();
  if (threadIdx.x == 0) b->any = 0;
  return r;
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned d) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t));
  auto* b = sparq::simt::block;
  const unsigned lane = threadIdx.x % 32;
  std::memcpy(&b->lanes[threadIdx.x], &v, sizeof(T));
  __syncwarp();
  T r = v;
  if (lane >= d) std::memcpy(&r, &b->lanes[threadIdx.x - d], sizeof(T));
  __syncwarp();
  return r;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
