#pragma once
#include <pybind11/pybind11.h>

namespace sparq {
// The CPU codecs themselves, for the GPU kernels' tests to compare against
// bit for bit (python/sparq/gpu/): rowwise_quantize, rowwise_dequantize,
// threshold_pack, sparsity_threshold, bucket_topk; and alltoallv_bytes, the
// exchange of blocks a GPU rank encoded itself.
void add_codecs(pybind11::module_& m);
}  // namespace sparq
