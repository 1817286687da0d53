"""DCT-DP's threshold-mask-pack on the GPU, pair for pair the CPU's
(sparq/compress/threshold_pack.h and topk.h):

    w = grad + err;  |w| >= tau: pair (i, w) kept and err[i] = 0;  else err[i] = w

with the kept pairs in index order, and DCT's threshold tau = element
floor(n * eta) of |w| sorted ascending.

Packing in index order is a stream compaction. One pass writes each block's
kept pairs, already compacted, to the start of that block's slot in a
staging buffer and counts them; a cumulative sum of the counts places the
blocks; a second kernel moves only the kept pairs (a few percent of the
values at DCT-DP's sparsities) to their places. So the gradient and the
residual are read once, not twice as a count-then-write compaction would.
"""
import torch
import triton
import triton.language as tl

from . import cuda
from .errors import raise_row_errors
from .profiling import profiled

# Values a program selects, and its warps (scripts/gpu-bench.py --tune).
BLOCK, WARPS = 4096, 4
NOT_FINITE = tl.constexpr(1)  # a global a kernel reads must be constexpr
FAULTS = {1: "holds NaN or inf (block {row})"}


@triton.jit
def load_sum(x_ptr, e_ptr, start, lane, m, EC: tl.constexpr):
    """x (+ e with EC) at start + lane where m, 0 elsewhere: the values a
    sparsifying codec selects from (float addition commutes, so err + x and
    x + err are the same bits)."""
    w = tl.load(x_ptr + start + lane, mask=m, other=0.0)
    if EC:
        w = w + tl.load(e_ptr + start + lane, mask=m, other=0.0)
    return w


@triton.jit
def _sparq_select_kernel(g_ptr, e_ptr, tau, n, stage_idx, stage_val, counts, faults,
                   EC: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    # The block's start moves the pointers (64-bit, once); the lanes keep
    # 32-bit offsets from there (registers: more programs per SM).
    base = pid.to(tl.int64) * BLOCK
    lane = tl.arange(0, BLOCK)
    m = lane < n - base
    w = load_sum(g_ptr, e_ptr, base, lane, m, EC)
    keep = m & (tl.abs(w) >= tau)
    if EC:
        tl.store(e_ptr + base + lane, tl.where(keep, 0.0, w), mask=m)
    tl.store(faults + pid, tl.max(tl.where(m & ((w - w) != 0.0), NOT_FINITE, 0), axis=0).to(tl.int8))
    k = keep.to(tl.int32)
    slot = tl.cumsum(k, axis=0) - k
    tl.store(stage_idx + base + slot, lane + base.to(tl.int32), mask=keep)
    tl.store(stage_val + base + slot, w, mask=keep)
    tl.store(counts + pid, tl.sum(k, axis=0))


@triton.jit
def _sparq_gather_kernel(stage_idx, stage_val, counts, ends, out_idx, out_val, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    count = tl.load(counts + pid)
    start = tl.load(ends + pid) - count
    j = tl.arange(0, BLOCK)
    m = j < count
    base = pid.to(tl.int64) * BLOCK
    tl.store(out_idx + start + j, tl.load(stage_idx + base + j, mask=m), mask=m)
    tl.store(out_val + start + j, tl.load(stage_val + base + j, mask=m), mask=m)


def threshold_pack(x, tau, err=None, what="threshold pack: "):
    """The pairs (int32 indices, float32 values) of x (+ err) whose magnitude
    is >= tau, in index order, on x's device; with `err`, DCT-DP's fused step
    (err left holding what was not sent). NaN or inf in x (+ err) raises
    ValueError; `what` names the tensor (the bucket) in the message."""
    idx, val, count, faults = launch_threshold_pack(x, tau, err)
    raise_row_errors(faults, FAULTS, what)
    n = int(count)
    return idx[:n], val[:n]


@profiled("sparq.gpu.threshold_pack")
def launch_threshold_pack(x, tau, err=None):
    """threshold_pack's kernels alone: (index capacity, value capacity, the
    pair count as a 1-element device tensor, per-block fault codes)."""
    _check(x, "threshold pack: input")
    n = x.numel()
    if n >= 2**31:
        raise ValueError(f"threshold pack on the GPU: {n} values; at most 2^31 - 1")
    if err is not None:
        _check(err, "threshold pack: residual")
        if err.shape != x.shape or err.device != x.device:
            raise ValueError("threshold pack: the residual must have the input's shape and device")
    on_cuda = cuda.selected()  # sparq's CUDA kernels, 16 values a thread
    block = cuda.pack_block() if on_cuda else BLOCK
    blocks = max(1, triton.cdiv(n, block))
    dev = x.device
    stage_idx = torch.empty(blocks * block, dtype=torch.int32, device=dev)
    stage_val = torch.empty(blocks * block, dtype=torch.float32, device=dev)
    counts = torch.zeros(blocks, dtype=torch.int32, device=dev)
    faults = torch.zeros(blocks, dtype=torch.int8, device=dev)
    out_idx = torch.empty(n, dtype=torch.int32, device=dev)
    out_val = torch.empty(n, dtype=torch.float32, device=dev)
    if n and on_cuda:
        cuda.select_pairs(x, err, float(tau), stage_idx, stage_val, counts, faults)
    elif n:
        _sparq_select_kernel[(blocks,)](x, err if err is not None else x, float(tau), n, stage_idx, stage_val,
                                  counts, faults, EC=err is not None, BLOCK=block, num_warps=WARPS,
                                  enable_fp_fusion=False)
    ends = torch.cumsum(counts, 0, dtype=torch.int32)
    if n and on_cuda:
        cuda.move_pairs(stage_idx, stage_val, counts, ends, out_idx, out_val)
    elif n:
        _sparq_gather_kernel[(blocks,)](stage_idx, stage_val, counts, ends, out_idx, out_val, BLOCK=block, num_warps=WARPS)
    return out_idx, out_val, ends[-1:], faults


@profiled("sparq.gpu.sparsity_threshold")
def sparsity_threshold(x, eta):
    """DCT's threshold of x: element floor(n * eta) of |x| sorted ascending
    (+inf when that is n), as the CPU computes it (n * eta in double with a
    1e-9 slack before the floor). NaN raises ValueError.

    A radix select on the magnitudes' bit patterns, which order as the
    magnitudes do: a histogram of the top 11 bits finds the bin that holds
    the element, then the next 10 bits among that bin's values, then the
    last 10. One pass over all the values and two over a few of them, where
    torch.kthvalue sorts (480 ms for 64M values on an H200)."""
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"sparsity threshold: eta {eta} outside [0, 1]")
    n = x.numel()
    pos = min(int(n * eta + 1e-9), n)
    if pos >= n:
        return float("inf")
    bits = x.reshape(-1).abs().view(torch.int32)
    if bool((bits > 0x7F800000).any()):
        raise ValueError("sparsity threshold: the values hold NaN")
    found = 0
    for shift, width in ((20, 11), (10, 10), (0, 10)):
        digits = (bits >> shift) & ((1 << width) - 1)
        below = torch.cumsum(torch.bincount(digits, minlength=1 << width), 0)
        d = int(torch.searchsorted(below, pos, right=True))  # the first digit with more than pos below it
        pos -= int(below[d - 1]) if d else 0
        found |= d << shift
        if shift:
            bits = bits[digits == d]
    return float(torch.tensor(found, dtype=torch.int32).view(torch.float32))


def _check(t, what):
    if t.dtype != torch.float32 or not t.is_contiguous():
        raise ValueError(f"{what} must be a contiguous float32 tensor, not {t.dtype}")
