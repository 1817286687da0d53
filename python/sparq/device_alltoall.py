"""quantized_alltoall's blocks encoded and decoded where the rows live, by
sparq.gpu's kernels, so that only compressed bytes leave a GPU.

A block of rows for another rank is the CPU codec's block byte for byte
(rows of `dim` values, each with an fp16 scale and bias, q8/q4/q2 codes;
fp32 sends the floats), and the exchange sends quantized_alltoallv's
messages (_sparq.alltoallv_bytes), so GPU and CPU ranks of one job mix. A
rank's own rows never cross the wire and stay on the device, unencoded, as
quantized_alltoallv copies them.

The copies to and from pinned host memory run on a side stream: it waits
for the work queued so far on the current stream, and the current stream
waits for the copy back; the host waits only for the copy out (it must
send those bytes) and for the decoder's fault flags (what arrived must be
valid before it is used).
"""
import torch

from . import _sparq
from .gpu import rowwise
from .gpu.errors import NOT_FINITE, raise_row_errors

BITS = {"q8": 8, "q4": 4, "q2": 2}
_side_streams = {}


def alltoall_rows(x, send_rows, recv_rows, codec, comm, route=None):
    """Rows of x (2-D float32, contiguous): send_rows[j] to rank j, and the
    rows from every rank in rank order, recv_rows[i] from rank i, on x's
    device. The blocks travel on comm (the host route) or, where `route` (a
    GroupRoute) is given, as uint8 tensors through its group."""
    r, dim = (route or comm).rank, x.shape[1]
    what = f"sparq.torch.quantized_alltoall on rank {r}: "
    x = x.contiguous()
    row_bytes = 4 * dim if codec == "fp32" else rowwise.row_bytes(dim, BITS[codec], "f16")
    start = sum(send_rows[:r])
    own = x[start:start + send_rows[r]]
    # Every row is encoded on its own, so the whole tensor's encoding is the
    # blocks' encodings back to back (the own rows' go nowhere).
    if codec == "fp32":
        data, faults = x.view(-1).view(torch.uint8), None
    else:
        data, faults = rowwise.launch_quantize(x.view(-1), dim, BITS[codec], "f16")
    blocks = torch.cat([data[:start * row_bytes], data[(start + send_rows[r]) * row_bytes:]])
    send_bytes = [0 if j == r else n * row_bytes for j, n in enumerate(send_rows)]
    recv_bytes = [0 if i == r else n * row_bytes for i, n in enumerate(recv_rows)]
    if route is not None:
        if faults is not None:
            raise_faults(faults, rowwise.FAULTS, what)
        got = route.alltoallv(blocks, send_bytes, recv_bytes)
    else:
        send = to_host(blocks, faults)
        if faults is not None:
            raise_faults(send[1], rowwise.FAULTS, what)
        recv = torch.empty(sum(recv_bytes), dtype=torch.uint8, pin_memory=x.is_cuda)
        _sparq.alltoallv_bytes(comm, send[0].numpy(), send_bytes, recv.numpy(), recv_bytes)
        got = to_device(recv, x.device)
    if codec == "fp32":
        rows = got.view(torch.float32)
    else:
        rows, bad = rowwise.launch_dequantize(got, dim, BITS[codec], "f16")
        raise_faults(bad, rowwise.FAULTS, what + "from the wire, ", _sparq.WireError)
    before = sum(recv_rows[:r])
    rows = rows.view(-1, dim)
    return torch.cat([rows[:before], own, rows[before:]])


def raise_faults(faults, texts, what, error=_sparq.InputError):
    """sparq.gpu's fault flags as sparq's error: InputError for what this rank
    encodes (NonFiniteError for a NaN or inf, code 1 in every kernel's
    table), WireError for what it decodes from another."""
    try:
        raise_row_errors(faults, texts, what)
    except ValueError as e:
        code = int(faults.view(-1)[torch.nonzero(faults.view(-1))[0, 0]])
        if error is _sparq.InputError and code == NOT_FINITE:
            error = _sparq.NonFiniteError
        raise error(str(e)) from None


def _side_stream(device):
    if device not in _side_streams:
        _side_streams[device] = torch.cuda.Stream(device)
    return _side_streams[device]


def to_host(*tensors):
    """The tensors (None stays None) in pinned host memory, copied on the
    side stream once the current stream's work is done; returns when the
    copies have landed. CPU tensors (the kernels under Triton's interpreter)
    are returned as they are."""
    live = [t for t in tensors if t is not None]
    if not live or not live[0].is_cuda:
        return list(tensors)
    from .torch import host_copies
    host_copies["to_host"] += sum(t.nbytes for t in live)
    device = live[0].device
    side = _side_stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        out = [None if t is None else torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)
               for t in tensors]
        for t in live:
            t.record_stream(side)
    side.synchronize()
    return out


def to_device(host, device):
    """host's bytes on `device`, copied on the side stream; the current
    stream waits for them (the host does not)."""
    if device.type != "cuda":
        return host
    from .torch import host_copies
    host_copies["to_device"] += host.nbytes
    side = _side_stream(device)
    with torch.cuda.stream(side):
        dev = torch.empty(host.shape, dtype=host.dtype, device=device)
        dev.copy_(host, non_blocking=True)
    torch.cuda.current_stream(device).wait_stream(side)
    dev.record_stream(torch.cuda.current_stream(device))
    return dev
