"""sparq's codecs for PyTorch models.

Data parallelism, one call away::

    ddp = DistributedDataParallel(model)
    hook = sparq.torch.dct_hook(0.98, 1000, model=ddp)
    ddp.register_comm_hook(state=None, hook=hook)

and table-wise embeddings with a compressed alltoall::

    rows = sparq.torch.quantized_alltoall(lookups, splits, fwd_bits=4, bwd_bits=2)

and DCT-MP at a model-parallel cut of any model (sparq.torch.DctMp in one
process, sparq.torch.PipelineStage between processes).

The collectives run on a sparq Comm. Under mpiexec it is an MPI
communicator (Open MPI moves the messages in the waiting caller's thread);
otherwise Gloo TCP connections of sparq's own, set up through the
job's torch.distributed store (the launcher's rendezvous), so anything
torch.distributed can start (torchrun, mpiexec with env://) works.
GLOO_SOCKET_IFNAME picks Gloo's interface, as for torch's gloo backend;
SPARQ_TRANSPORT=gloo|mpi, or connect(transport=...), overrides the choice.
"""
import atexit
import datetime
import functools
import importlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from . import _sparq
from .before_exchange import adam_before_exchange, momentum_before_exchange  # noqa: F401 - around a hook
from .dct_mp import CutStats, DctMp, dct_mp  # noqa: F401 - DCT-MP at a cut of any model
from .group_route import GroupRoute
from . import non_finite as _non_finite
from .pipeline import PipelineError, PipelineStage  # noqa: F401

# The hooks use DDP's comm-hook and future APIs as of torch 2.0.
if int(torch.__version__.split(".")[0]) < 2:
    raise ImportError(f"sparq.torch needs torch 2.0 or later; this environment has torch {torch.__version__}")

atexit.register(_sparq.mpi_finalize)  # after every rank's last MPI call: Open MPI wants it before exit
_comm_lock = threading.Lock()
_comm_counts = {}


def connect(group=None, *, transport=None, iface=None, hostname=None, timeout=datetime.timedelta(minutes=5)):
    """A sparq Comm over the ranks of `group` (the default group if None).

    transport: "mpi" (the whole job, started by mpiexec), "gloo", or "auto"
    (MPI for the whole job under mpiexec, Gloo otherwise); None takes
    SPARQ_TRANSPORT from the environment, else "auto". Collective: every
    rank of the group calls it, and calls it as many times as the others
    (the n-th Comm of a group meets the n-th of the others).
    """
    if not dist.is_initialized():
        raise _sparq.InputError("sparq.torch.connect: torch.distributed is not initialized "
                                "(call torch.distributed.init_process_group first)")
    group = group if group is not None else dist.group.WORLD
    if dist.get_world_size(group) < 2:
        raise _sparq.InputError(f"sparq.torch.connect: rank {dist.get_rank()} is in a group of "
                                f"{dist.get_world_size(group)} rank: sparq's collectives need at least 2 "
                                "(with one rank there is nothing to exchange; leave the hook out)")
    ranks = tuple(dist.get_process_group_ranks(group))
    transport = transport or os.environ.get("SPARQ_TRANSPORT", "auto")
    whole_job = ranks == tuple(range(dist.get_world_size()))
    if transport == "auto":
        transport = "mpi" if _sparq.launched_by_mpiexec() and whole_job else "gloo"
    if transport == "mpi":
        if not whole_job:
            raise _sparq.InputError(f"sparq.torch.connect: rank {dist.get_rank()}: the MPI transport takes the "
                                    f"whole job, not the group of ranks {list(ranks)} (use transport='gloo')")
        comm = _sparq.Comm.mpi(dist.get_rank(), dist.get_world_size(), timeout)
        _abort_on_uncaught_exceptions()
        return comm
    if transport != "gloo":
        raise _sparq.InputError(f"sparq.torch.connect: transport '{transport}'; it is mpi, gloo or auto")
    with _comm_lock:
        n = _comm_counts.get(ranks, 0)
        _comm_counts[ranks] = n + 1
    key = "sparq/" + "-".join(map(str, ranks)) + f"/{n}"
    store = dist.PrefixStore(key, dist.distributed_c10d._get_default_store())
    if iface is None:
        iface = os.environ.get("GLOO_SOCKET_IFNAME", "")
    return _sparq.Comm.gloo(store, dist.get_rank(group), dist.get_world_size(group), iface,
                            hostname or "", timeout)


