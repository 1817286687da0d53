"""Row-wise q8/q4/q2 quantization on the GPU, byte for byte the CPU codec's
wire format (sparq/compress/rowwise_quant.h):

    one row:  [scale: f32 | f16][bias: f32 | f16][codes: ceil(cols*bits/8) bytes]

bias = min, scale = (max - min) / (2^bits - 1) (fp16: the bias rounded down
and the scale up to fp16 before the codes are made), code = round to nearest
even of clamp((x - bias) / scale, 0, 2^bits - 1) with a true division, codes
packed little-endian within a byte. The decoder computes bias + scale * code.

To match the CPU bit for bit the kernels must do its float operations one
by one: they are launched with enable_fp_fusion=False (no multiply-add
contraction) and divide with div_rn (IEEE division, not the approximate one).
Round-to-nearest-even is the CPU's own trick: adding 1.5 * 2^23 leaves the
rounded code in the low bits of the sum.
"""
import torch
import triton
import triton.language as tl

from . import cuda
from .errors import raise_row_errors
from .profiling import profiled

# Globals a kernel reads must be constexpr (Triton 3.6 refuses others).
ROUND_MAGIC = tl.constexpr(12582912.0)  # 1.5 * 2^23
MAGIC_BITS = tl.constexpr(0x4B400000)   # its bits: a sum's bits minus these are the code
MAX_COLS = 16384           # one row is one tile of a program's registers
# Values a program encodes or decodes, and its warps (scripts/gpu-bench.py
# --tune measures others).
TILE, WARPS = 4096, 8
WORD_ROWS = True

# Row faults the kernels flag (the CPU codec's InputError/WireError texts).
NOT_FINITE, RANGE_OVERFLOW, BEYOND_FP16, BAD_HEADER = (tl.constexpr(k) for k in (1, 2, 3, 4))
FAULTS = {
    1: "row-wise quantize: row {row} holds NaN or inf",
    2: "row-wise quantize: row {row}'s range overflows float",
    3: "row-wise quantize: row {row}'s range exceeds fp16 scales (use f32)",
    4: "row-wise dequantize: row {row} has a scale or bias that is not finite (or a negative scale)",
}


def header_bytes(scale):
    return 8 if scale == "f32" else 4


def row_bytes(cols, bits, scale):
    return header_bytes(scale) + (cols * bits + 7) // 8


def check_format(bits, scale, cols):
    if bits not in (2, 4, 8):
        raise ValueError(f"row-wise: {bits} bits; the codes are 8, 4 or 2 bits wide")
    if scale not in ("f16", "f32"):
        raise ValueError(f"row-wise: scale '{scale}'; it is f16 or f32")
    if not 0 < cols <= MAX_COLS:
        raise ValueError(f"row-wise on the GPU: rows of {cols} values; 1 to {MAX_COLS} are supported")


@triton.jit
def _half_step(h, down: tl.constexpr):
    """The fp16 next below (down) or above h, through the ordering of fp16
    bit patterns on the integers (both zeros at 0), as half.h does."""
    b = h.to(tl.uint16, bitcast=True).to(tl.int32)
    key = tl.where((b & 0x8000) != 0, -(b & 0x7FFF), b)
    key = key - 1 if down else key + 1
    b = tl.where(key >= 0, key, 0x8000 | -key)
    return b.to(tl.uint16).to(tl.float16, bitcast=True)


@triton.jit
def _grid(lo, hi, F16: tl.constexpr, LEVELS: tl.constexpr):
    """Per row (scale, bias) as floats, the bits the header carries, and
    the fault (0 when the row can be encoded)."""
    if F16:
        hb = lo.to(tl.float16)  # round to nearest even, then down where it went up
        hb = tl.where(hb.to(tl.float32) > lo, _half_step(hb, True), hb)
        bias = hb.to(tl.float32)
        s = tl.math.div_rn(hi - bias, LEVELS)
        hs = s.to(tl.float16)
        hs = tl.where(hs.to(tl.float32) < s, _half_step(hs, False), hs)
        scale = hs.to(tl.float32)
        fault = tl.where((tl.abs(bias) == float("inf")) | (tl.abs(scale) == float("inf")), BEYOND_FP16, 0)
        scale_bits = hs.to(tl.uint16, bitcast=True).to(tl.int32)
        bias_bits = hb.to(tl.uint16, bitcast=True).to(tl.int32)
    else:
        scale = tl.math.div_rn(hi - lo, LEVELS)
        # A subnormal range can underflow to 0; the smallest step covers it.
        scale = tl.where((scale == 0.0) & (hi > lo), 1.401298464324817e-45, scale)
        bias = lo
        fault = tl.where(tl.abs(scale) == float("inf"), RANGE_OVERFLOW, 0)
        scale_bits = scale.to(tl.int32, bitcast=True)
        bias_bits = bias.to(tl.int32, bitcast=True)
    return scale, bias, scale_bits, bias_bits, fault


