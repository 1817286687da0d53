#pragma once
// What the kernels need of CUDA beyond plain C++ (launches, dynamic shared
// memory, the runtime's types), spelled once: under nvcc the real thing;
// on the host, under tests/cuda/simt.h, an emulation of a block's threads,
// so that CI runs the kernels themselves without a GPU.
#if defined(__CUDACC__)
#include <cuda_runtime.h>

// SPARQ_LAUNCH(grid, block, shared bytes, stream, kernel)(args...): the kernel
// last, since a template's arguments hold commas.
#define SPARQ_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>

// The block's dynamic shared memory (the launch's `smem` bytes), 16-byte aligned.
template <class T>
__device__ __forceinline__ T* dynamic_shared() {
  extern __shared__ float4 sparq_dynamic_shared[];
  return reinterpret_cast<T*>(sparq_dynamic_shared);
}
#elif !defined(SPARQ_SIMT)
#error "sparq/cuda compiles with nvcc, or on the host under tests/cuda/simt.h"
#endif
