"""A sparse stream's values on the wire (compress/stream_codec.h), rounded,
encoded and decoded by torch's tensor kernels where they live, bit for bit
as the CPU's codec does:

    f32   4 bytes a value
    bf16  the upper half of the float after rounding half to even
    fp8   E4M3 codes with one power-of-two scale a message (header byte 3):
          the largest magnitude lands in (128, 256], code = e4m3(v / 2^e)
    fp4   E2M1 codes, a power-of-two scale per group of 32 values: each
          group its scale byte (int8 e), then two codes a byte, low nibble
          first; e the least with max |v| <= 6 * 2^e

Every scaling is by a power of two in float64, so it is exact and each
side rounds once, in the conversion to float32, as the CPU's does.
"""
import math

import torch

from .. import _sparq
from .profiling import profiled

CODES = {"f32": 0, "bf16": 1, "fp8": 2, "fp4": 3}
NAMES = {c: f for f, c in CODES.items()}
FP4_GROUP = 32
_FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # magnitudes by code & 7
_FP4_MID = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]  # ties go to the even code
_FLOAT_MAX = 3.4028234663852886e38


def values_bytes(n, fmt):
    """Bytes of n values on the wire."""
    if fmt == "fp4":
        return -(-n // FP4_GROUP) + -(-n // 2)
    return n * {"f32": 4, "bf16": 2, "fp8": 1}[fmt]


def _check_finite(v, fmt):
    """fp8 and fp4 scales come from the largest magnitude: a non-finite value
    is the CPU's InputError."""
    if not bool(torch.isfinite(v).all()):
        i = int((~torch.isfinite(v)).nonzero()[0])
        raise _sparq.InputError(f"{fmt} stream values: non-finite value {float(v[i])} at {i}")


@profiled("sparq.gpu.round_values")
def round_values(v, fmt):
    """v (float32) as a peer decodes it from one message of v."""
    return encode(v, fmt)[2]


def _message_scale(v):
    """fp8's message scale (header byte 3) of the values v, as the CPU's: the
    largest magnitude lands in (128, 256], a power of two on 256, so that
    rounding keeps the scale."""
    mx = float(v.abs().max())
    if mx == 0.0:
        return 0
    m, e = math.frexp(mx)  # exact: mx is a float
    return max(-128, min(127, e - (9 if m == 0.5 else 8)))


def encode(v, fmt):
    """(uint8 bytes of the values v on the wire, fp8's scale or 0, v as a
    peer decodes them: v itself for f32)."""
    v = v.contiguous().view(-1).to(torch.float32)
    if v.numel() == 0 or fmt == "f32":
        return v.view(torch.uint8) if v.numel() else torch.empty(0, dtype=torch.uint8, device=v.device), 0, v
    if fmt == "bf16":
        h = _float_to_bf16(v)
        return le_bytes(h, 2), 0, _bf16_to_float(h)
    _check_finite(v, fmt)
    if fmt == "fp4":
        data, rounded = _encode_fp4(v)
        return data, 0, rounded
    scale = _message_scale(v)
    q = _float_to_e4m3((v.double() * 2.0 ** -scale).float())
    rounded = _from_fp8(q, scale)
    if scale >= 120:  # only there can a code (448 at most) pass float's largest
        # The code below where rounding up went beyond float: the value is finite, so it is.
        q = torch.where(torch.isinf(rounded), q - 1, q)
        rounded = _from_fp8(q, scale)
    return q.to(torch.uint8), scale, rounded


def decode(raw, fmt, scale, n):
    """n float32 values from their bytes `raw` (values_bytes(n, fmt) of them)."""
    if n == 0:
        return torch.empty(0, dtype=torch.float32, device=raw.device)
    if fmt == "f32":
        return raw.clone().view(torch.float32) if raw.data_ptr() % 4 else raw.view(torch.float32)
    if fmt == "bf16":
        return _bf16_to_float(from_le(raw, 2))
    if fmt == "fp8":
        q = raw.to(torch.int64)
        if bool(((q & 0x7F) == 0x7F).any()):
            raise _sparq.WireError(f"sparse stream: fp8 code {int(q[(q & 0x7F) == 0x7F][0]):#x} (NaN), which no "
                                   "encoder writes")
        v = _from_fp8(q, scale)
        if scale >= 120 and bool(torch.isinf(v).any()):  # below, 448 * 2^scale is a float
            raise _sparq.WireError(f"sparse stream: fp8 code {int(q[torch.isinf(v)][0]):#x} at scale 2^{scale} is "
                                   "beyond float's range")
        return v
    return _decode_fp4(raw, n)


def le_bytes(x, width):
    """Each of x's (non-negative int64) numbers as `width` little-endian bytes."""
    shifts = torch.arange(0, 8 * width, 8, device=x.device)
    return ((x.view(-1, 1) >> shifts) & 0xFF).to(torch.uint8).view(-1)


def from_le(b, width):
    """The little-endian numbers (int64) of b's bytes, `width` bytes each."""
    shifts = torch.arange(0, 8 * width, 8, device=b.device)
    return (b.view(-1, width).to(torch.int64) << shifts).sum(1)


def _pow2(e):
    """2^e (float64) for int64 exponents in float64's normal range: built from its bits, so exact."""
    return ((e + 1023) << 52).view(torch.float64)


def _bits(v):
    return v.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _float_to_bf16(v):
    """bf16 bits (int64) of finite float32 values, half to even: the CPU's
    float_to_bf16 (a carry into the exponent is the next binade)."""
    x = _bits(v)
    return ((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF


def _bf16_to_float(h):
    return (h.to(torch.int64) << 16).to(torch.int32).view(torch.float32)


def _float_to_e4m3(y):
    """E4M3 codes (int64) of finite float32 values: the CPU's float_to_e4m3
    (saturating at 448, subnormals k * 2^-9, mantissa rounded half to even)."""
    x = _bits(y)
    sign, ax = (x >> 24) & 0x80, x & 0x7FFFFFFF
    k = torch.round(ax.to(torch.int32).view(torch.float32) * 512.0).to(torch.int64)  # exact, half to even
    r = ax - 0x3C000000
    normal = (r + 0x7FFFF + ((r >> 20) & 1)) >> 20
    return sign | torch.where(ax >= 0x43E00000, 0x7E, torch.where(ax < 0x3C800000, k, normal))


def _from_fp8(q, scale):
    """Values of E4M3 codes (int64) at the message scale 2^scale."""
    return (_e4m3_to_float(q).double() * 2.0 ** scale).float()


def _e4m3_to_float(q):
    """Values of E4M3 codes (int64) other than NaN's."""
    e, m = (q >> 3) & 0xF, q & 7
    normal = (((e + 120) << 23) | (m << 20)).to(torch.int32).view(torch.float32)
    v = torch.where(e == 0, m.to(torch.float32) * 2.0 ** -9, normal)
    return torch.where((q & 0x80) != 0, -v, v)


def _groups(v):
    """v (float64) as rows of FP4_GROUP, the last padded with zeros."""
    g = -(-v.numel() // FP4_GROUP)
    return torch.nn.functional.pad(v, (0, g * FP4_GROUP - v.numel())).view(g, FP4_GROUP)


def _fp4_scales(x):
    """Each group's e (int64): the least with max |x| <= 6 * 2^e, clamped to int8; 0 for all zeros."""
    mant, e = torch.frexp(x.abs().amax(1))  # max = mant * 2^e, mant in [0.5, 1)
    e = torch.where(mant <= 0.75, e - 3, e - 2).to(torch.int64)
    return torch.where(mant == 0, 0, e).clamp(-128, 127)


def _encode_fp4(v):
    """(v's groups on the wire, v as a peer decodes them)."""
    x = _groups(v.double())
    e = _fp4_scales(x)
    a = x.abs() * _pow2(-e).view(-1, 1)  # exact: a power of two
    code = torch.zeros_like(a, dtype=torch.int64)
    for i, mid in enumerate(_FP4_MID):
        code += (a > mid) | ((a == mid) & (i % 2 == 1))
    # Near float's largest (e up to 127) the next code down where a code's value is beyond float: rounding
    # went at most one code above a finite value, so one step down is within float.
    mags = torch.tensor(_FP4, dtype=torch.float64, device=v.device)
    scale = _pow2(e).view(-1, 1)
    code -= (mags[code] * scale > _FLOAT_MAX).to(torch.int64)
    negative = torch.signbit(x) & (code != 0)  # zero is always +0
    rounded = torch.where(negative, -mags[code], mags[code]) * scale
    code = code | torch.where(negative, 8, 0)
    packed = torch.cat([(e & 0xFF).view(-1, 1), code[:, 0::2] | (code[:, 1::2] << 4)], 1).to(torch.uint8)
    return packed.view(-1)[:values_bytes(v.numel(), "fp4")], rounded.view(-1)[:v.numel()].float()


def _decode_fp4(raw, n):
    g = -(-n // FP4_GROUP)
    full = torch.nn.functional.pad(raw, (0, g * (1 + FP4_GROUP // 2) - raw.numel())).view(g, -1).to(torch.int64)
    e = torch.where(full[:, 0] >= 128, full[:, 0] - 256, full[:, 0])
    code = torch.stack([full[:, 1:] & 15, full[:, 1:] >> 4], 2).view(g, FP4_GROUP).view(-1)[:n]
    e = e.repeat_interleave(FP4_GROUP)[:n]
    if bool((code == 8).any()):
        raise _sparq.WireError("sparse stream: fp4 code 8 (negative zero), which no encoder writes")
    mags = torch.tensor(_FP4, dtype=torch.float64, device=raw.device)[code & 7] * _pow2(e)
    if bool((mags > _FLOAT_MAX).any()):
        i = int((mags > _FLOAT_MAX).nonzero()[0])
        raise _sparq.WireError(f"sparse stream: fp4 code {int(code[i])} at scale 2^{int(e[i])} is beyond float's "
                               "range")
    return torch.where((code & 8) != 0, -mags, mags).float()
