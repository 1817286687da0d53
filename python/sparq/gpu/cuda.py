"""sparq's CUDA C++ kernels (sparq/cuda, built into libsparq_cuda.so where
nvcc was found): the row-wise codec with a thread to a row and DCT-DP's
threshold-pack, the same bytes and floats as the Triton kernels and the CPU
codecs. Loaded through ctypes and called with the tensors' device pointers
on torch's current stream, so the library needs no torch of its own.

KERNELS says which kernels sparq.gpu runs: "triton" (the default) or "cuda"
(these), from SPARQ_GPU_KERNELS. The library is the package's (beside
_sparq), or the file SPARQ_CUDA_LIB names (scripts/device-check carries it
apart from the package)."""
import ctypes
import functools
import os
import pathlib

import torch

KERNELS = os.environ.get("SPARQ_GPU_KERNELS", "triton")


def selected():
    """Whether sparq.gpu runs these kernels (KERNELS == "cuda")."""
    if KERNELS not in ("triton", "cuda"):
        raise ValueError(f"sparq.gpu: kernels '{KERNELS}' (SPARQ_GPU_KERNELS); they are triton or cuda")
    return KERNELS == "cuda"


@functools.cache
def library():
    """The loaded library, or None where it was not built."""
    path = os.environ.get("SPARQ_CUDA_LIB") or pathlib.Path(__file__).resolve().parents[1] / "libsparq_cuda.so"
    if not pathlib.Path(path).is_file():
        return None
    lib = ctypes.CDLL(str(path))
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.sparq_cuda_quantize.argtypes = [p, p, p, p, i64, i32, i32, i32, p]
    lib.sparq_cuda_dequantize.argtypes = [p, p, p, i64, i32, i32, i32, p]
    lib.sparq_cuda_select_pairs.argtypes = [p, p, ctypes.c_float, i64, p, p, p, p, p]
    lib.sparq_cuda_move_pairs.argtypes = [p, p, p, p, i64, p, p, p]
    lib.sparq_cuda_error.restype = ctypes.c_char_p
    lib.sparq_cuda_error.argtypes = [i32]
    return lib


def _run(name, tensors, *args):
    """The library's `name`(*args, stream) on the device of tensors[0], all
    of `tensors` (None: absent) CUDA tensors; args are passed as they are,
    with each tensor replaced by its device pointer."""
    lib = library()
    if lib is None:
        raise ValueError("sparq's CUDA kernels are not built here (no nvcc at build time); "
                         "SPARQ_GPU_KERNELS=triton runs the Triton ones")
    for t in tensors:
        if t is not None and not t.is_cuda:
            raise ValueError(f"sparq's CUDA kernels take CUDA tensors, not tensors on {t.device}")
    device = tensors[0].device
    ptrs = [a.data_ptr() if torch.is_tensor(a) else a for a in args]
    with torch.cuda.device(device):
        rc = getattr(lib, name)(*ptrs, ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream))
    if rc:
        raise RuntimeError(f"sparq CUDA kernel launch: {lib.sparq_cuda_error(rc).decode()}")


def quantize_into(x, err, out, faults, rows, cols, bits, f16):
    """rowwise's quantize on rows of x (+ err, updated) into out and faults."""
    _run("sparq_cuda_quantize", (x, err, out, faults), x, err, out, faults, rows, cols, bits, int(f16))


def dequantize_into(data, out, faults, rows, cols, bits, f16):
    _run("sparq_cuda_dequantize", (data, out, faults), data, out, faults, rows, cols, bits, int(f16))


def pack_block():
    """Values a block of select_pairs takes (its staging slot's size)."""
    lib = library()
    if lib is None:
        raise ValueError("sparq's CUDA kernels are not built here (no nvcc at build time)")
    return lib.sparq_cuda_pack_block()


def select_pairs(g, err, tau, stage_idx, stage_val, counts, faults):
    """threshold.py's first kernel: g (+ err, updated) against tau into the
    staging buffers, a count and a fault flag a block."""
    _run("sparq_cuda_select_pairs", (g, err, stage_idx, stage_val, counts, faults), g, err, tau, g.numel(), stage_idx,
         stage_val, counts, faults)


def move_pairs(stage_idx, stage_val, counts, ends, out_idx, out_val):
    """The second: each block's staged pairs to their place (ends: the
    inclusive cumulative sum of counts)."""
    _run("sparq_cuda_move_pairs", (out_idx, stage_idx, stage_val, counts, ends, out_val), stage_idx, stage_val,
         counts, ends, counts.numel(), out_idx, out_val)
