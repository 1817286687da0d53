"""The group route: a device codec's compressed payloads travel as uint8
tensors on the gradients' device through a torch.distributed process group
(the job's NCCL group between GPUs, so they never touch the host; Gloo for
CPU tensors), where the host route copies them to pinned host memory and
sends them on sparq's transport (device_alltoall.to_host).

Only bytes already encoded travel here, and every receiver checks them
(sizes against what the codec can produce, then the decoders' checks)
before it uses them. bytes_sent counts the payload bytes of this rank's
messages as a direct exchange sends them (an allgather: the padded payload
to each of the P - 1 others); NCCL's own algorithms (rings, trees) may
move them in other steps.
"""
import torch
import torch.distributed as dist

from . import _sparq

# torch 2.14 renamed all_gather_into_tensor (which now warns at every call).
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class GroupRoute:
    """Byte movers over `group` (the default group if None). With `own`, over
    a group of its own with the same ranks and backend, made now (a
    collective call: every rank makes its route at the same point): a
    hook's collectives run on the hook's thread while the training loop's
    (an alltoall's) run on others, and one group's collectives must come in
    the same order on every rank."""

    def __init__(self, group=None, own=False):
        group = group if group is not None else dist.group.WORLD
        if own:
            group = dist.new_group(dist.get_process_group_ranks(group), backend=dist.get_backend(group))
        self.group = group
        self.size = dist.get_world_size(self.group)
        self.rank = dist.get_rank(self.group)
        self.bytes_sent = 0

    def _global(self, r):
        return dist.get_global_rank(self.group, r)

    def allgather(self, data, limit, what):
        """Every rank's `data` (uint8, at most `limit` bytes each), in rank
        order, on data's device: a round of sizes, then one allgather of
        payloads padded to the largest."""
        sizes = torch.empty(self.size, dtype=torch.int64, device=data.device)
        _all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64, device=data.device), group=self.group)
        sizes = sizes.tolist()
        for q, s in enumerate(sizes):
            if not 0 <= s <= limit:
                raise _sparq.WireError(f"{what}: rank {q} announces {s} bytes, where at most {limit} can come")
        slot = max(sizes)
        padded = torch.zeros(slot, dtype=torch.uint8, device=data.device)
        padded[:data.numel()] = data
        out = torch.empty(slot * self.size, dtype=torch.uint8, device=data.device)
        _all_gather(out, padded, group=self.group)
        self.bytes_sent += (self.size - 1) * slot
        return [out[q * slot:q * slot + s] for q, s in enumerate(sizes)]

    def sendrecv(self, send, dst, recv_bytes, src):
        """send to group rank dst while recv_bytes bytes come from src."""
        land = torch.empty(recv_bytes, dtype=torch.uint8, device=send.device)
        ops = [dist.P2POp(dist.isend, send.contiguous(), self._global(dst), self.group),
               dist.P2POp(dist.irecv, land, self._global(src), self.group)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        self.bytes_sent += send.numel()
        return land

    def alltoallv(self, send, send_bytes, recv_bytes):
        """send_bytes[j] bytes of `send` (in rank order) to rank j, recv_bytes[i]
        from rank i into the result, in rank order."""
        out = torch.empty(sum(recv_bytes), dtype=torch.uint8, device=send.device)
        dist.all_to_all_single(out, send.contiguous(), recv_bytes, send_bytes, group=self.group)
        self.bytes_sent += sum(send_bytes) - send_bytes[self.rank]
        return out
