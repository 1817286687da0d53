"""The quantized allreduce (q8/q4/q2, +ec, +ec-skip-first) with the codec
where the gradients live (sparq.gpu's kernels), for sparq.torch's hook:
hop for hop what the C++ ring does (or its recursive doubling within one
group), so the bucket's average and the residuals are bit for bit the
host codec's, and ranks of both kinds mix.

The ring over P ranks (quantized.h): the first hop sends the rank's own
chunk, encoded; each of the P - 1 steps adds the decoded partial sum that
arrived to the rank's values of that chunk, encodes the sum (error
compensated) and sends it on, until the last step leaves the rank with
its own chunk's encoding; the encodings then travel the ring unchanged
and every rank decodes them all. Here the encodes, decodes and sums run on
the device and only the encodings cross PCIe, one chunk a hop each way
(and the wire once back): about 2(P-1)/P + 1 times the q-bit bytes of the
bucket, where staging copies its fp32 values both ways. The messages are
the C++ ring's (_sparq.quantized_ring_hop, quantized_ring_allgather). On
the group route the same bytes stay on the device and travel through the
group (group_route: a hop as a send and a receive, the allgather padded
to the largest chunk, recursive doubling's rounds as alltoalls), so the
results are the host route's bit for bit.
"""
import torch

from . import _sparq
from .device_alltoall import raise_faults, to_device, to_host
from .device_sparse import DeviceState, ready_event, wait_ready
from .gpu import rowwise


GROUP = 8  # recursive doubling's group (QuantizedAllreduceOptions::group)


