"""Sparse streams where the pairs live: sparq/compress/stream_codec.h's wire
format encoded, decoded and summed by torch's tensor kernels (scans,
gathers, scatters) on the pairs' device, so that a GPU's messages are byte
for byte the CPU encoder's and a CPU rank's decode on a GPU.

    header (12 bytes): kind (1 sparse, 2 dense), index coding (c = 1, 2 or 4
    fixed-width bytes, 0x80 delta-varint, 0 dense), value format, scale
    byte (0), dim (u32), n (u32); then the index run, then n values.

The encoder writes the shorter index run (fixed width on a tie), as the
CPU's does. Delta-varints are a scan each way: encoding places each
number's bytes at the running sum of the numbers' lengths; decoding marks
the bytes that end a number (high bit clear), numbers them by a running
count, and adds each byte's 7 bits to its number at 7 times its place in
it. The values are f32 or bf16 (round to nearest even); fp8 and fp4 are
not built here (their scales are a message's and a group's reductions).
The decoder checks everything the CPU's decode_stream checks before any
value is used, and raises sparq's WireError with the same words.
"""
import torch

from .. import _sparq

HEADER = 12
SPARSE, DENSE, VARINT = 1, 2, 0x80
FORMATS = {"f32": 0, "bf16": 1}  # value formats built here: their wire codes
VALUE_BYTES = {0: 4, 1: 2, 2: 1}


def index_bytes(dim):
    """c: the fewest of 1, 2 or 4 bytes that hold every index below dim."""
    return 1 if dim <= 1 << 8 else 2 if dim <= 1 << 16 else 4


def round_values(v, fmt):
    """v (float32) rounded to the value format as a peer decodes it."""
    if fmt == "f32":
        return v
    return _bf16_to_float(_float_to_bf16(v))


