"""The bridge's checks of sparq.gpu's codecs (bridge_test.py runs them on
every rank): the hooks and the alltoall with their codecs on the device equal
the host's, bit for bit, through sparq's transport and through
torch.distributed (the group route); on a GPU machine on CUDA tensors,
elsewhere on CPU tensors under Triton's interpreter."""
import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import sparq
import sparq.torch as st
from bridge_support import cuda_check, ddp_grads, device_codec_check, local_grads, model_and_batch, run_steps


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
            assert f"bucket 0 on rank {rank}" in str(e) and "NaN" in str(e) and "the gradient of '" in str(e), str(e)
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
        assert f"bucket 0 on rank {rank}, step 0: row-wise quantize" in str(e) and "NaN" in str(e), str(e)


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
