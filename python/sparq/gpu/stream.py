"""Sparse streams where the pairs live: sparq/compress/stream_codec.h's wire
format encoded, decoded and summed by torch's tensor kernels (scans,
gathers, scatters) on the pairs' device, so that a GPU's messages are byte
for byte the CPU encoder's and a CPU rank's decode on a GPU.

    header (12 bytes): kind (1 sparse, 2 dense), index coding (c = 1, 2 or 4
    fixed-width bytes, 0x80 delta-varint, 0 dense), value format, scale
    byte (fp8's int8 exponent, else 0), dim (u32), n (u32); then the index
    run, then n values.

The encoder writes the shorter index run (fixed width on a tie), as the
CPU's does. Delta-varints are a scan each way: encoding places each
number's bytes at the running sum of the numbers' lengths; decoding marks
the bytes that end a number (high bit clear), numbers them by a running
count, and adds each byte's 7 bits to its number at 7 times its place in
it. The values are f32, bf16, fp8 or fp4 (gpu.values). The decoder checks
everything the CPU's decode_stream checks before any value is used, and
raises sparq's WireError with the same words.
"""
import torch

from .. import _sparq
from . import values as vals
from .profiling import profiled
from .values import round_values  # noqa: F401 - what a sender rounds its values with

HEADER = 12
SPARSE, DENSE, VARINT = 1, 2, 0x80


def index_bytes(dim):
    """c: the fewest of 1, 2 or 4 bytes that hold every index below dim."""
    return 1 if dim <= 1 << 8 else 2 if dim <= 1 << 16 else 4


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


@profiled("sparq.gpu.stream_encode")
def encode(idx, val, dim, fmt="f32"):
    """The sparse stream of the pairs (indices ascending below dim, float32
    values, which fmt rounds as round_values does) as uint8 on their
    device: the bytes the CPU's encode_stream writes for them (sparse; see
    encode_dense); and the values as a peer decodes them."""
    n = idx.numel()
    idx = idx.to(torch.int64)
    c = index_bytes(dim)
    u = _varint_numbers(idx)
    lengths = _varint_lengths(u)
    varint = int(lengths.sum()) if n else 0
    if varint < n * c:
        run, coding = _varint_run(u, lengths, varint), VARINT
    else:
        run, coding = vals.le_bytes(idx, c), c
    data, scale, sent = vals.encode(val, fmt)
    return torch.cat([_header(SPARSE, coding, fmt, scale, dim, n, idx.device), run, data]), sent


@profiled("sparq.gpu.stream_encode")
def encode_dense(values, fmt="f32"):
    """The dense stream of `values` (float32, rounded by fmt), and the values
    as a peer decodes them."""
    data, scale, sent = vals.encode(values, fmt)
    return torch.cat([_header(DENSE, 0, fmt, scale, values.numel(), values.numel(), values.device), data]), sent


def _header(kind, coding, fmt, scale, dim, n, device):
    h = bytes([kind, coding, vals.CODES[fmt], scale & 0xFF]) + int(dim).to_bytes(4, "little") + \
        int(n).to_bytes(4, "little")
    return torch.frombuffer(bytearray(h), dtype=torch.uint8).to(device)


def header(data):
    """A stream's header, checked against its size, as a dict (dense, coding,
    format, scale, dim, n, run: the index run's bytes), read on the host:
    the sizes and formats must be checked before the bytes are used."""
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
    if fmt == 2 and scale >= 128:
        scale -= 256  # int8
    elif fmt != 2 and scale != 0:
        raise wire(f"sparse stream: scale byte {scale} not zero")
    dense = kind == DENSE
    c = 0 if dense else index_bytes(dim)
    if not (coding == c or (not dense and coding == VARINT)):
        raise wire(f"sparse stream: index coding {coding} for a {'dense' if dense else 'sparse'} stream of "
                   f"dimension {dim} (expected {c}{'' if dense else ' or 128'})")
    if (n != dim) if dense else (n > dim):
        raise wire(f"sparse stream: {n} entries for dimension {dim}")
    vbytes = vals.values_bytes(n, vals.NAMES[fmt])
    run = n * c
    if coding == VARINT:
        if size < HEADER + vbytes + n:
            raise wire(f"sparse stream: {size} bytes, too short for {n} varint pairs")
        run = size - HEADER - vbytes
    if size != HEADER + run + vbytes:
        raise wire(f"sparse stream: {size} bytes, header says {HEADER + run + vbytes}")
    return {"dense": dense, "coding": coding, "format": vals.NAMES[fmt], "scale": scale, "dim": dim, "n": n,
            "run": run}


def decode(data, h=None):
    """(indices int64 or None if dense, float32 values) of the stream in
    `data` (uint8, on its device), checked as the CPU's decode_stream checks
    it; `h`: its header(), where read already."""
    h = h or header(data)
    n, run = h["n"], h["run"]
    body = data[HEADER:]
    values = vals.decode(body[run:], h["format"], h["scale"], n)
    if h["dense"]:
        return None, values
    if h["coding"] == VARINT:
        idx = _decode_varints(body[:run], n, h["dim"])
    else:
        idx = vals.from_le(body[:run], h["coding"])
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


@profiled("sparq.gpu.stream_decode_sum")
def decode_sum(streams, out):
    """out <- the sum of the streams (uint8 tensors on out's device, each of
    dimension out.numel()), added in the order given: the first written
    (zeros where a sparse one holds no pair; a -0.0 stays -0.0, as the
    CPU's to_dense writes it), each next one added, a dense stream whole, a
    sparse one into its indices. Every stream is checked before any is
    added, so a bad one leaves out as it was."""
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
    for k, (idx, values) in enumerate(parts):
        if idx is None:
            out.copy_(values) if k == 0 else out.add_(values)
        elif k == 0:
            out.zero_()[idx] = values
        else:
            out.index_add_(0, idx, values)
    if not parts:
        out.zero_()
    return out