class DeviceQuantized(DeviceState):
    """A row-wise quantized allreduce on the device: the ring, or recursive
    doubling within one group (P <= 8). Its residuals are the host codec's:
    one a bucket, keyed by its name + "/ring" or "/recursive-doubling"."""

    @staticmethod
    def runs_on(p, codec, algo):
        return algo == "ring" or p <= GROUP

    def __init__(self, codec, algo, x, comm, route=None):
        super().__init__(x, comm, route)
        self.codec, self.algo = codec, algo
        c = _sparq.dp_codec(codec)
        self.bits, self.row_len = c["bits"], c["row_len"]
        self.scale = "f16" if c["f16_scale"] else "f32"
        self.ec, self.ec_first_hop = c["error_comp"], c["ec_first_hop"]

    def _rows(self, n):
        """n values as the codec's rows: (first, end, row length) of the
        full rows of row_len, then of one shorter row."""
        full = n // self.row_len * self.row_len
        return [(lo, hi, cols) for lo, hi, cols in ((0, full, self.row_len), (full, n, n - full)) if hi > lo]

    def _encode(self, v, err, what):
        """v's encoding, with err (its slice of the residual) compensated
        when given."""
        parts = []
        for lo, hi, cols in self._rows(v.numel()):
            data, faults = rowwise.launch_quantize(v[lo:hi], cols, self.bits, self.scale,
                                                   None if err is None else err[lo:hi])
            raise_faults(faults, rowwise.FAULTS, what + ": ")
            parts.append(data)
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _decode(self, data, n, what):
        parts, at = [], 0
        for lo, hi, cols in self._rows(n):
            size = (hi - lo) // cols * rowwise.row_bytes(cols, self.bits, self.scale)
            values, faults = rowwise.launch_dequantize(data[at:at + size], cols, self.bits, self.scale)
            raise_faults(faults, rowwise.FAULTS, what + ": from the wire, ", _sparq.WireError)
            parts.append(values)
            at += size
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def exchange(self, name, buf, pieces, step, what):
        """As DeviceSparse.exchange: a function that, on the hook's thread,
        runs the ring on buf's device, averages, and returns the bytes sent
        (the transport's or the route's counters); and the values kept (all
        of them)."""
        flat = buf.view(-1)
        ready = ready_event(flat)  # the hook's thread waits for backward's work on the bucket

        def finish(size):
            wait_ready(ready, flat)
            before = self._bytes_sent()
            if self.algo == "ring":
                self.ring(name, flat, what)
            else:
                self.recursive_doubling(name, flat, what)
            flat.mul_(float(torch.ones((), dtype=torch.float32) / size))  # the host's 1.0f / p
            return self._bytes_sent() - before

        return finish, flat.numel()

    def _bytes_sent(self):
        return self.route.bytes_sent if self.route else self.comm.counters()["bytes_sent"]

    def _landing(self, nbytes, like):
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=like.is_cuda)

    def _allgather(self, own, r, bb, like, what):
        """Every chunk's (or part's) encoding, [bytes bb[j], bb[j + 1]) of the
        wire from rank j, on like's device; `own` this rank's."""
        p = len(bb) - 1
        if self.route is None:
            wire = self._landing(bb[p], like)
            wire[bb[r]:bb[r + 1]] = to_host(own)[0]
            _sparq.quantized_ring_allgather(self.comm, self.codec, like.numel(), wire.numpy())
            got = to_device(wire, like.device)
            return [got[bb[j]:bb[j + 1]] for j in range(p)]
        most = max(bb[j + 1] - bb[j] for j in range(p))
        parts = self.route.allgather(own, most, what)
        for j, part in enumerate(parts):
            if part.numel() != bb[j + 1] - bb[j]:
                raise _sparq.WireError(f"{what}: rank {j} sent {part.numel()} bytes of its chunk's encoding, "
                                       f"not {bb[j + 1] - bb[j]}")
        return parts

    def ring(self, name, buf, what):
        """buf (the bucket, flat) <- the ring's sum over the ranks."""
        p, r, n = self._size_rank(buf)
        if p == 1 or n == 0:
            return
        layout = _sparq.quantized_ring_layout(self.codec, n, p)
        vb, bb = layout["values"], layout["bytes"]
        err = self.residual(name + "/ring", buf, what) if self.ec else None

        def chunk(t, j):
            return t[vb[j]:vb[j + 1]]

        def encode(j, ec=True):
            return self._encode(chunk(buf, j), chunk(err, j) if ec and err is not None else None, what)

        def hop(send, enc, recv):
            """chunk send's encoding to the right, chunk recv's from the left (on buf's device)."""
            if self.route is not None:
                return self.route.sendrecv(enc, (r + 1) % p, bb[recv + 1] - bb[recv], (r - 1) % p)
            land = self._landing(bb[recv + 1] - bb[recv], buf)
            _sparq.quantized_ring_hop(self.comm, self.codec, n, send, to_host(enc)[0].numpy(), recv, land.numpy())
            return to_device(land, buf.device)

        first = (r - 1) % p  # pattern::ring_rs_send_chunk(r, p, 0)
        land = hop(first, encode(first, self.ec_first_hop), (r - 2) % p)
        for s in range(p - 1):
            ch = (r - s - 2) % p  # pattern::ring_rs_recv_chunk(r, p, s)
            chunk(buf, ch).add_(self._decode(land, vb[ch + 1] - vb[ch], what))
            enc = encode(ch)
            if s + 2 < p:
                land = hop(ch, enc, (r - s - 3) % p)
        # The last step's chunk is this rank's.
        for j, got in enumerate(self._allgather(enc, r, bb, buf, what)):
            chunk(buf, j).copy_(self._decode(got, vb[j + 1] - vb[j], what))

    def _size_rank(self, buf):
        where = self.route or self.comm
        return where.size, where.rank, buf.numel()

    def recursive_doubling(self, name, buf, what):
        """buf <- the sum over the ranks by recursive doubling in one group
        (quantized.cc): rank j sums part j of everybody's values (an
        alltoall of encoded parts), encodes the sum once, and every rank
        decodes every part's encoding (an allgather)."""
        p, r, n = self._size_rank(buf)
        if p == 1 or n == 0:
            return
        err = self.residual(name + "/recursive-doubling", buf, what) if self.ec else None
        # One group's parts are the ring's chunks: Partition{n, P}, each encoded alone.
        layout = _sparq.quantized_ring_layout(self.codec, n, p)
        vb, bb = layout["values"], layout["bytes"]

        def part(t, j):
            return t[vb[j]:vb[j + 1]]

        def encode(v, j):
            return self._encode(v, None if err is None else part(err, j), what)

        got = self._round({(r + s) % p: encode(part(buf, (r + s) % p), (r + s) % p) for s in range(1, p)},
                          {(r - s) % p: bb[r + 1] - bb[r] for s in range(1, p)}, buf)
        acc = part(buf, r).clone()
        for q in range(p):
            if q != r:
                acc.add_(self._decode(got[q], acc.numel(), what))
        fin = encode(acc, r)
        got = self._round({j: fin for j in range(p) if j != r}, {j: bb[j + 1] - bb[j] for j in range(p) if j != r}, buf)
        got[r] = fin
        for j in range(p):
            part(buf, j).copy_(self._decode(got[j], vb[j + 1] - vb[j], what))

    def _round(self, sends, recvs, like):
        """One round of recursive doubling's messages: sends[j] (encoded, on
        like's device) to rank j, recvs[q] bytes from rank q; returns {q:
        its bytes on like's device}."""
        if self.route is not None:
            p = self.route.size
            out = self.route.alltoallv(torch.cat([sends[j] for j in range(p) if j in sends]),
                                       [sends[j].numel() if j in sends else 0 for j in range(p)],
                                       [recvs.get(q, 0) for q in range(p)])
            at = [0]
            for q in range(p):
                at.append(at[-1] + recvs.get(q, 0))
            return {q: out[at[q]:at[q + 1]] for q in recvs}
        got = {q: self._landing(nbytes, like) for q, nbytes in recvs.items()}
        _sparq.quantized_allreduce_round(self.comm, [(q, got[q].numpy()) for q in got],
                                         [(j, to_host(sends[j])[0].numpy()) for j in sends])
        return {q: to_device(got[q], like.device) for q in got}