def abort(code=1):
    """Ends this rank at once, and with it the job: MPI_Abort where sparq runs
    on MPI (mpiexec then ends every rank), else an exit without clean-up (the
    other ranks' receives from this one then fail at once). For a rank that
    cannot go on while the others would wait for it."""
    sys.stdout.flush()
    sys.stderr.flush()
    _sparq.mpi_abort(code)
    os._exit(code)


_aborts_installed = False


def _abort_on_uncaught_exceptions():
    """Under MPI a rank that ends normally waits in MPI_Finalize for the others,
    and they for it until their timeout: an exception no one catches (after
    its traceback) aborts the job instead, as sparq train does."""
    global _aborts_installed
    if _aborts_installed:
        return
    _aborts_installed = True
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        abort(1)

    sys.excepthook = hook


class Hook:
    """A DDP communication hook running a sparq gradient codec.

    Register it with ``ddp.register_comm_hook(state=None, hook=hook)``. Each
    bucket is exchanged on one background thread, in bucket order, while
    backward goes on; the future DDP waits for holds the average over ranks.
    State (residuals, thresholds, step) saves with state_dict().

    A NaN or inf in a bucket stops it before any state changes: with
    non_finite="fail" (the default) the error names the rank, the step, the
    tensor and the bucket, and backward raises it. With "skip" (the host
    codecs) a step whose gradients, or what a skipping quantized_alltoall or
    DCT-MP cut sent, hold one on any rank is skipped on every rank: after
    backward every rank asks step_skipped(), and steps its optimizers only
    where it says no; the codec's state is then as before the step and
    `skipped_steps` counts the steps skipped (non_finite.py).
    """

    def __init__(self, codec, *, allreduce="auto", comm=None, model=None, codecs="auto", route="host", group=None,
                 non_finite="fail"):
        _check_codecs(codecs, "sparq hook")
        self._skip = _non_finite.check_mode(non_finite, "sparq hook")
        if self._skip and (codecs == "device" or route == "group"):
            raise _sparq.InputError("sparq hook: non_finite='skip' runs with the host codecs (codecs='host' or "
                                    "'auto' on CPU buckets, route='host')")
        # A factory, called at the first bucket on the device.
        self._device_codec = _device_codec_of(codec, allreduce)
        if codecs == "device" and self._device_codec is None:
            raise _sparq.InputError(f"sparq hook: codec {codec} with allreduce {allreduce} has no device kernels yet "
                                    "(dct, topk and the row-wise codecs on the ring or recursive doubling have); use "
                                    "codecs='host'")
        self._on_group = _check_route(route, group, comm, "sparq hook")
        if self._on_group and (codecs == "host" or self._device_codec is None):
            raise _sparq.InputError(f"sparq hook: route='group' carries the device codecs' payloads; codec {codec} "
                                    f"with codecs='{codecs}' runs on the host (route='host')")
        self._group = group
        self._route = None  # the GroupRoute, made at the first bucket
        self.codec = codec
        self._codecs = codecs  # where the codec runs (_on_device)
        self._device = None
        self.__name__ = self.__qualname__ = f"sparq_hook({codec})"  # DDP logs the hook by name
        self._allreduce = allreduce
        self._comm = comm
        self._x = None
        self._blob = None  # a loaded state, until the exchange exists
        self._names = {}
        if model is not None:
            for name, p in model.named_parameters():
                self._names[p] = name[len("module."):] if name.startswith("module.") else name
        self._named_by_model = model is not None
        self.step = 0
        self.bytes_sent = 0
        self.dense_bytes = 0
        self.exchange_seconds = 0.0  # selection + collective, on the hook's thread
        self._guard = None  # non_finite="skip": the StepGuard, made when first needed
        self._open = False  # a step's first bucket came, its last not yet
        self._failed = None  # the error of a bucket of this step (host codecs)
        self.skipped_steps = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparq-hook")
        self._last = None

    @property
    def comm(self):
        if self._comm is None:
            self._comm = connect()
        return self._comm

    def _size(self):
        """The ranks the payloads go to: the group's on the group route, else the Comm's."""
        return self._route.size if self._route is not None else self.comm.size

    def _exchange(self):
        if self._x is None:
            # On the group route the exchange keeps the codec's state only: no Comm.
            self._x = _sparq.GradExchange(None if self._on_group else self.comm, self.codec, self._allreduce)
            if self._blob is not None:
                self._x.load_state(self._blob)
                self._blob = None
        return self._x

    def _name(self, p):
        name = self._names.get(p)
        if name is None:
            if self._named_by_model:
                raise _sparq.InputError("sparq hook: a parameter that is not in the model given to the hook")
            # Named in the order DDP first hands them over: the same on every
            # rank and in every run of the same model.
            name = f"param{len(self._names)}"
            self._names[p] = name
        return name

    def __call__(self, state, bucket):
        buf = bucket.buffer()
        rank = dist.get_rank()
        if buf.dtype != torch.float32:
            raise _sparq.InputError(f"sparq hook: bucket {bucket.index()} on rank {rank} holds {buf.dtype}; "
                                    "sparq's codecs take float32 gradients")
        x = self._exchange()
        params = bucket.parameters()
        pieces = [(self._name(p), p.numel()) for p in params]
        # The bucket's name is its tensors' (stable when DDP re-buckets,
        # unlike its index): auto's plans and q*+ec residuals are kept by it.
        name = f"{pieces[0][0]}..{pieces[-1][0]}#{len(pieces)}"
        step = self.step
        first, last = not self._open, bucket.is_last()
        self._open = not last
        if last:
            self.step += 1
        if self._on_group and not _on_device(self._codecs, buf):
            raise _sparq.InputError(f"sparq hook: bucket {bucket.index()} on rank {rank} is on {buf.device}, where "
                                    f"codecs='{self._codecs}' runs the host's codec; route='group' carries the "
                                    "device codecs' payloads (codecs='device', or CUDA buckets)")
        if self._device_codec is not None and _on_device(self._codecs, buf) and self._device is None:
            if self._on_group and self._route is None:
                self._route = GroupRoute(self._group, own=True)
            self._device = self._device_codec(x, None if self._route else self.comm, self._route)
            if self._device is None:  # not at this rank count
                if self._codecs == "device" or self._on_group:
                    raise _sparq.InputError(f"sparq hook: {self.codec} with allreduce {self._allreduce} has no "
                                            f"device kernels for {self._size()} ranks (up to 8 have); use "
                                            "codecs='host'")
                self._device_codec = None
        if self._device is not None and _on_device(self._codecs, buf):
            if self._skip:
                raise _sparq.InputError(f"sparq hook: bucket {bucket.index()} on rank {rank} is on {buf.device}, "
                                        "where the device's codec runs; non_finite='skip' runs with the host "
                                        "codecs (codecs='host')")
            return self._exchange_on_device(x, name, buf, pieces, step, f"sparq hook: bucket {bucket.index()} on "
                                            f"rank {rank}, step {step}")
        host = _to_host(buf, f"sparq hook: bucket {bucket.index()} on rank {rank}")
        # A future that will hold a CUDA tensor must name its device.
        fut = torch.futures.Future(devices=[buf.device]) if host is not buf else torch.futures.Future()

        def work():
            try:
                # A bucket that failed fails the rest of its step unexchanged:
                # DDP raises the first error only after its backward pass.
                self._failed = None if first else self._failed
                if self._failed is not None:
                    raise self._failed
                if self._skip and self._skips(x, first, host, step):
                    host.zero_()
                else:
                    stats = x.exchange(name, host.numpy(), pieces, step)
                    self.bytes_sent += stats["bytes_sent"]
                    self.dense_bytes += stats["dense_bytes"]
                    self.exchange_seconds += stats["compress_seconds"] + stats["comm_seconds"]
                if host is not buf:
                    host_copies["to_device"] += host.nbytes
                    buf.copy_(host)  # synchronous: done before the result is set
                fut.set_result(buf)
            except BaseException as e:  # noqa: B902 - handed to DDP, which raises it in backward
                self._failed = e
                fut.set_exception(e)

        self._last = self._pool.submit(work)
        return fut

    def _step_guard(self, x):
        if self._guard is None:
            self._guard = _non_finite.StepGuard(x, self.comm)
        return self._guard

    def _skips(self, x, first, host, step):
        """non_finite='skip', on the hook's thread: whether this bucket comes
        back as zeros."""
        guard = self._step_guard(x)
        if first:
            guard.start_step()
        before = guard.bytes_sent
        skip = guard.bucket_is_skipped(host.numpy(), step)
        self.bytes_sent += guard.bytes_sent - before
        return skip

    def step_skipped(self):
        """non_finite='skip': whether the step whose backward just ended is
        skipped, the same answer on every rank (a collective: every rank asks
        once a step, after backward, before stepping its optimizers). A
        skipped step leaves the codec's state as before it and gives its
        number back, as a run without that batch would number the next."""
        if not self._skip:
            raise _sparq.InputError("sparq hook: step_skipped() is for non_finite='skip'")
        self.wait()
        guard = self._step_guard(self._exchange())
        before = guard.bytes_sent
        skipped = guard.end_step(self.step)
        self.bytes_sent += guard.bytes_sent - before
        if skipped:
            self.skipped_steps += 1
            self.step -= 1
        return skipped

    def _exchange_on_device(self, x, name, buf, pieces, step, what):
        """The codec's selection on buf's device; only its pairs go to the
        host, for the exchange on the hook's thread (device_sparse)."""
        fut = torch.futures.Future(devices=[buf.device]) if buf.is_cuda else torch.futures.Future()
        t0 = time.perf_counter()
        try:
            finish, kept = self._device.exchange(name, buf, pieces, step, what)
        except BaseException as e:  # noqa: B902 - handed to DDP, which raises it in backward
            fut.set_exception(e)
            return fut
        select_seconds = time.perf_counter() - t0
        p = self._size()

        def work():
            try:
                t1 = time.perf_counter()
                self.bytes_sent += finish(p)
                self.dense_bytes += _sparq.dense_ring_bytes(p, buf.numel())
                self.exchange_seconds += select_seconds + time.perf_counter() - t1
                fut.set_result(buf)
            except BaseException as e:  # noqa: B902
                fut.set_exception(e)

        self._last = self._pool.submit(work)
        return fut

    def wait(self):
        """Blocks until every bucket handed to the hook is exchanged."""
        if self._last is not None:
            self._last.result()

    def state_dict(self):
        self.wait()
        if self._device is not None:
            self._device.store()  # the device's residuals and thresholds, into the host codecs' state
        blob = self._x.state() if self._x is not None else self._blob
        return {
            "codec": self.codec,
            "step": self.step,
            "state": None if blob is None else torch.frombuffer(bytearray(blob), dtype=torch.uint8),
        }

    def load_state_dict(self, d):
        if d.get("codec") != self.codec:
            raise _sparq.InputError(f"sparq hook: state of codec '{d.get('codec')}' loaded into '{self.codec}'")
        self.wait()
        self.step = int(d["step"])
        blob = None if d["state"] is None else bytes(d["state"].numpy().tobytes())
        if self._x is not None and blob is not None:
            self._x.load_state(blob)
        else:
            self._blob = blob
        self._device = None  # a device codec takes its tensors' state from the loaded one


