"""The PyTorch bridge on N processes (torch.distributed with gloo):
sparq.torch's hooks and alltoall against independent references. Run by
CTest as `bridge_test.py --nprocs N` (spawned processes: sparq's Gloo
transport), `bridge_test.py --nprocs N --torchrun` (ranks started by
torchrun: Gloo) and `bridge_test.py --nprocs N --mpiexec MPIEXEC` (ranks
started by mpiexec: sparq's MPI transport); `--cuda` runs the CUDA checks
instead, where torch has a CUDA device. Each check runs on every rank, and
the run fails if any rank fails. Under torchrun and mpiexec a second job
checks that a rank that dies ends the others. `--no-device-codecs` leaves
out the checks of sparq.gpu's codecs: CTest runs them on spawned ranks only.

Where torch has no CUDA device, sparq.gpu's kernels (quantized_alltoall's
codecs="device") run on CPU tensors under Triton's interpreter.
"""
import argparse
import datetime
import math
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
import warnings

import numpy as np
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports Triton; the ranks inherit it
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")  # the interpreter's masked lanes
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import sparq
import sparq.torch as st
import pipeline_checks

try:
    import torchrec_checks
except ModuleNotFoundError as e:  # the GPU machine has none; --cuda needs none
    if e.name != "torchrec":
        raise
    torchrec_checks = None

CHECKS = []
CUDA_CHECKS = []  # run by --cuda, where torch has a CUDA device


def check(fn):
    CHECKS.append(fn)
    return fn


def device_codec_check(fn):
    """A check of sparq.gpu's codecs against the host's. Without a GPU they
    run under Triton's interpreter and take most of a run's time, and what
    a launcher changes (how the ranks start, which transport sparq picks)
    the other checks cover: --no-device-codecs leaves them out."""
    fn.device_codecs = True
    return check(fn)


def cuda_check(fn):
    CUDA_CHECKS.append(fn)
    return fn


