"""The sparsifying codecs' selection where the gradients live (sparq.gpu's
kernels), for sparq.torch's hook: step for step what the CPU's codecs do, so
the bucket's pairs, the residuals and the thresholds are bit for bit the
host codecs'.

DCT-DP, per tensor of a bucket: W = grad + residual; at its first step and
every L steps after, tau = DCT's threshold of |W|; the pairs of W with
|W| >= tau are sent and the residual keeps the rest. TopK: W = residual +
grad, the k largest |W| of every run of b values sent, the residual keeps
the rest. Either way the device rounds the kept values to the codec's
format (+bf16, +fp8 with one scale for the bucket's message, +fp4 with
one a group of 32), feeds what rounding took back to the residuals, and
encodes the bucket's pairs (each tensor's shifted to its offset) as a
sparse stream in the CPU's wire format (gpu.stream). On the host route
the stream crosses to the host, the C++ exchange decodes it and sums it
over the ranks (GradExchange.exchange_stream: the same sparse allreduce
as the host codecs'), and the sum's stream comes back to be decoded and
averaged into the bucket on the device: at DCT-DP's 2 % about 5 bytes a
kept f32 value (a 1-byte varint index, mostly), 2 with fp8, where the
host codecs copy the whole bucket in fp32 both ways. On the group route
nothing crosses PCIe: the streams are allgathered through the group and
each rank decodes and sums them on its device.
"""
import torch

from . import _sparq
from .device_alltoall import raise_faults, to_device, to_host
from .gpu import stream
from .gpu import threshold as th
from .gpu import topk


class DeviceState:
    """A device codec's residuals (and DCT-DP's thresholds), keyed as the
    host codec keys them. `x` is the rank's GradExchange, which holds the
    state that a checkpoint saves (store()) or loaded (taken back at a
    key's first use here); `comm` the rank's Comm; `route` a GroupRoute
    where the payloads travel through a torch.distributed group, else None
    (the host route: pinned host memory and sparq's transport)."""

    @staticmethod
    def runs_on(p, *args):
        """Whether the codec of these arguments has device kernels for p ranks."""
        return True

    def __init__(self, x, comm, route=None):
        self.x, self.comm, self.route = x, comm, route
        self.residuals, self.taus = {}, {}

    def residual(self, key, like, what):
        """key's residual on like's device, shaped like `like`."""
        err = self.residuals.get(key)
        if err is None:
            saved, tau = self.x.tensor_state(key)
            err = torch.zeros_like(like) if saved is None else to_device(torch.from_numpy(saved), like.device)
            if tau is not None:
                self.taus[key] = tau
        if err.shape != like.shape:
            raise _sparq.InputError(f"{what}: {key} changed size from {err.numel()} to {like.numel()}")
        self.residuals[key] = err
        return err

    def store(self):
        """Hands every residual and threshold to the GradExchange, whose
        state() then saves them as the host codecs' state: a checkpoint
        resumes on either."""
        for key, err in self.residuals.items():
            self.x.set_tensor_state(key, err.cpu().numpy(), self.taus.get(key))