# Bytes the bridge copied between a GPU and the host (PCIe), both ways:
# the host codecs' fp32 staging and the device codecs' compressed bytes.
host_copies = {"to_host": 0, "to_device": 0}


def _to_host(t, what):
    """t itself when on the CPU; a CUDA tensor's copy in pinned host memory
    (the copy waits for the work queued on t's stream)."""
    if t.device.type == "cpu":
        return t
    if t.device.type != "cuda":
        raise _sparq.InputError(f"{what}: a tensor on {t.device}; sparq takes CPU tensors and stages CUDA ones")
    host_copies["to_host"] += t.nbytes
    return torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t)


def _to_device(host, device):
    if device.type == "cuda":
        host_copies["to_device"] += host.nbytes
    return host.to(device)


def dct_hook(eta=0.99, L=1000, *, values="f32", allreduce="auto", comm=None, model=None, codecs="auto",
             route="host", group=None, non_finite="fail"):
    """DCT-DP: per-tensor hard threshold, recomputed every L steps, keeping the
    top (1 - eta) of |grad + residual|; error feedback per tensor; sparse
    allreduce (`auto` picks the algorithm). values: f32, bf16, fp8 or fp4
    (sparq's extension: the kept values in 16, 8 or 4 bits, their rounding
    fed back).
    codecs: where the selection runs: "device" (sparq.gpu's kernels, so
    only the kept pairs' sparse stream leaves a GPU, its values rounded
    there), "host" (a CUDA bucket staged through pinned host
    memory), or "auto": the device's for CUDA buckets, else the host's. The
    same bits either way, and state_dict() saves the same state.
    route: how the device codec's payloads travel: "host" (pinned host
    memory and sparq's transport) or "group" (uint8 tensors on the
    gradients' device through `group`, a torch.distributed process group,
    the default one if None: NCCL between GPUs, no host copy; the values
    rounded on the device; the streams are allgathered and summed on the
    device in rank order). non_finite: "fail" or "skip" (Hook)."""
    codec = f"dct:{eta},{L}" + ("" if values == "f32" else f"+{values}")
    return Hook(codec, allreduce=allreduce, comm=comm, model=model, codecs=codecs, route=route, group=group,
                non_finite=non_finite)