def model_and_batch(rank, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(64, 13, generator=g)
    y = torch.rand(64, 1, generator=g)
    return model, x, y


def ddp_grads(ddp, x, y):
    ddp.zero_grad(set_to_none=True)
    nn.functional.mse_loss(ddp(x), y).backward()
    return {n[len("module."):]: p.grad.clone() for n, p in ddp.named_parameters()}


def local_grads(model, x, y):
    model.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@check
def plain_hook_is_the_exact_average(rank, size, device="cpu"):
    """`none` through the hook equals torch's own allreduce (up to the order
    of the sum); a CUDA model's buckets staged through pinned memory."""
    model, x, y = (t.to(device) for t in model_and_batch(rank))
    ddp = DDP(model, bucket_cap_mb=0.005)
    hook = st.Hook("none", model=ddp)
    ddp.register_comm_hook(None, hook)
    got = ddp_grads(ddp, x, y)
    ref = local_grads(model_and_batch(rank)[0].to(device), x, y)
    for name, g in ref.items():
        g = g.cpu()
        dist.all_reduce(g)
        g /= size
        assert got[name].device == x.device and torch.allclose(got[name].cpu(), g, rtol=1e-5, atol=1e-7), name


@check
def sparsifying_hooks_equal_the_exchange_of_each_tensor(rank, size):
    """dct and topk through DDP's buckets give, bit for bit, what sparq's
    GradExchange gives when each tensor is exchanged alone on the same
    gradients (the C++ exchange selects per tensor inside a bucket), over
    several steps (residuals, thresholds reused for L steps)."""
    for codec, make in (("dct:0.9,3", lambda m: st.dct_hook(0.9, 3, allreduce="ssar-split-allgather", model=m)),
                        ("topk:4/64", lambda m: st.topk_hook(4, 64, allreduce="ssar-split-allgather", model=m))):
        model, x, y = model_and_batch(rank)
        ddp = DDP(model, bucket_cap_mb=0.005)
        hook = make(ddp)
        ddp.register_comm_hook(None, hook)
        ref_model = model_and_batch(rank)[0]
        ref = sparq.GradExchange(st.connect(), codec, "ssar-split-allgather")
        for step in range(5):
            xs = x + step
            got = ddp_grads(ddp, xs, y)
            want = local_grads(ref_model, xs, y)
            # DDP hands the buckets over from the last layer to the first.
            for name in reversed(list(want)):
                a = want[name].contiguous().view(-1).numpy()
                ref.exchange(name, a, [(name, a.size)], step)
            for name in want:
                assert torch.equal(got[name], want[name]), f"{codec} step {step} {name}"
        assert hook.bytes_sent > 0 and hook.bytes_sent < hook.dense_bytes, (hook.bytes_sent, hook.dense_bytes)


@check
def fp4_values_keep_topks_choice_in_fewer_bytes(rank, size):
    """topk_hook(values="fp4") on its first step keeps what the fp32 hook
    keeps (no residual yet, so the same top-k; fp4 may flush a kept value to
    zero), each average within fp4's roundings of the fp32 one (as the C++
    low-precision allreduce test bounds them: per rounding a relative 1/5,
    plus under 1/12 of the largest value for what flushes below a group's
    scale; a contribution meets at most log2(P) + 3 roundings), in at most
    2/5 of the bytes."""
    grads, hooks = {}, {}
    for values in ("f32", "fp4"):
        model, x, y = model_and_batch(rank)
        ddp = DDP(model, bucket_cap_mb=0.005)
        hooks[values] = st.topk_hook(4, 64, values=values, model=ddp)
        ddp.register_comm_hook(None, hooks[values])
        grads[values] = ddp_grads(ddp, x, y)
    assert hooks["fp4"].codec == "topk:4/64+fp4"
    model, x, y = model_and_batch(rank)
    mine = local_grads(model, x, y)
    rounds = math.ceil(math.log2(size)) + 3
    for name, want in grads["f32"].items():
        every = [torch.empty_like(mine[name]) for _ in range(size)]
        dist.all_gather(every, mine[name])
        mag = torch.stack(every).abs().mean(0)
        biggest = max(float(e.abs().max()) for e in every)
        got = grads["fp4"][name]
        assert not bool(((got != 0) & (want == 0)).any()), name
        assert bool(((got - want).abs() <= rounds * (0.2 * mag + biggest / 12)).all()), name
    assert hooks["fp4"].bytes_sent <= 0.4 * hooks["f32"].bytes_sent, (hooks["fp4"].bytes_sent, hooks["f32"].bytes_sent)


@check
def quantized_hook_stays_within_its_bound_and_equal_on_all_ranks(rank, size):
    model, x, y = model_and_batch(rank)
    ddp = DDP(model, bucket_cap_mb=0.005)
    ddp.register_comm_hook(None, st.quantized_hook(4, ec=True, model=ddp))
    got = ddp_grads(ddp, x, y)
    ref = local_grads(model_and_batch(rank)[0], x, y)
    # Every value is quantized once by each rank on its way (the ring), with a
    # step of at most (row range)/15 <= 2 P M / 15 (M: the largest |gradient|
    # of any rank; a row of partial sums spans several tensors), so the
    # average is off by at most P * step / 2 / P.
    m = torch.tensor(max(g.abs().max().item() for g in ref.values()))
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    bound = (2 * size * m.item() / 15) / 2 * 1.0001
    for name, g in ref.items():
        dist.all_reduce(g)
        g /= size
        assert (got[name] - g).abs().max().item() <= bound, (name, (got[name] - g).abs().max().item(), bound)
        same = got[name].clone()
        dist.broadcast(same, 0)
        assert torch.equal(same, got[name]), f"{name} differs across ranks"


def run_steps(rank, steps, hook, model):
    """DDP with `hook`: a gradient step of 0.1 at each of `steps` (the batch
    shifted by the step); each step's averaged gradients."""
    ddp = DDP(model, bucket_cap_mb=0.005)
    ddp.register_comm_hook(None, hook)
    _, x, y = model_and_batch(rank)
    out = []
    for s in steps:
        g = ddp_grads(ddp, x.to(model[0].weight.device) + s, y.to(model[0].weight.device))
        with torch.no_grad():
            for p in ddp.parameters():
                p -= 0.1 * p.grad
        out.append(g)
    hook.wait()
    return out


@check
def hook_state_resumes_bit_for_bit(rank, size):
    """6 steps in one run equal 3 steps, state_dict(), a new hook and
    load_state_dict(), 3 more steps."""
    whole = run_steps(rank, range(6), st.dct_hook(0.8, 2), model_and_batch(rank)[0])
    m2 = model_and_batch(rank)[0]
    first = st.dct_hook(0.8, 2)
    run_steps(rank, range(3), first, m2)
    state = first.state_dict()
    second = st.dct_hook(0.8, 2)
    second.load_state_dict(state)
    tail = run_steps(rank, range(3, 6), second, m2)
    for s in range(3):
        for name, g in tail[s].items():
            assert torch.equal(g, whole[3 + s][name]), f"step {3 + s} {name}"
    try:
        st.topk_hook(4, 64).load_state_dict(state)
        raise AssertionError("a dct state loaded into a topk hook")
    except sparq.InputError:
        pass


@device_codec_check
def device_codec_state_resumes_on_either_side(rank, size, device="cpu"):
    """The codecs on the device save the host codecs' state: 3 steps with
    the selection on one side, state_dict(), 3 more on the other, equal 6
    host steps bit for bit (DCT-DP's thresholds mid-period, TopK's
    residuals, rounded values' residuals)."""
    for make in (lambda where: st.dct_hook(0.8, 4, codecs=where),
                 lambda where: st.topk_hook(4, 64, values="fp8", codecs=where)):
        whole = run_steps(rank, range(6), make("host"), model_and_batch(rank)[0].to(device))
        for before, after in (("device", "host"), ("host", "device")):
            model = model_and_batch(rank)[0].to(device)
            first = make(before)
            run_steps(rank, range(3), first, model)
            second = make(after)
            second.load_state_dict(first.state_dict())
            tail = run_steps(rank, range(3, 6), second, model)
            assert (second._device is not None) == (after == "device"), f"{second.codec}: the codecs ran elsewhere"
            for s in range(3):
                for name, g in tail[s].items():
                    assert torch.equal(g, whole[3 + s][name]), f"{second.codec} {before}->{after}: step {3 + s} {name}"


@check
def quantized_alltoall_forward_and_backward(rank, size):
    dim = 16
    splits = [(rank + j) % 3 + 1 for j in range(size)]  # rows this rank sends to rank j
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(sum(splits), dim, generator=g, requires_grad=True)
    # Reference: an exact alltoall of the same rows through torch.distributed.
    blocks = list(torch.split(x.detach(), splits))
    recv = [(r + rank) % 3 + 1 for r in range(size)]  # rows rank r sends here
    exact = [torch.empty(recv[r], dim) for r in range(size)]
    exchange_blocks(exact, blocks, rank, size)
    exact = torch.cat(exact)
    fp32 = st.quantized_alltoall(x, splits, 32, 32)
    assert torch.equal(fp32, exact)
    q4 = st.quantized_alltoall(x, splits, 4, 2, recv_splits=recv)
    rng = (exact.max(dim=1).values - exact.min(dim=1).values).unsqueeze(1)
    assert ((q4 - exact).abs() <= rng / 15 / 2 * 1.0001 + 1e-6).all()
    # Backward: every row's gradient returns to the rank that sent the row.
    w = torch.arange(exact.numel(), dtype=torch.float32).view_as(exact) / exact.numel()
    (q4 * w).sum().backward()
    wblocks = list(torch.split(w, recv))
    back = [torch.empty(s, dim) for s in splits]
    exchange_blocks(back, wblocks, rank, size)
    back = torch.cat(back)
    brng = (back.max(dim=1).values - back.min(dim=1).values).unsqueeze(1)
    assert ((x.grad - back).abs() <= brng / 3 / 2 * 1.0001 + 1e-6).all()


@device_codec_check
def quantized_alltoall_with_device_codecs_equals_the_host_codecs(rank, size):
    """sparq.gpu's kernels (here under Triton's interpreter) encode and decode
    the blocks as the CPU codecs do: the same rows, gradients and bytes on
    the wire; and ranks of both kinds mix (rank 0 on the device, the others
    on the host, the messages being the same)."""
    dim = 16
    splits = [(rank + j) % 3 + 1 for j in range(size)]
    x = torch.randn(sum(splits), dim, generator=torch.Generator().manual_seed(rank))
    w = torch.randn(sum((r + rank) % 3 + 1 for r in range(size)), dim, generator=torch.Generator().manual_seed(9))
    comm = st._default_alltoall_comm()

    def run(codecs, fwd, bwd):
        xd = x.clone().requires_grad_()
        before = comm.counters()["bytes_sent"]
        y = st.quantized_alltoall(xd, splits, fwd, bwd, codecs=codecs)
        (y * w).sum().backward()
        return y.detach(), xd.grad, comm.counters()["bytes_sent"] - before

    for fwd, bwd in ((4, 2), (8, 8), (2, 4), (32, 32)):
        host, device = run("host", fwd, bwd), run("device", fwd, bwd)
        assert torch.equal(host[0], device[0]) and torch.equal(host[1], device[1]), f"q{fwd}/q{bwd}"
        assert host[2] == device[2], f"q{fwd}/q{bwd}: {host[2]} bytes sent by the host codecs, {device[2]} by the device's"
        mixed = run("device" if rank == 0 else "host", fwd, bwd)
        assert torch.equal(host[0], mixed[0]) and torch.equal(host[1], mixed[1]), f"mixed q{fwd}/q{bwd}"
        # route='group': the same blocks through torch.distributed (the counts' round too).
        xd = x.clone().requires_grad_()
        route = st.group_route()
        before = route.bytes_sent
        y = st.quantized_alltoall(xd, splits, fwd, bwd, codecs="device", route="group")
        (y * w).sum().backward()
        assert torch.equal(host[0], y) and torch.equal(host[1], xd.grad), f"group q{fwd}/q{bwd}"
        assert route.bytes_sent - before == host[2], f"group q{fwd}/q{bwd}: bytes sent"
    for bad, words in ((lambda: st.quantized_alltoall(x, splits, route="group"), "route='group' carries"),
                       (lambda: st.quantized_alltoall(x, splits, codecs="device", route="mpi"), "route 'mpi'")):
        try:
            bad()
            raise AssertionError(f"accepted: {words}")
        except sparq.InputError as e:
            assert words in str(e), str(e)
    try:
        st.quantized_alltoall(x, splits, 4, 2, codecs="gpu")
        raise AssertionError("codecs='gpu' was accepted")
    except sparq.InputError as e:
        assert "auto, host or device" in str(e), str(e)


@device_codec_check
def sparsifying_hooks_with_device_codecs_equal_the_host_codecs(rank, size, device="cpu"):
    """DCT-DP's and TopK's selection by sparq.gpu's kernels (on CPU tensors
    under Triton's interpreter; with --cuda on the GPU): the same averaged
    gradients, bit for bit, as the host codecs over steps with and without a
    threshold recomputed (residuals and thresholds carried); ranks of both
    kinds mix."""
    # Value formats (rounded by the host, the rounding's residual back on the
    # device) on one codec each, without the mixed run.
    for make, kinds in ((lambda ddp, where: st.dct_hook(0.9, 3, model=ddp, codecs=where), ("device", "mixed")),
                        (lambda ddp, where: st.topk_hook(4, 64, model=ddp, codecs=where), ("device", "mixed")),
                        (lambda ddp, where: st.dct_hook(0.9, 3, values="bf16", model=ddp, codecs=where), ("device",)),
                        (lambda ddp, where: st.topk_hook(4, 64, values="fp4", model=ddp, codecs=where), ("device",))):
        runs = {}
        for codecs in ("host",) + kinds:
            model, x, y = (t.to(device) for t in model_and_batch(rank))
            ddp = DDP(model, bucket_cap_mb=0.005)
            where = codecs if codecs != "mixed" else ("device" if rank == 0 else "host")
            hook = make(ddp, where)
            ddp.register_comm_hook(None, hook)
            runs[codecs] = [ddp_grads(ddp, x + s, y) for s in range(5)]
            hook.wait()
            assert (hook._device is not None) == (where == "device"), f"{hook.codec} {codecs}: the codecs ran elsewhere"
        for codecs in kinds:
            for s, (a, b) in enumerate(zip(runs["host"], runs[codecs])):
                for name in a:
                    assert torch.equal(a[name], b[name]), f"{hook.codec} {codecs}: step {s} {name}"
    # NaN in a gradient (on every rank: none waits for another): an error
    # naming the bucket, the rank and the tensor, from the device's kernels.
    for make in (lambda ddp: st.dct_hook(0.9, 3, model=ddp, codecs="device"),
                 lambda ddp: st.topk_hook(4, 64, model=ddp, codecs="device")):
        model, x, y = (t.to(device) for t in model_and_batch(rank))
        ddp = DDP(model)
        ddp.register_comm_hook(None, make(ddp))
        x[0, 0] = float("nan")
        try:
            ddp_grads(ddp, x, y)
            raise AssertionError("a NaN gradient was accepted")
        except Exception as e:  # DDP re-raises the hook's error as a RuntimeError
            assert f"bucket 0 on rank {rank}" in str(e) and "NaN" in str(e) and "tensor " in str(e), str(e)
    try:
        st.Hook("qsgd4", codecs="device")
        raise AssertionError("a QSGD hook on the device was accepted")
    except sparq.InputError as e:
        assert "no device kernels yet" in str(e), str(e)


@device_codec_check
def quantized_hook_with_device_codecs_equals_the_host_codec(rank, size, device="cpu"):
    """The row-wise quantized ring (and recursive doubling) with the codec on
    the device (sparq.gpu's kernels; on CPU tensors under Triton's
    interpreter): the host codec's averaged gradients bit for bit over steps
    (residuals carried, chunks of whole 512-value rows and a shorter one),
    ranks of both kinds mixed; its state resumes on the host; NaN is an
    error naming the bucket."""
    for codec, algo, kinds in (("q4+ec", "ring", ("device", "mixed")), ("q2+ec-skip-first", "ring", ("device",)),
                               ("q4+ec", "recursive-doubling", ("mixed",))):
        runs = {}
        for codecs in ("host",) + kinds:
            where = codecs if codecs != "mixed" else ("device" if rank == 0 else "host")
            hook = st.Hook(codec, allreduce=algo, codecs=where)
            runs[codecs] = run_steps(rank, range(3), hook, model_and_batch(rank)[0].to(device))
            assert (hook._device is not None) == (where == "device"), f"{codec} {codecs}: the codecs ran elsewhere"
        for codecs in kinds:
            for s, (a, b) in enumerate(zip(runs["host"], runs[codecs])):
                for name in a:
                    assert torch.equal(a[name], b[name]), f"{codec} {algo} {codecs}: step {s} {name}"
    # The residuals are kept per bucket, so a new DDP's first buckets take
    # up older residuals than its predecessor's rebuilt ones: the state saved
    # with the codec on the device resumes as the host codec's own does.
    tails = {}
    for before in ("host", "device"):
        model = model_and_batch(rank)[0].to(device)
        first = st.quantized_hook(4, codecs=before)
        run_steps(rank, range(3), first, model)
        second = st.quantized_hook(4, codecs="host")
        second.load_state_dict(first.state_dict())
        tails[before] = run_steps(rank, range(3, 6), second, model)
    for s, (a, b) in enumerate(zip(tails["host"], tails["device"])):
        for name in a:
            assert torch.equal(a[name], b[name]), f"q4+ec device->host: step {3 + s} {name}"
    model, x, y = (t.to(device) for t in model_and_batch(rank))
    ddp = DDP(model)
    ddp.register_comm_hook(None, st.quantized_hook(4, codecs="device"))
    x[0, 0] = float("nan")
    try:
        ddp_grads(ddp, x, y)
        raise AssertionError("a NaN gradient was accepted")
    except Exception as e:  # DDP re-raises the hook's error as a RuntimeError
        assert f"bucket 0 on rank {rank}: row-wise quantize" in str(e) and "NaN" in str(e), str(e)


@device_codec_check
def group_route_carries_the_device_codecs_payloads(rank, size):
    """route='group': the device codecs' payloads as uint8 tensors through
    torch.distributed (here Gloo with CPU tensors; NCCL between GPUs). The
    quantized ring and recursive doubling send the same bytes as on the host
    route, so the gradients are the host route's bit for bit. DCT-DP and
    TopK sum every rank's stream in rank order (group_route_sums_...): over
    steps the host route's gradients and residuals bit for bit on 2 ranks
    (a + b either way), within float rounding beyond, the same on every
    rank. Choices that cannot work are InputErrors."""
    for codec, algo in (("q4+ec", "ring"), ("q2+ec-skip-first", "ring"), ("q4+ec", "recursive-doubling")):
        runs = {}
        for route in ("host", "group"):
            hook = st.Hook(codec, allreduce=algo, codecs="device", route=route)
            runs[route] = run_steps(rank, range(3), hook, model_and_batch(rank)[0])
            assert hook.bytes_sent > 0 and (hook._route is not None) == (route == "group")
        for s, (a, b) in enumerate(zip(runs["host"], runs["group"])):
            for name in a:
                assert torch.equal(a[name], b[name]), f"{codec} {algo}: step {s} {name}"
    # Over steps (thresholds and residuals carried): the host route's.
    for make in (lambda route: st.dct_hook(0.9, 3, codecs="device", route=route),
                 lambda route: st.topk_hook(4, 64, codecs="device", route=route)):
        runs, hooks = {}, {}
        for route in ("host", "group"):
            hooks[route] = make(route)
            runs[route] = run_steps(rank, range(4 if size == 2 else 1), hooks[route], model_and_batch(rank)[0])
        what = hooks["group"].codec
        assert 0 < hooks["group"].bytes_sent < hooks["group"].dense_bytes, what
        for s, (a, b) in enumerate(zip(runs["host"], runs["group"])):
            for name in a:
                same = torch.equal(a[name], b[name]) if size == 2 else torch.allclose(a[name], b[name], rtol=1e-6)
                assert same, f"{what}: step {s} {name}"
        if size == 2:
            host, group = hooks["host"]._device.residuals, hooks["group"]._device.residuals
            assert host.keys() == group.keys() and all(torch.equal(host[k], group[k]) for k in host), what
        flat = torch.cat([g.flatten() for g in runs["group"][-1].values()])
        every = [torch.empty_like(flat) for _ in range(size)]
        dist.all_gather(every, flat)
        assert all(torch.equal(flat, g) for g in every), f"{what}: ranks disagree"
    for bad, words in ((lambda: st.dct_hook(route="group", codecs="host"), "carries the device codecs' payloads"),
                       (lambda: st.Hook("none", route="group"), "carries the device codecs' payloads"),
                       (lambda: st.dct_hook(route="nccl"), "route 'nccl'"),
                       (lambda: st.dct_hook(group=dist.group.WORLD), "a group is for route='group'"),
                       (lambda: st.dct_hook(route="group", comm=st._default_alltoall_comm()),
                        "comm is the host route's"),
                       (lambda: sparq.GradExchange(None, "dct:0.9,3").exchange("b", np.zeros(4, np.float32), step=0),
                        "made without a Comm")):
        try:
            bad()
            raise AssertionError(f"accepted: {words}")
        except sparq.InputError as e:
            assert words in str(e), str(e)
    model, x, y = model_and_batch(rank)
    ddp = DDP(model)
    ddp.register_comm_hook(None, st.dct_hook(route="group"))  # codecs="auto": the host's for a CPU bucket
    try:
        ddp_grads(ddp, x, y)
        raise AssertionError("a CPU bucket went to the group route with the host's codec")
    except Exception as e:  # DDP re-raises the hook's error as a RuntimeError
        assert f"on rank {rank} is on cpu" in str(e), str(e)


@device_codec_check
def group_route_sums_every_ranks_stream_in_rank_order(rank, size):
    """DCT-DP's first step on the group route, every value format (rounded
    on the device) against a plain reference: each rank's pairs of a bucket
    by the CPU codecs, rounded as a peer decodes their stream, summed in
    rank order, times 1/P."""
    for values in ("f32", "bf16", "fp8", "fp4"):
        model, x, y = model_and_batch(rank)
        ddp = DDP(model, bucket_cap_mb=0.005)
        hook = st.dct_hook(0.9, 3, values=values, model=ddp, codecs="device", route="group")
        buckets = []  # each bucket's tensors, in its order: one stream a bucket, fp8's scale and fp4's groups its own

        def recording(state, bucket):
            buckets.append([hook._name(p) for p in bucket.parameters()])
            return hook(state, bucket)

        ddp.register_comm_hook(None, recording)
        got = ddp_grads(ddp, x, y)
        local = local_grads(model_and_batch(rank)[0], *model_and_batch(rank)[1:])
        for names in buckets:
            grads = [local[n].contiguous().view(-1).numpy() for n in names]
            idx, val, off = [], [], 0
            for a in grads:
                i, v = sparq._sparq.threshold_pack(a, sparq._sparq.sparsity_threshold(a, 0.9))
                idx.append(i + off)
                val.append(v)
                off += a.size
            idx, val = np.concatenate(idx).astype(np.uint32), np.concatenate(val)
            sent = torch.zeros(off)
            sent[idx.astype(np.int64)] = torch.from_numpy(sparq._sparq.decode_stream(
                sparq._sparq.encode_stream(off, idx, val, values))[2])
            every = [torch.empty_like(sent) for _ in range(size)]
            dist.all_gather(every, sent)
            want = torch.zeros(off)
            for v in every:
                want += v
            want *= float(torch.ones((), dtype=torch.float32) / size)
            for n, w in zip(names, want.split([a.size for a in grads])):
                assert torch.equal(got[n].view(-1), w), f"dct {values}: {n}"


@cuda_check
def quantized_hook_on_cuda_equals_the_host_codec(rank, size):
    quantized_hook_with_device_codecs_equals_the_host_codec(rank, size, "cuda")


@cuda_check
def sparsifying_hooks_on_cuda_equal_the_host_codecs(rank, size):
    sparsifying_hooks_with_device_codecs_equal_the_host_codecs(rank, size, "cuda")


@cuda_check
def device_codec_state_on_cuda_resumes_on_either_side(rank, size):
    device_codec_state_resumes_on_either_side(rank, size, "cuda")


@check
def qsgd_alltoallv_draws_per_step(rank, size):
    """With a QSGD codec the alltoall's rounding is keyed by the step: the
    same step rounds the same way, the next one otherwise."""
    comm = st.connect()
    n = 64
    src = np.sin(np.arange(n * size, dtype=np.float32) + rank).astype(np.float32)

    def at(step):
        out = np.empty(n * size, dtype=np.float32)
        sparq.quantized_alltoallv(comm, src, [n] * size, out, [n] * size, "qsgd4", 32, step=step)
        return out

    first, again, other = at(0), at(0), at(1)
    assert np.array_equal(first, again)
    mine = slice(rank * n, (rank + 1) * n)
    assert np.array_equal(first[mine], src[mine]) and np.array_equal(other[mine], src[mine])
    assert (first != other).any(), "step 1 rounds like step 0"


def exchange_blocks(out, blocks, rank, size):
    """An exact alltoall by point-to-point sends (gloo has no all_to_all)."""
    reqs = []
    for j in range(size):
        if j == rank:
            out[j].copy_(blocks[j])
        else:
            reqs.append(dist.isend(blocks[j].contiguous(), j))
            reqs.append(dist.irecv(out[j], j))
    for r in reqs:
        r.wait()


@check
def bad_input_is_an_exception_naming_bucket_and_rank(rank, size):
    hook = st.dct_hook(0.9, 10)
    model = nn.Linear(4, 1).double()
    ddp = DDP(model)
    ddp.register_comm_hook(None, hook)
    try:
        ddp(torch.randn(3, 4, dtype=torch.float64)).sum().backward()
        raise AssertionError("a float64 bucket was accepted")
    except Exception as e:  # DDP re-raises the hook's error as a RuntimeError
        assert "bucket" in str(e) and f"rank {rank}" in str(e) and "float32" in str(e), str(e)
    # A device sparq neither takes nor stages.
    try:
        st.quantized_alltoall(torch.empty(size, 16, device="meta"), [1] * size, 4, 2)
        raise AssertionError("a tensor on the meta device was accepted")
    except sparq.InputError as e:
        assert "meta" in str(e) and f"rank {rank}" in str(e), str(e)
    # A group of one rank: nothing to exchange, and an error that says so.
    alone = [dist.new_group([r]) for r in range(size)][rank]
    try:
        st.connect(alone)
        raise AssertionError("a group of one rank was accepted")
    except sparq.InputError as e:
        assert f"rank {rank}" in str(e) and "at least 2" in str(e), str(e)
    # Sizes that differ across ranks: every rank gets an error, none hangs.
    comm = st.connect(timeout=datetime.timedelta(seconds=5))
    x = sparq.GradExchange(comm, "dct:0.5,10", "ssar-split-allgather")
    a = np.ones(100 + rank, dtype=np.float32)
    try:
        x.exchange("t", a, [], 0)
        raise AssertionError("sizes that differ across ranks were accepted")
    except sparq.Error as e:
        assert f"rank {rank}" in str(e), str(e)
    # Every rank finishes connecting before any drops its connection: a rank
    # whose check fails at once would otherwise close its end while a peer is
    # still setting up the mesh (a flake seen under a loaded test run).
    comm = st.connect()
    dist.barrier()
    try:
        sparq.GradExchange(comm, "dct:0.5,10").exchange("t", np.ones(4, dtype=np.int32), [], 0)
        raise AssertionError("an int32 array was accepted")
    except sparq.InputError as e:
        assert "float32" in str(e) and f"rank {rank}" in str(e)


@check
def transports_agree(rank, size):
    """The Comm is MPI's exactly when mpiexec started the ranks, and the same
    exchange gives the same bits over Gloo and over MPI."""
    comm = st.connect()
    assert comm.transport_name == ("mpi" if sparq.launched_by_mpiexec() else "gloo"), comm.transport_name
    grad = np.cos(np.arange(5000, dtype=np.float32) * (rank + 1)).astype(np.float32)
    outs = {}
    names = ("gloo", "mpi") if sparq.launched_by_mpiexec() else ("gloo",)
    for name in names:
        x = sparq.GradExchange(st.connect(transport=name), "dct:0.9,2", "ssar-recursive-double")
        for step in range(3):
            a = grad * (step + 1)
            x.exchange("t", a, [], step)
        outs[name] = a
    if len(outs) == 2:
        assert np.array_equal(outs["gloo"], outs["mpi"]), "Gloo and MPI disagree"
    else:
        try:
            st.connect(transport="mpi")
            raise AssertionError("transport='mpi' was accepted outside mpiexec")
        except sparq.InputError as e:
            assert "mpiexec" in str(e), str(e)
    pair = dist.new_group([0, 1])  # collective over the job: every rank creates it
    if rank < 2 and size > 2:
        try:
            st.connect(pair, transport="mpi")
            raise AssertionError("transport='mpi' was accepted for a group short of the job")
        except sparq.InputError as e:
            assert f"rank {rank}" in str(e) and "whole job" in str(e), str(e)
    try:
        st.connect(transport="tcp")
        raise AssertionError("an unknown transport was accepted")
    except sparq.InputError as e:
        assert "'tcp'" in str(e), str(e)


@cuda_check
def plain_hook_on_cuda_is_the_exact_average(rank, size):
    plain_hook_is_the_exact_average(rank, size, "cuda")


@cuda_check
def quantized_alltoall_on_cuda_equals_the_cpu(rank, size):
    splits = [(rank + j) % 3 + 1 for j in range(size)]
    x = torch.randn(sum(splits), 16, generator=torch.Generator().manual_seed(rank))
    outs = {}
    for device in ("cpu", "cuda"):
        xd = x.detach().to(device).requires_grad_()  # a leaf on each device
        y = st.quantized_alltoall(xd, splits, 4, 2)
        (y * torch.arange(y.numel(), device=device).view_as(y)).sum().backward()
        assert y.device.type == device and xd.grad.device.type == device
        outs[device] = (y.detach().cpu(), xd.grad.cpu())
    assert torch.equal(outs["cpu"][0], outs["cuda"][0]) and torch.equal(outs["cpu"][1], outs["cuda"][1])


CHECKS += torchrec_checks.CHECKS if torchrec_checks else []
CHECKS += pipeline_checks.CHECKS


def run_checks(rank, size, init_method, report, checks):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    torch.set_num_threads(1)
    # While working on some: SPARQ_CHECKS=a,b runs the checks whose names or modules hold a or b.
    only = [w for w in os.environ.get("SPARQ_CHECKS", "").split(",") if w]
    for fn in [c for c in checks if not only or any(w in c.__module__ + "." + c.__name__ for w in only)]:
        try:
            fn(rank, size)
            print(f"[rank {rank}] ok   {fn.__name__}", flush=True)
        except Exception:
            report(f"rank {rank}: {fn.__name__}:\n{traceback.format_exc()}")
            print(f"[rank {rank}] FAIL {fn.__name__}", flush=True)
        # A failed check may leave peers mid-collective: realign through the store.
        dist.barrier()


def chosen(args):
    """The checks this run's options ask for."""
    if args.cuda:
        return CUDA_CHECKS
    return [c for c in CHECKS if args.device_codecs or not getattr(c, "device_codecs", False)]


def worker(rank, size, port, failures, args):
    run_checks(rank, size, f"tcp://127.0.0.1:{port}", failures.put, chosen(args))


def under_mpiexec(checks):
    """One rank that mpiexec started: its failures go to stderr and the exit code."""
    rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    if "SPARQ_TEST_FAILING_RANK" in os.environ:
        a_rank_fails(rank, size, int(os.environ["SPARQ_TEST_FAILING_RANK"]))
    failed = []
    run_checks(rank, size, f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", failed.append, checks)
    for f in failed:
        print(f, file=sys.stderr)
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


def under_torchrun(checks):
    """One rank that torchrun started (env:// rendezvous)."""
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if "SPARQ_TEST_KILLED_RANK" in os.environ:
        a_rank_is_killed(rank, int(os.environ["SPARQ_TEST_KILLED_RANK"]))
    failed = []
    run_checks(rank, size, "env://", failed.append, checks)
    for f in failed:
        print(f, file=sys.stderr)
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


def a_rank_is_killed(rank, killed):
    """One rank dies (SIGKILL: no exception, no goodbye) while the others wait
    for it in a barrier of sparq's Gloo transport, whose timeout is 60 s."""
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    comm = st.connect(timeout=datetime.timedelta(seconds=60))
    if rank == killed:
        os.kill(os.getpid(), signal.SIGKILL)
    comm.barrier()
    sys.exit(0)  # not reached: the killed rank never joins the barrier


def torchrun_jobs(nprocs, forward):
    """The checks on ranks that torchrun starts; then a job where one rank is
    killed, which must end with the lost rank named, well within the
    Comm's timeout (torchrun stops the other workers when one fails)."""
    def cmd():
        # --standalone: the rendezvous binds a port the kernel picks (a probed
        # free port could be taken by another test before torchrun binds it)
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nprocs),
                os.path.abspath(__file__), *forward]

    rc = subprocess.run(cmd(), timeout=600).returncode
    if rc != 0:
        return rc
    killed = nprocs - 1
    start = time.monotonic()
    job = subprocess.run(cmd(), capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, SPARQ_TEST_KILLED_RANK=str(killed)))
    took = time.monotonic() - start
    out = job.stdout + job.stderr
    if job.returncode == 0 or f"local_rank: {killed}" not in out or took > 60:
        return f"FAIL: a killed rank's job: exit code {job.returncode} after {took:.0f} s, output:\n{out}"
    print(f"ok   a killed rank ends the job in {took:.1f} s (exit code {job.returncode}), rank {killed} named")
    return 0