class DeviceSparse(DeviceState):
    """A sparsifying codec on the device: a residual per tensor, and
    launch() (the subclass's) queuing one tensor's selection. The device
    rounds the kept values and encodes the bucket's sparse stream; the
    GradExchange sums the streams on the host route, the device on the
    group route (group_route)."""

    def exchange(self, name, buf, pieces, step, what):
        """Selects buf's pairs on its device, rounds their values and encodes
        the bucket's sparse stream there, and hands back a function that, on
        the hook's thread, exchanges it, averages the sum into buf and
        returns the bytes this rank sent. Returns (that function, pairs
        kept)."""
        flat = buf.view(-1)
        kept_of = self._select(flat, pieces, step, what)
        data, dense = self._encode(flat, kept_of, what)
        host = to_host(data)[0] if self.route is None else None
        ready = ready_event(flat)

        def finish(size):
            wait_ready(ready, flat)
            if self.route is None:
                total, bytes_sent = self.x.exchange_stream(name, flat.numel(), host.numpy())
                streams = [to_device(torch.from_numpy(total), flat.device)]
            else:
                before = self.route.bytes_sent
                streams = self.route.allgather(data, dense, what)
                bytes_sent = self.route.bytes_sent - before
            try:
                stream.decode_sum(streams, flat)
            except _sparq.WireError as e:
                raise _sparq.WireError(f"{what}: {'from the group, ' if self.route else ''}{e}") from None
            flat.mul_(float(torch.ones((), dtype=torch.float32) / size))  # the host's 1.0f / p
            return bytes_sent

        return finish, sum(i.numel() for _, i, _, _ in kept_of)

    def _select(self, flat, pieces, step, what):
        """Every tensor's selection from the bucket `flat`: [(tensor, kept
        indices, their values, the tensor's offset)] in the bucket's order."""
        picks, off = [], 0
        for piece, n in pieces:
            picks.append((piece, off) + self.launch(piece, flat[off:off + n], step, what))
            off += n
        # One wait for every tensor's pair count and fault flag: a wait per
        # tensor would stall the hook's thread behind the backward pass still
        # queued on the stream, once for each.
        flags = torch.stack([faults.max() for *_, faults in picks]).to(torch.int32)
        on_device = [count.view(1) for *_, count, _ in picks if torch.is_tensor(count)]
        known = torch.cat([flags] + on_device).cpu().tolist()
        device_counts = iter(known[len(picks):])
        kept_of = []
        for (piece, off, i, v, count, faults), flag in zip(picks, known):
            if flag:
                raise_faults(faults, self.FAULTS, f"{what}: the gradient of '{piece}' ")
            count = next(device_counts) if torch.is_tensor(count) else count
            kept_of.append((piece, i[:count], v[:count], off))
        return kept_of

    def _feed_back(self, kept_of, taken):
        """What the value format took from each sent value (in the stream's
        order) goes back to its residual, where the selection left a zero."""
        for (piece, i, _, _), t in zip(kept_of, taken.split([i.numel() for _, i, _, _ in kept_of])):
            self.residuals[piece][i.long()] += t

    def _encode(self, flat, kept_of, what):
        """The bucket's sparse stream, its values rounded to the codec's
        format as a peer decodes them and what rounding took fed back to the
        residuals; and the size of its dense stream. On the group route a
        stream larger than dense goes dense (the host's densify_if_smaller:
        fp4's groups are then the dense vector's); on the host route the
        C++ allreduce picks its representations itself."""
        n = flat.numel()
        idx = torch.cat([i.long() + off for _, i, _, off in kept_of])
        val = torch.cat([v for _, _, v, _ in kept_of])
        dense = stream.HEADER + stream.vals.values_bytes(n, self.values)
        try:
            data, sent = stream.encode(idx, val, n, self.values)
            if self.route is not None and data.numel() > dense:
                data, whole = stream.encode_dense(torch.zeros_like(flat).index_put_((idx,), val), self.values)
                sent = whole[idx]
        except _sparq.InputError as e:
            raise _sparq.InputError(f"{what}: {e}") from None
        if self.values != "f32":
            self._feed_back(kept_of, val - sent)
        return data, dense


def ready_event(t):
    """An event after the work queued so far on t's stream (None on the CPU)."""
    if not t.is_cuda:
        return None
    ready = torch.cuda.Event()
    ready.record()
    return ready


def wait_ready(ready, t):
    """The hook's thread's stream waits for the bucket's work (ready_event)."""
    if ready is not None:
        torch.cuda.current_stream(t.device).wait_event(ready)


class DeviceDct(DeviceSparse):
    FAULTS = th.FAULTS

    def __init__(self, eta, life_span, values, x, comm, route=None):
        super().__init__(x, comm, route)
        self.eta, self.life_span, self.values = eta, life_span, values

    def launch(self, name, grad, step, what):
        """One tensor's kernels, nothing waited for: (index capacity, value
        capacity, the pair count on the device, fault flags); its residual
        updated. The threshold, every L steps, waits (a select over |W|)."""
        err = self.residual(name, grad, what)
        if name not in self.taus or step % self.life_span == 0:
            try:
                self.taus[name] = th.sparsity_threshold(grad + err, self.eta)
            except ValueError as e:  # its only complaint about values: NaN
                raise _sparq.NonFiniteError(f"{what}: the gradient of '{name}': {e}") from None
        try:
            return th.launch_threshold_pack(grad, self.taus[name], err)
        except ValueError as e:
            raise _sparq.InputError(f"{what}: tensor {name}: {e}") from None


class DeviceTopK(DeviceSparse):
    FAULTS = topk.FAULTS

    def __init__(self, k, bucket, values, x, comm, route=None):
        super().__init__(x, comm, route)
        self.k, self.bucket, self.values = k, bucket, values

    def launch(self, name, grad, step, what):
        """One tensor's kernel, nothing waited for: (indices, values, their
        count, fault flags); its residual updated."""
        try:
            idx, val, faults = topk.launch_bucket_topk(grad, self.bucket, self.k, self.residual(name, grad, what),
                                                       what=f"{what}: tensor {name} ")
        except ValueError as e:
            raise _sparq.InputError(str(e)) from None
        return idx, val, idx.numel(), faults