def _check_codecs(codecs, what):
    if codecs not in ("auto", "host", "device"):
        raise _sparq.InputError(f"{what}: codecs '{codecs}'; they are auto, host or device")


def _check_route(route, group, comm, what):
    """Whether the payloads take the group route; a group belongs to it, a
    Comm to the host route."""
    if route not in ("host", "group"):
        raise _sparq.InputError(f"{what}: route '{route}'; it is host or group")
    if route == "host" and group is not None:
        raise _sparq.InputError(f"{what}: a group is for route='group'; the host route runs on sparq's Comm")
    if route == "group" and comm is not None:
        raise _sparq.InputError(f"{what}: comm is the host route's; route='group' sends through `group`")
    return route == "group"


def _on_device(codecs, t):
    """Whether `codecs` runs the codec where t lives: always under "device",
    for CUDA tensors under "auto"."""
    return codecs == "device" or (codecs == "auto" and t.is_cuda)


def _device_codec_of(codec, allreduce):
    """A factory of the codec on the device (sparq.gpu's kernels), called
    with the GradExchange, the Comm and the GroupRoute (one of the two
    None), or None where sparq has none: dct,
    topk, and the row-wise quantized codecs (the ring; recursive doubling
    up to 8 ranks) have."""
    c = _sparq.dp_codec(codec)
    if c["kind"] == "dct":
        return functools.partial(_device_codec, "device_sparse", "DeviceDct", (c["eta"], c["life_span"], c["values"]))
    if c["kind"] == "topk":
        return functools.partial(_device_codec, "device_sparse", "DeviceTopK", (c["k"], c["bucket"], c["values"]))
    if c["rowwise"] and allreduce in ("ring", "recursive-doubling"):
        return functools.partial(_device_codec, "device_quantized", "DeviceQuantized", (codec, allreduce))
    return None


