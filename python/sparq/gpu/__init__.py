"""sparq's codecs as Triton kernels, for tensors on a GPU: the same bytes
and floats as the CPU codecs (a GPU rank's messages decode on a CPU rank
and back), so that only compressed bytes need leave the device.

    rowwise.quantize / dequantize   row-wise q8/q4/q2, f16 or f32 scales,
                                    error-compensated with `err`
    threshold.threshold_pack        DCT-DP's fused feedback-mask-pack
    threshold.sparsity_threshold    DCT's top-k threshold
    topk.bucket_topk                SparCML's TopK per bucket (error-accumulated with `err`)

Why Triton and not CUDA C++: docs/gpu.md. Under TRITON_INTERPRET=1 the
same kernels run on CPU tensors, which is how the tests compare them with
the CPU codecs on machines without a GPU."""
from .rowwise import dequantize, quantize, row_bytes  # noqa: F401
from .threshold import sparsity_threshold, threshold_pack  # noqa: F401
from .topk import bucket_topk  # noqa: F401