def a_rank_fails(rank, size, failing):
    """One rank raises while the others wait for it in a collective, with the
    Comm's default timeout of 5 minutes: the uncaught exception aborts the
    job at once (sparq.torch's hook under MPI), where a rank that exits
    normally would wait in MPI_Finalize and its peers for their timeout."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=rank,
                            world_size=size)
    comm = st.connect()
    if rank == failing:
        raise RuntimeError(f"rank {rank} fails on purpose")
    comm.barrier()
    sys.exit(0)  # not reached: the failing rank never joins the barrier


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mpiexec_jobs(mpiexec, nprocs, forward):
    """The checks on ranks that mpiexec starts; then a job where one rank
    fails, which must end well before the Comm's 5-minute timeout."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def cmd(*extra):
        return [mpiexec, "-n", str(nprocs), "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle",
                "1", "-x", "MASTER_PORT", *extra, sys.executable, os.path.abspath(__file__), *forward]

    rc = subprocess.run(cmd(), env=dict(env, MASTER_PORT=str(free_port())), timeout=600).returncode
    if rc != 0:
        return rc
    failing = nprocs - 1
    job = subprocess.Popen(cmd("-x", "SPARQ_TEST_FAILING_RANK"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=dict(env, MASTER_PORT=str(free_port()), SPARQ_TEST_FAILING_RANK=str(failing)))
    try:
        _, err = job.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        job.terminate()  # mpiexec passes it on to the ranks
        job.communicate()
        return "FAIL: a rank's uncaught exception did not end the job within 120 s"
    # Not Open MPI's "MPI_ABORT was invoked" text: mpiexec, killing the job,
    # sometimes loses it ("ORTE_ERROR_LOG: ... show_help.c").
    if job.returncode == 0 or f"rank {failing} fails on purpose" not in err:
        return f"FAIL: a failing rank's job: exit code {job.returncode}, stderr:\n{err}"
    print(f"ok   a failing rank aborts the job (exit code {job.returncode})")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--mpiexec", help="start the ranks with this mpiexec (sparq's MPI transport)")
    ap.add_argument("--torchrun", action="store_true", help="start the ranks with torchrun (sparq's Gloo transport)")
    ap.add_argument("--cuda", action="store_true", help="the CUDA checks (exit 77, skipped, without a CUDA device)")
    ap.add_argument("--no-device-codecs", dest="device_codecs", action="store_false",
                    help="leave out the checks of sparq.gpu's codecs (device_codec_check)")
    args = ap.parse_args()
    forward = [] if args.device_codecs else ["--no-device-codecs"]  # to the ranks a launcher starts
    if args.cuda and not torch.cuda.is_available():
        print("skip: torch has no CUDA device here")
        sys.exit(77)
    if not args.cuda and torchrec_checks is None:
        sys.exit("bridge_test: TorchRec is not installed; its checks are a part of this run (scripts/setup)")
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        under_mpiexec(chosen(args))
    if "TORCHELASTIC_RUN_ID" in os.environ:
        under_torchrun(chosen(args))
    if args.mpiexec:
        sys.exit(mpiexec_jobs(args.mpiexec, args.nprocs, forward))
    if args.torchrun:
        sys.exit(torchrun_jobs(args.nprocs, forward))
    port = free_port()
    ctx = mp.get_context("spawn")
    failures = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args.nprocs, port, failures, args))
             for r in range(args.nprocs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    rc = 0
    while not failures.empty():
        print(failures.get(), file=sys.stderr)
        rc = 1
    for r, p in enumerate(procs):
        if p.exitcode != 0:
            print(f"rank {r} exited with {p.exitcode}", file=sys.stderr)
            rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