def _device_codec(module, kind, args, x, comm, route):
    """module.kind(*args, x, comm, route), imported only where the codecs
    run on the device (the modules import Triton); None where the codec
    has no device kernels for the rank count (comm's, or route's where the
    payloads go through a group and comm is None)."""
    cls = getattr(importlib.import_module(f".{module}", __package__), kind)
    return cls(*args, x, comm, route) if cls.runs_on((route or comm).size, *args) else None


def quantized_hook(bits=4, ec=True, *, allreduce="ring", comm=None, model=None, codecs="auto", route="host",
                   group=None, non_finite="fail"):
    """Row-wise quantized allreduce (ring or recursive-doubling) in 8/4/2 bits,
    with per-hop error compensation when ec. codecs: where the chunks are
    encoded, decoded and summed: "device" (sparq.gpu's kernels: only the
    encodings cross PCIe; recursive doubling up to 8 ranks), "host" (a CUDA
    bucket staged through pinned host memory), or "auto": the device's for
    CUDA buckets where it runs, else the host's. The same bits either way.
    route and group: as dct_hook's (the ring's hops and recursive
    doubling's rounds through the group; the same bits on either route).
    non_finite: "fail" or "skip" (Hook)."""
    return Hook(f"q{bits}" + ("+ec" if ec else ""), allreduce=allreduce, comm=comm, model=model, codecs=codecs,
                route=route, group=group, non_finite=non_finite)


