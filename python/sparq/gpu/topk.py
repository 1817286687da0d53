"""SparCML's TopK per bucket on the GPU, pair for pair the CPU's bucket_topk
(sparq/compress/topk.h): in every run of `bucket` consecutive values (the
last may be shorter) the min(k, run) largest |x|, ties at the smallest kept
magnitude going to the lowest indices, as (index, value) pairs in index
order. With `err`, TopK SGD's error accumulation as GradExchange does it:
W = err + x is selected from, err keeps W where nothing was sent, 0 where it
was.

A program takes one bucket and picks its k values one at a time: the
largest magnitude not yet picked, the lowest index among equals. That is
the CPU's order of preference itself, so no threshold or tie rule has to be
re-derived. Every bucket but the last sends exactly min(k, bucket) pairs,
so a bucket's pairs have a fixed place and no compaction pass is needed.
"""
import torch
import triton
import triton.language as tl

from .errors import raise_row_errors
from .profiling import profiled
from .threshold import load_sum

NOT_FINITE = tl.constexpr(1)  # a global a kernel reads must be constexpr
FAULTS = {1: "holds NaN or inf (TopK bucket {row})"}
WARPS = 4


@triton.jit
def _sparq_topk_kernel(x_ptr, e_ptr, n, k, out_idx, out_val, faults, bucket,
                 EC: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * bucket
    lane = tl.arange(0, BLOCK)
    m = (lane < bucket) & (lane < n - start)
    w = load_sum(x_ptr, e_ptr, start, lane, m, EC)
    bad = m & ((w - w) != 0.0)
    tl.store(faults + pid, tl.max(tl.where(bad, NOT_FINITE, 0), axis=0).to(tl.int8))
    mag = tl.where(m & ~bad, tl.abs(w), -1.0)  # -1: never picked
    free = lane >= 0  # not picked yet
    for _ in range(k):
        top = tl.max(tl.where(free, mag, -1.0), axis=0)
        first = tl.min(tl.where(free & (mag == top) & (mag >= 0.0), lane, BLOCK), axis=0)
        free = free & (lane != first)
    picked = (lane < BLOCK) & (free == 0)
    if EC:
        tl.store(e_ptr + start + lane, tl.where(picked, 0.0, w), mask=m)
    p = picked.to(tl.int32)
    slot = pid.to(tl.int64) * tl.minimum(k, bucket) + tl.cumsum(p, axis=0) - p
    tl.store(out_idx + slot, (start + lane).to(tl.int32), mask=picked)
    tl.store(out_val + slot, w, mask=picked)


def bucket_topk(x, bucket, k, err=None, what="TopK: "):
    """The pairs (int32 indices, float32 values) of the min(k, run) largest
    |x| (+ err) of every run of `bucket` values, in index order, on x's
    device; with `err`, TopK SGD's error accumulation (err updated in
    place). NaN or inf raises ValueError naming the run; `what` names the
    tensor."""
    idx, val, faults = launch_bucket_topk(x, bucket, k, err, what)
    raise_row_errors(faults, FAULTS, what)
    return idx, val


@profiled("sparq.gpu.topk")
def launch_bucket_topk(x, bucket, k, err=None, what="TopK: "):
    """bucket_topk's kernel alone: (indices, values, per-bucket fault codes),
    nothing waited for (the pair count is known beforehand)."""
    if x.dtype != torch.float32 or not x.is_contiguous():
        raise ValueError(f"{what}the input must be a contiguous float32 tensor, not {x.dtype}")
    if not 0 < bucket <= 16384 or k < 0:
        raise ValueError(f"{what}buckets of {bucket} values, k = {k}; buckets of 1 to 16384 values, k >= 0")
    n = x.numel()
    if n >= 2**31:
        raise ValueError(f"{what}{n} values; at most 2^31 - 1 on the GPU")
    if err is not None and (err.shape != x.shape or err.device != x.device or err.dtype != torch.float32
                            or not err.is_contiguous()):
        raise ValueError(f"{what}the residual must be a contiguous float32 tensor of the input's shape and device")
    buckets = triton.cdiv(n, bucket)
    k = min(k, bucket)
    last = n - (buckets - 1) * bucket if buckets else 0
    count = (buckets - 1) * k + min(k, last) if buckets else 0
    idx = torch.empty(count, dtype=torch.int32, device=x.device)
    val = torch.empty(count, dtype=torch.float32, device=x.device)
    faults = torch.zeros(max(buckets, 1), dtype=torch.int8, device=x.device)
    if buckets:
        _sparq_topk_kernel[(buckets,)](x, err if err is not None else x, n, k, idx, val, faults, bucket,
                                 EC=err is not None, BLOCK=triton.next_power_of_2(bucket), num_warps=WARPS)
    return idx, val, faults