def _float_to_bf16(v):
    """bf16 bits (int64) of finite float32 values, half to even: the CPU's
    float_to_bf16 (a carry into the exponent is the next binade)."""
    x = v.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    return ((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF


def _bf16_to_float(h):
    return (h.to(torch.int64) << 16).to(torch.int32).view(torch.float32)


def _le_bytes(x, width):
    """Each of x's (non-negative int64) numbers as `width` little-endian bytes."""
    shifts = torch.arange(0, 8 * width, 8, device=x.device)
    return ((x.view(-1, 1) >> shifts) & 0xFF).to(torch.uint8).view(-1)


def _from_le(b, width):
    """The little-endian numbers (int64) of b's bytes, `width` bytes each."""
    shifts = torch.arange(0, 8 * width, 8, device=b.device)
    return (b.view(-1, width).to(torch.int64) << shifts).sum(1)


def _varint_numbers(idx):
    """The delta-varint run's numbers: the first index, then each gap minus one."""
    return torch.diff(idx, prepend=idx.new_full((1,), -1)) - 1


def _varint_lengths(u):
    return 1 + sum((u >= 1 << (7 * j)).to(torch.int64) for j in range(1, 5))


def _varint_run(u, lengths, total):
    """The run of the numbers u (each lengths[i] bytes) in `total` bytes."""
    run = torch.empty(total, dtype=torch.uint8, device=u.device)
    start = torch.cumsum(lengths, 0) - lengths
    for j in range(5):
        at = lengths > j
        more = (lengths > j + 1).to(torch.int64) << 7
        run[start[at] + j] = (((u[at] >> (7 * j)) & 0x7F) | more[at]).to(torch.uint8)
    return run


def encode(idx, val, dim, fmt="f32"):
    """The sparse stream of the pairs (indices ascending below dim, float32
    values already rounded to fmt) as uint8 on their device: the bytes the
    CPU's encode_stream writes for them (sparse; see encode_dense)."""
    n = idx.numel()
    idx = idx.to(torch.int64)
    c = index_bytes(dim)
    u = _varint_numbers(idx)
    lengths = _varint_lengths(u)
    varint = int(lengths.sum()) if n else 0
    if varint < n * c:
        run, coding = _varint_run(u, lengths, varint), VARINT
    else:
        run, coding = _le_bytes(idx, c), c
    return torch.cat([_header(SPARSE, coding, fmt, dim, n, idx.device), run, _values(val, fmt)])


def encode_dense(values, fmt="f32"):
    """The dense stream of `values` (float32, already rounded to fmt)."""
    return torch.cat([_header(DENSE, 0, fmt, values.numel(), values.numel(), values.device), _values(values, fmt)])


def _header(kind, coding, fmt, dim, n, device):
    h = bytes([kind, coding, FORMATS[fmt], 0]) + int(dim).to_bytes(4, "little") + int(n).to_bytes(4, "little")
    return torch.frombuffer(bytearray(h), dtype=torch.uint8).to(device)


def _values(v, fmt):
    v = v.contiguous().to(torch.float32)
    if v.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=v.device)
    if fmt == "f32":
        return v.view(torch.uint8)
    return _le_bytes(_float_to_bf16(v), 2)


def header(data):
    """A stream's header fields (kind, coding, format code, dim, n), read on
    the host: the sizes and formats must be checked before the bytes are."""
    h = bytes(data[:HEADER].cpu().numpy()) if data.numel() >= HEADER else b""
    return _check_header(h, data.numel())


def _check_header(h, size):
    wire = _sparq.WireError
    if size < HEADER:
        raise wire(f"sparse stream: {size} bytes, shorter than the header")
    kind, coding, fmt, scale = h[0], h[1], h[2], h[3]
    dim, n = int.from_bytes(h[4:8], "little"), int.from_bytes(h[8:12], "little")
    if kind not in (SPARSE, DENSE):
        raise wire(f"sparse stream: unknown kind {kind}")
    if fmt > 3:
        raise wire(f"sparse stream: unknown value format {fmt}")
    if fmt != 2 and scale != 0:
        raise wire(f"sparse stream: scale byte {scale} not zero")
    dense = kind == DENSE
    c = 0 if dense else index_bytes(dim)
    if not (coding == c or (not dense and coding == VARINT)):
        raise wire(f"sparse stream: index coding {coding} for a {'dense' if dense else 'sparse'} stream of "
                   f"dimension {dim} (expected {c}{'' if dense else ' or 128'})")
    if (n != dim) if dense else (n > dim):
        raise wire(f"sparse stream: {n} entries for dimension {dim}")
    if fmt not in VALUE_BYTES or fmt == 2:
        names = {v: k for k, v in FORMATS.items()} | {2: "fp8", 3: "fp4"}
        raise wire(f"sparse stream: {names[fmt]} values, which the device decoder does not read (f32 and bf16)")
    vbytes = n * VALUE_BYTES[fmt]
    run = n * c
    if coding == VARINT:
        if size < HEADER + vbytes + n:
            raise wire(f"sparse stream: {size} bytes, too short for {n} varint pairs")
        run = size - HEADER - vbytes
    if size != HEADER + run + vbytes:
        raise wire(f"sparse stream: {size} bytes, header says {HEADER + run + vbytes}")
    return {"dense": dense, "coding": coding, "format": fmt, "dim": dim, "n": n, "run": run}


def decode(data, h=None):
    """(indices int64 or None if dense, float32 values) of the stream in
    `data` (uint8, on its device), checked as the CPU's decode_stream checks
    it; `h`: its header(), where read already."""
    h = h or header(data)
    n, run = h["n"], h["run"]
    body = data[HEADER:]
    raw = body[run:]
    if h["format"] == 0:
        values = raw.clone().view(torch.float32) if raw.data_ptr() % 4 else raw.view(torch.float32)
    else:
        values = _bf16_to_float(_from_le(raw, 2))
    if h["dense"]:
        return None, values
    if h["coding"] == VARINT:
        idx = _decode_varints(body[:run], n, h["dim"])
    else:
        idx = _from_le(body[:run], h["coding"])
        _check_indices(idx, h["dim"])
    return idx, values


def _decode_varints(run, n, dim):
    b = run.to(torch.int64)
    ends = (b & 0x80) == 0
    pos = torch.arange(run.numel(), device=run.device)
    last = pos[ends]  # where each number ends
    number = torch.cumsum(ends, 0) - ends.to(torch.int64)  # each byte's number
    first = torch.cat([last.new_zeros(1), last + 1])  # where each number starts
    place = pos - first[number]
    if run.numel() and int(place.max()) >= 5:
        raise _sparq.WireError(f"sparse stream: varint {int(number[place >= 5][0])} longer than 5 bytes")
    if last.numel() < n:
        raise _sparq.WireError(f"sparse stream: index run ends inside varint {last.numel()} of {n}")
    used = int(last[n - 1]) + 1 if n else 0
    if used != run.numel():
        raise _sparq.WireError(f"sparse stream: {run.numel() - used} bytes left after the index run")
    u = torch.zeros(n, dtype=torch.int64, device=run.device).index_add_(0, number, (b & 0x7F) << (7 * place))
    idx = torch.cumsum(u + 1, 0) - 1
    _check_indices(idx, dim)
    return idx


def _check_indices(idx, dim):
    bad = (idx >= dim) | torch.cat([idx.new_zeros(1, dtype=torch.bool), idx[1:] <= idx[:-1]])
    if idx.numel() and bool(bad.any()):
        i = int(bad.nonzero()[0])
        if int(idx[i]) >= dim:
            raise _sparq.WireError(f"sparse stream: index {int(idx[i])} at {i} out of range [0, {dim})")
        raise _sparq.WireError(f"sparse stream: index {int(idx[i])} at {i} not above {int(idx[i - 1])}")


def decode_sum(streams, out):
    """out <- the sum of the streams (uint8 tensors on out's device, each of
    dimension out.numel()), added in the order given: a dense stream is
    added whole, a sparse one scattered into its indices. Every stream is
    checked before any is added, so a bad one leaves out as it was."""
    short = [k for k, s in enumerate(streams) if s.numel() < HEADER]
    if short:
        _check_header(b"", streams[short[0]].numel())
    heads = torch.stack([s[:HEADER] for s in streams]).cpu().numpy() if streams else []  # one copy, one wait
    parts = []
    for k, (data, h) in enumerate(zip(streams, heads)):
        h = _check_header(bytes(h), data.numel())
        if h["dim"] != out.numel():
            raise _sparq.WireError(f"sparse stream {k}: dimension {h['dim']}, expected {out.numel()}")
        parts.append(decode(data, h))
    out.zero_()
    for idx, values in parts:
        if idx is None:
            out.add_(values)
        else:
            out.index_add_(0, idx, values)
    return out