@triton.jit
def _store_le(ptr, bits, NBYTES: tl.constexpr, mask):
    for k in tl.static_range(NBYTES):
        tl.store(ptr + k, ((bits >> (8 * k)) & 0xFF).to(tl.uint8), mask=mask)


@triton.jit
def _load_le(ptr, NBYTES: tl.constexpr, mask):
    bits = tl.load(ptr, mask=mask, other=0).to(tl.int32)
    for k in tl.static_range(1, NBYTES):
        bits |= tl.load(ptr + k, mask=mask, other=0).to(tl.int32) << (8 * k)
    return bits


@triton.jit
def _pack(codes, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, BITS: tl.constexpr):
    """[BLOCK_R, BLOCK_C] codes -> [BLOCK_R, BLOCK_C * BITS // 8] bytes, code
    i of a byte at bits [(i % per_byte) * BITS, ...)."""
    if BITS == 8:
        return codes.to(tl.uint8)
    elif BITS == 4:
        even, odd = tl.split(tl.reshape(codes, (BLOCK_R, BLOCK_C // 2, 2)))
        return (even | (odd << 4)).to(tl.uint8)
    else:
        # [s, t] = code 2s + t of each group of four.
        even, odd = tl.split(tl.reshape(codes, (BLOCK_R, BLOCK_C // 4, 2, 2)))
        p0, p1 = tl.split(even | (odd << 2))
        return (p0 | (p1 << 4)).to(tl.uint8)


@triton.jit
def _unpack(b, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, BITS: tl.constexpr):
    """The inverse of _pack: [BLOCK_R, BLOCK_C * BITS // 8] bytes (int32) -> codes."""
    if BITS == 8:
        return b
    elif BITS == 4:
        return tl.reshape(tl.join(b & 15, b >> 4), (BLOCK_R, BLOCK_C))
    else:
        s0 = tl.join(b & 3, (b >> 4) & 3)          # codes 0 and 2
        s1 = tl.join((b >> 2) & 3, (b >> 6) & 3)   # codes 1 and 3
        return tl.reshape(tl.join(s0, s1), (BLOCK_R, BLOCK_C))


@triton.jit
def _codes(z, scale, bias, LEVELS: tl.constexpr):
    """rne(clamp(fl((z - bias) / scale), 0, LEVELS)) as the float rne + magic.

    Divisions are slow, so first q = fl(d * fl(1 / scale)), as the CPU does:
    relative to the exact quotient it is off by less than
    tol = (LEVELS + 1) * 2^-21 (rowwise_kernels_body.h), so the rounded code
    is the division's unless clamp(q) lies within tol of a half-integer. A
    program whose tile has such a value (or a scale whose reciprocal
    overflows) divides the whole tile: rare for real data, common for small
    integers, where it costs speed, never bits."""
    safe = tl.where(scale == 0.0, 1.0, scale)
    inv = tl.math.div_rn(1.0, safe)
    d = z - bias[:, None]
    q = tl.minimum(tl.maximum(d * inv[:, None], 0.0), LEVELS)
    edge = 0.5 - (LEVELS + 1) * 4.76837158203125e-07  # 2^-21
    near = tl.abs(q - ((q + ROUND_MAGIC) - ROUND_MAGIC)) > edge
    if tl.max(tl.where(near, 1, 0)) + tl.max(tl.where(inv == float("inf"), 1, 0)) > 0:
        q = tl.minimum(tl.maximum(tl.math.div_rn(d, safe[:, None]), 0.0), LEVELS)
    q = tl.where(scale[:, None] == 0.0, 0.0, q)  # a constant row: every code 0
    return q + ROUND_MAGIC


@triton.jit
def _sparq_quantize_kernel(x_ptr, err_ptr, out_ptr, fault_ptr, rows, cols, row_bytes,
                     BITS: tl.constexpr, F16: tl.constexpr, EC: tl.constexpr, WORDS: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    LEVELS: tl.constexpr = (1 << BITS) - 1
    # The program's first row moves the pointers (64-bit, once); the lanes
    # keep 32-bit offsets from there (registers: more programs per SM).
    first = tl.program_id(0).to(tl.int64) * BLOCK_R
    x_ptr += first * cols
    err_ptr += first * cols
    fault_ptr += first
    out_ptr += first * (row_bytes // 4 if WORDS else row_bytes)
    r = tl.arange(0, BLOCK_R)
    c = tl.arange(0, BLOCK_C)
    rmask = r < rows - first
    m = rmask[:, None] & (c[None, :] < cols)
    offs = r[:, None] * cols + c[None, :]
    z = tl.load(x_ptr + offs, mask=m, other=0.0)
    if EC:
        z = z + tl.load(err_ptr + offs, mask=m, other=0.0)
    # v - v is 0 for finite v and NaN for NaN and +-inf.
    not_finite = tl.max(tl.where(m & ((z - z) != 0.0), 1, 0), axis=1)
    # + 0: a zero extreme is +0 whichever zero the row holds.
    lo = tl.min(tl.where(m, z, float("inf")), axis=1) + 0.0
    hi = tl.max(tl.where(m, z, -float("inf")), axis=1) + 0.0
    lo = tl.where(not_finite != 0, 0.0, lo)
    hi = tl.where(not_finite != 0, 0.0, hi)
    scale, bias, scale_bits, bias_bits, fault = _grid(lo, hi, F16, LEVELS)
    fault = tl.where(not_finite != 0, NOT_FINITE, fault)
    tl.store(fault_ptr + r, fault.to(tl.int8), mask=rmask)
    rounded = _codes(z, scale, bias, LEVELS)  # garbage on faulty rows, which raise
    codes = tl.where(m, rounded.to(tl.int32, bitcast=True) - MAGIC_BITS, 0)
    if EC:
        left = z - (bias[:, None] + scale[:, None] * (rounded - ROUND_MAGIC))
        tl.store(err_ptr + offs, tl.where(fault[:, None] != 0, z, left), mask=m)
    if WORDS:
        _store_words(out_ptr, r, rmask, codes, scale_bits, bias_bits, row_bytes // 4, BITS, F16, BLOCK_R, BLOCK_C)
    else:
        _store_bytes(out_ptr, r, rmask, codes, scale_bits, bias_bits, row_bytes, cols, BITS, F16, BLOCK_R, BLOCK_C)


@triton.jit
def _store_bytes(out_ptr, r, rmask, codes, scale_bits, bias_bits, row_bytes, cols,
                 BITS: tl.constexpr, F16: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    HEADER: tl.constexpr = 4 if F16 else 8
    CODE_BLOCK: tl.constexpr = BLOCK_C * BITS // 8
    base = out_ptr + r * row_bytes
    if F16:
        _store_le(base, scale_bits, 2, rmask)
        _store_le(base + 2, bias_bits, 2, rmask)
    else:
        _store_le(base, scale_bits, 4, rmask)
        _store_le(base + 4, bias_bits, 4, rmask)
    j = tl.arange(0, CODE_BLOCK)
    code_bytes = (cols * BITS + 7) // 8
    tl.store(base[:, None] + HEADER + j[None, :], _pack(codes, BLOCK_R, BLOCK_C, BITS),
             mask=rmask[:, None] & (j[None, :] < code_bytes))


@triton.jit
def _store_words(out_ptr, r, rmask, codes, scale_bits, bias_bits, row_words,
                 BITS: tl.constexpr, F16: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """A row of whole 32-bit words (cols * BITS a multiple of 32): the
    header and 32 // BITS codes a word, stored as int32 (out_ptr is)."""
    PER_WORD: tl.constexpr = 32 // BITS
    HEADER_WORDS: tl.constexpr = 1 if F16 else 2
    base = out_ptr + r * row_words
    if F16:
        tl.store(base, scale_bits | (bias_bits << 16), mask=rmask)
    else:
        tl.store(base, scale_bits, mask=rmask)
        tl.store(base + 1, bias_bits, mask=rmask)
    shifts = tl.arange(0, PER_WORD) * BITS
    # Disjoint bits: their sum is their OR (a carry-free int32 add).
    words = tl.sum(tl.reshape(codes, (BLOCK_R, BLOCK_C // PER_WORD, PER_WORD)) << shifts[None, None, :], axis=2)
    w = tl.arange(0, BLOCK_C // PER_WORD)
    tl.store(base[:, None] + HEADER_WORDS + w[None, :], words,
             mask=rmask[:, None] & (w[None, :] < row_words - HEADER_WORDS))


@triton.jit
def _sparq_dequantize_kernel(in_ptr, out_ptr, fault_ptr, rows, cols, row_bytes,
                       BITS: tl.constexpr, F16: tl.constexpr, WORDS: tl.constexpr,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    HEADER: tl.constexpr = 4 if F16 else 8
    CODE_BLOCK: tl.constexpr = BLOCK_C * BITS // 8
    first = tl.program_id(0).to(tl.int64) * BLOCK_R  # as in _sparq_quantize_kernel
    in_ptr += first * (row_bytes // 4 if WORDS else row_bytes)
    out_ptr += first * cols
    fault_ptr += first
    r = tl.arange(0, BLOCK_R)
    rmask = r < rows - first
    if WORDS:  # in_ptr is int32: the header and 32 // BITS codes a word
        PER_WORD: tl.constexpr = 32 // BITS
        row_words = row_bytes // 4
        base = in_ptr + r * row_words
        if F16:
            h = tl.load(base, mask=rmask, other=0)
            scale_bits, bias_bits = h & 0xFFFF, (h >> 16) & 0xFFFF
        else:
            scale_bits, bias_bits = tl.load(base, mask=rmask, other=0), tl.load(base + 1, mask=rmask, other=0)
        w = tl.arange(0, BLOCK_C // PER_WORD)
        words = tl.load(base[:, None] + HEADER // 4 + w[None, :],
                        mask=rmask[:, None] & (w[None, :] < row_words - HEADER // 4), other=0)
        shifts = tl.arange(0, PER_WORD) * BITS
        codes = tl.reshape((words[:, :, None] >> shifts[None, None, :]) & ((1 << BITS) - 1), (BLOCK_R, BLOCK_C))
    else:
        base = in_ptr + r * row_bytes
        if F16:
            scale_bits, bias_bits = _load_le(base, 2, rmask), _load_le(base + 2, 2, rmask)
        else:
            scale_bits, bias_bits = _load_le(base, 4, rmask), _load_le(base + 4, 4, rmask)
        j = tl.arange(0, CODE_BLOCK)
        code_bytes = (cols * BITS + 7) // 8
        b = tl.load(base[:, None] + HEADER + j[None, :], mask=rmask[:, None] & (j[None, :] < code_bytes), other=0)
        codes = _unpack(b.to(tl.int32), BLOCK_R, BLOCK_C, BITS)
    if F16:
        scale = scale_bits.to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
        bias = bias_bits.to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
    else:
        scale, bias = scale_bits.to(tl.float32, bitcast=True), bias_bits.to(tl.float32, bitcast=True)
    ok = (scale >= 0.0) & (scale != float("inf")) & ((bias - bias) == 0.0)
    tl.store(fault_ptr + r, tl.where(ok, 0, BAD_HEADER).to(tl.int8), mask=rmask)
    c = tl.arange(0, BLOCK_C)
    m = rmask[:, None] & (c[None, :] < cols)
    tl.store(out_ptr + r[:, None] * cols + c[None, :],
             bias[:, None] + scale[:, None] * codes.to(tl.float32), mask=m)


def _word_rows(rb):
    """Whether rows are whole 32-bit words (then the kernels move words, not
    bytes). WORD_ROWS = False forces the byte path (the tests run both)."""
    return WORD_ROWS and rb % 4 == 0


def _blocks(cols, bits):
    # At least one whole byte of codes per row; about TILE values a program.
    block_c = max(triton.next_power_of_2(cols), 8 // bits)
    return max(1, TILE // block_c), block_c


def quantize(x, cols, bits, scale="f16", err=None):
    """The rows of float32 `x` (rows of `cols` values, contiguous, on one
    device) encoded as the CPU codec encodes them: a uint8 tensor of
    rows * row_bytes(cols, bits, scale) bytes on x's device. With `err`
    (error compensation, as rowwise_quantize_ec): the rows of x + err are
    encoded and err is left holding what the decoder will miss. NaN or inf
    in a row, or a range too wide for the scale, raises ValueError naming
    the first such row (`err` then holds x + err on that row)."""
    out, faults = launch_quantize(x, cols, bits, scale, err)
    raise_row_errors(faults, FAULTS)
    return out


@profiled("sparq.gpu.quantize")
def launch_quantize(x, cols, bits, scale, err=None):
    """quantize's kernel alone: (bytes, per-row fault codes), nothing waited for."""
    check_format(bits, scale, cols)
    _check_values(x, "row-wise quantize: input")
    if x.numel() % cols:
        raise ValueError(f"row-wise quantize: {x.numel()} values are not rows of {cols}")
    rows = x.numel() // cols
    if err is not None:
        _check_values(err, "row-wise quantize: residual")
        if err.shape != x.shape or err.device != x.device:
            raise ValueError("row-wise quantize: the residual must have the input's shape and device")
    rb = row_bytes(cols, bits, scale)
    out = torch.empty(rows * rb, dtype=torch.uint8, device=x.device)
    faults = torch.zeros(rows, dtype=torch.int8, device=x.device)
    if rows and cuda.selected():  # sparq's CUDA kernels, a thread to a row
        cuda.quantize_into(x, err, out, faults, rows, cols, bits, scale == "f16")
    elif rows:
        block_r, block_c = _blocks(cols, bits)
        words = _word_rows(rb)
        _sparq_quantize_kernel[(triton.cdiv(rows, block_r),)](
            x, err if err is not None else x, out.view(torch.int32) if words else out, faults, rows, cols, rb,
            BITS=bits, F16=scale == "f16", EC=err is not None, WORDS=words, BLOCK_R=block_r, BLOCK_C=block_c,
            num_warps=WARPS, enable_fp_fusion=False)
    return out, faults


def dequantize(data, cols, bits, scale="f16"):
    """The float32 values (a flat tensor) that quantize's bytes `data` decode
    to. A size that is not whole rows, or a row whose scale or bias is not a
    finite number (or whose scale is negative), raises ValueError."""
    out, faults = launch_dequantize(data, cols, bits, scale)
    raise_row_errors(faults, FAULTS)
    return out


@profiled("sparq.gpu.dequantize")
def launch_dequantize(data, cols, bits, scale):
    """dequantize's kernel alone: (values, per-row fault codes), nothing waited for."""
    check_format(bits, scale, cols)
    if data.dtype != torch.uint8 or not data.is_contiguous():
        raise ValueError("row-wise dequantize: the input must be a contiguous uint8 tensor")
    rb = row_bytes(cols, bits, scale)
    if data.numel() % rb:
        raise ValueError(f"row-wise dequantize: {data.numel()} bytes are not rows of {rb}")
    rows = data.numel() // rb
    out = torch.empty(rows * cols, dtype=torch.float32, device=data.device)
    faults = torch.zeros(rows, dtype=torch.int8, device=data.device)
    if rows and cuda.selected():
        cuda.dequantize_into(data, out, faults, rows, cols, bits, scale == "f16")
    elif rows:
        block_r, block_c = _blocks(cols, bits)
        words = _word_rows(rb) and data.data_ptr() % 4 == 0
        _sparq_dequantize_kernel[(triton.cdiv(rows, block_r),)](
            data.view(torch.int32) if words else data, out, faults, rows, cols, rb, BITS=bits, F16=scale == "f16",
            WORDS=words,
            BLOCK_R=block_r, BLOCK_C=block_c, num_warps=WARPS, enable_fp_fusion=False)
    return out, faults


def _check_values(t, what):
    if t.dtype != torch.float32 or not t.is_contiguous():
        raise ValueError(f"{what} must be a contiguous float32 tensor, not {t.dtype}")