def topk_hook(k, b, *, values="f32", allreduce="auto", comm=None, model=None, codecs="auto", route="host",
              group=None, non_finite="fail"):
    """SparCML's TopK SGD: the k largest of every b values of grad + residual,
    residual keeps the rest, sparse allreduce. values, codecs, route, group
    and non_finite: as dct_hook's."""
    codec = f"topk:{k}/{b}" + ("" if values == "f32" else f"+{values}")
    return Hook(codec, allreduce=allreduce, comm=comm, model=model, codecs=codecs, route=route, group=group,
                non_finite=non_finite)


def _codec(bits):
    names = {32: "fp32", 8: "q8", 4: "q4", 2: "q2"}
    if bits not in names:
        raise _sparq.InputError(f"sparq: {bits} bits; the alltoall codecs are 32, 8, 4 and 2 bits")
    return names[bits]


_alltoall_comm = None


def _default_alltoall_comm():
    global _alltoall_comm
    if _alltoall_comm is None:
        _alltoall_comm = connect()
    return _alltoall_comm


class _QuantizedAlltoall(torch.autograd.Function):
    # Codecs on the device (device_alltoall; the blocks on comm, or through
    # route's group), or on the host: a CUDA tensor is then staged through
    # pinned host memory in fp32 both ways. The result and the gradient go
    # back to x's device.
    @staticmethod
    def forward(ctx, x, send_rows, recv_rows, fwd, bwd, comm, route, on_device, skip):
        ctx.meta = (send_rows, recv_rows, bwd, comm, route, x.device, on_device, skip)
        if on_device:
            return _device_alltoall(x.detach(), send_rows, recv_rows, fwd, comm, route)
        x = _non_finite.zeroed(x.detach()) if skip else x.detach()
        return _host_alltoall(x, send_rows, recv_rows, fwd, comm, f"sparq.torch.quantized_alltoall on rank "
                              f"{comm.rank}, forward (the rows)")

    @staticmethod
    def backward(ctx, grad):
        send_rows, recv_rows, bwd, comm, route, device, on_device, skip = ctx.meta
        if on_device:
            gin = _device_alltoall(grad, recv_rows, send_rows, bwd, comm, route)
        else:
            gin = _host_alltoall(_non_finite.zeroed(grad) if skip else grad, recv_rows, send_rows, bwd, comm,
                                 f"sparq.torch.quantized_alltoall on rank {comm.rank}, backward (the rows' gradients)")
        return gin.to(device), None, None, None, None, None, None, None, None


def _device_alltoall(x, send_rows, recv_rows, codec, comm, route):
    from .device_alltoall import alltoall_rows  # imports Triton, only where the codecs run on the device
    return alltoall_rows(x, send_rows, recv_rows, codec, comm, route)


def _host_alltoall(x, send_rows, recv_rows, codec, comm, what):
    dim = x.shape[1]
    src = _to_host(x, what).contiguous()
    out = torch.empty((sum(recv_rows), dim), pin_memory=x.is_cuda)
    try:
        _sparq.quantized_alltoallv(comm, src.numpy(), [r * dim for r in send_rows], out.numpy(),
                                   [r * dim for r in recv_rows], codec, dim)
    except _sparq.NonFiniteError as e:  # before anything was sent (fp32 too: quantized_alltoallv checks)
        raise _sparq.NonFiniteError(f"{what}: {e}") from None
    return _to_device(out, x.device)


def quantized_alltoall(x, splits, fwd_bits=4, bwd_bits=2, *, recv_splits=None, comm=None, codecs="auto",
                       route="host", group=None, non_finite="fail"):
    """Alltoall of rows for table-wise embeddings: the first splits[0] rows of
    x go to rank 0, the next splits[1] to rank 1, ...; returns the rows every
    rank sent here, in rank order. Forward in fwd_bits, backward (the rows'
    gradients) in bwd_bits; 32 is fp32. recv_splits, when known, saves a
    round of counts. x: a 2-D float32 tensor on the CPU or a CUDA device; the
    result is on x's device. codecs: where the blocks are encoded and decoded:
    "device" (sparq.gpu's kernels, so only compressed bytes leave a GPU),
    "host" (a CUDA tensor staged through pinned host memory in fp32, the CPU
    codecs), or "auto": device for CUDA tensors, host for CPU ones. Either
    way the same bits, and ranks of both kinds mix in one job. route: how
    the device's blocks travel: "host" (pinned host memory and sparq's
    transport, `comm`) or "group" (uint8 tensors on x's device through
    `group`, a torch.distributed process group, the default one if None:
    NCCL between GPUs; every rank on this route). non_finite: a NaN or inf
    in the rows (or, backward, their gradients) raises sparq.NonFiniteError
    before anything is sent ("fail"), or ("skip", the host codecs) is sent
    as 0 and the step marked for the hook's step_skipped()."""
    what = "sparq.torch.quantized_alltoall"
    _check_codecs(codecs, what)
    skip = _non_finite.check_mode(non_finite, what)
    on_device = _on_device(codecs, x)
    if skip and on_device:
        raise _sparq.InputError(f"{what}: non_finite='skip' runs with the host codecs (codecs='host')")
    route = group_route(group) if _check_route(route, group, comm, what) else None
    if route is not None and not on_device:
        raise _sparq.InputError(f"{what}: route='group' carries the device codecs' blocks; codecs='{codecs}' "
                                f"runs the host's for a tensor on {x.device} (codecs='device', or route='host')")
    if route is None and comm is None:
        comm = _default_alltoall_comm()
    where = route or comm
    if x.dim() != 2 or x.dtype != torch.float32 or x.device.type not in ("cpu", "cuda"):
        raise _sparq.InputError(f"{what}: rank {where.rank} got a {x.dim()}-D {x.dtype} tensor on {x.device}; it "
                                "takes a 2-D float32 tensor on the CPU or a CUDA device")
    splits = [int(s) for s in splits]
    if len(splits) != where.size or sum(splits) != x.shape[0] or min(splits) < 0:
        raise _sparq.InputError(f"{what}: rank {where.rank}: splits {splits} do not divide {x.shape[0]} rows over "
                                f"{where.size} ranks")
    if recv_splits is None:
        recv_splits = _exchange_counts(splits, comm, route, x.device, what)
    return _QuantizedAlltoall.apply(x, splits, [int(r) for r in recv_splits], _codec(fwd_bits), _codec(bwd_bits),
                                    comm, route, on_device, skip)


_group_routes = {}


def group_route(group=None):
    """The GroupRoute quantized_alltoall's route='group' sends through for a
    torch.distributed group (the default group if None): its bytes_sent
    counts the payload bytes this rank sent through it."""
    key = group if group is not None else dist.group.WORLD
    if key not in _group_routes:
        _group_routes[key] = GroupRoute(group)
    return _group_routes[key]


def _exchange_counts(splits, comm, route, device, what):
    """The rows every rank sends here: a round of counts on comm, or
    through route's group; each checked before it sizes anything."""
    if route is not None:
        if max(splits, default=0) >= 1 << 31:
            raise _sparq.InputError(f"{what}: 2^31 rows or more to one rank")
        got = route.alltoallv(torch.tensor(splits, dtype=torch.int32, device=device).view(torch.uint8),
                              [4] * route.size, [4] * route.size).view(torch.int32).tolist()
    else:
        if max(splits, default=0) >= 1 << 24:
            raise _sparq.InputError(f"{what}: more than 2^24 rows to one rank")
        counts = torch.tensor(splits, dtype=torch.float32)
        out = torch.empty(comm.size, dtype=torch.float32)
        _sparq.quantized_alltoallv(comm, counts.numpy(), [1] * comm.size, out.numpy(), [1] * comm.size, "fp32", 1)
        got = out.tolist()
    for i, n in enumerate(got):
        if not (n >= 0 and n == int(n)):
            raise _sparq.WireError(f"{what}: rank {i} announces {n} rows")
    return [int(n) for n in got]
