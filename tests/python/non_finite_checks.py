"""The bridge's checks of a NaN or inf entering sparq's codecs (bridge_test.py
runs them on every rank), injected at a chosen step by a tensor hook:
  - non_finite="fail": a hook stops that step, naming the rank, the step,
    the tensor and the bucket, with the codec's state as before the step;
    the alltoall stops forward and backward alike (every rank injects, so
    every rank stops before sending: no rank waits for another);
  - non_finite="skip": the step is skipped on every rank (one rank
    injects), and the run ends where the default run without that batch
    ends, parameters and codec state bit for bit: for every hook, with the
    NaN in a parameter's gradient (DDP's last bucket, so that restoring the
    buckets exchanged before it counts), and with it in what an alltoall or
    a DCT-MP cut carries, forward or backward, where only the cut or the
    alltoall sees it."""
import math

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import sparq
import sparq.torch as st
from bridge_support import check, model_and_batch

BAD_STEP = 2


def hooks(non_finite):
    """Every host codec's hook: (name, a function of the model that makes one)."""
    return [("dct", lambda m: st.dct_hook(0.8, 100, model=m, non_finite=non_finite)),
            ("topk", lambda m: st.topk_hook(4, 64, model=m, non_finite=non_finite)),
            ("q8+ec", lambda m: st.quantized_hook(8, model=m, non_finite=non_finite)),
            ("q4+ec", lambda m: st.quantized_hook(4, model=m, non_finite=non_finite)),
            ("q2+ec", lambda m: st.quantized_hook(2, model=m, non_finite=non_finite)),
            ("qsgd:4", lambda m: st.Hook("qsgd:4", model=m, non_finite=non_finite))]


def poison(t, value, at, when):
    """A tensor hook that puts `value` at `at` of the gradient where when()."""
    def inject(g):
        if not when():
            return g
        g = g.clone()
        g[at] = value
        return g
    t.register_hook(inject)


def sgd(params, hook, skip):
    """Plain SGD at 0.1, unless the skipping hook says the step is skipped."""
    if skip and hook.step_skipped():
        return
    with torch.no_grad():
        for p in params:
            p -= 0.1 * p.grad


def train(rank, make, steps, bad_ranks, value=math.nan, layer=0, at=(3, 1), skip=False):
    """SGD over `steps` (batch shifted by the step) under DDP with the hook
    make(model); at BAD_STEP, on `bad_ranks`, the weight gradient of
    model[layer] gets `value` at `at` (layer 0's bucket is DDP's last,
    layer 4's its first). Returns the model and the hook (also appended to
    `trained`, so a run that raises leaves it there)."""
    model, x, y = model_and_batch(rank)
    hook = make(model)
    trained.append(hook)
    ddp = DDP(model, bucket_cap_mb=0.005)
    ddp.register_comm_hook(None, hook)
    current = {}
    poison(model[layer].weight, value, at, lambda: current["step"] == BAD_STEP and rank in bad_ranks)
    for s in steps:
        current["step"] = s
        ddp.zero_grad(set_to_none=True)
        nn.functional.mse_loss(ddp(x + s), y).backward()
        sgd(ddp.parameters(), hook, skip)
    hook.wait()
    return model, hook


trained = []  # the hooks train() made, the last one last (a failed run's too)


def state(hook):
    return bytes(hook.state_dict()["state"].numpy().tobytes())


@check
def non_finite_stops_each_hook_on_its_step(rank, size):
    for (name, make), value in zip(hooks("fail"), [math.nan, math.inf, -math.inf, math.nan, math.inf, math.nan]):
        _, before = train(rank, make, range(BAD_STEP), [])
        try:
            train(rank, make, range(BAD_STEP + 1), range(size), value, layer=4, at=(0, 5))
            raise AssertionError(f"{name}: a gradient holding {value} was exchanged")
        except RuntimeError as e:  # DDP raises the hook's error in backward
            want = f"rank {rank}, step {BAD_STEP}: the gradient of '4.weight' (bucket '"
            assert want in str(e) and f"holds {value} at 5 of 32" in str(e), f"{name}: {e}"
        # The step's first bucket failed: nothing of the step reached the state.
        assert state(trained[-1]) == state(before), f"{name}: the codec's state changed on the failed step"


@check
def non_finite_stops_the_alltoall_both_ways(rank, size):
    x = torch.randn(2 * size, 8, requires_grad=True)
    bad = x.detach().clone()
    bad[1, 3] = math.inf
    try:
        st.quantized_alltoall(bad, [2] * size, 4, 2)
        raise AssertionError("rows holding inf were sent")
    except sparq.NonFiniteError as e:
        assert f"rank {rank}, forward (the rows)" in str(e) and "holds inf at 11 of 16" in str(e), str(e)
    y = st.quantized_alltoall(x, [2] * size, 32, 4)
    mask = torch.ones_like(y)
    mask[0, 0] = math.nan
    try:
        (y * mask).sum().backward()
        raise AssertionError("gradients holding NaN were sent")
    except sparq.NonFiniteError as e:
        assert f"rank {rank}, backward (the rows' gradients)" in str(e) and "holds nan at 0 of 16" in str(e), str(e)


@check
def skipped_step_equals_a_run_without_that_batch(rank, size):
    steps = range(6)
    for name, make in hooks("skip"):
        got, skipping = train(rank, make, steps, [size - 1], skip=True)
        assert skipping.skipped_steps == 1 and skipping.step == len(steps) - 1, \
            f"{name}: {skipping.skipped_steps} skipped, at step {skipping.step}"
        want, plain = train(rank, dict(hooks("fail"))[name], [s for s in steps if s != BAD_STEP], [])
        for (n, a), b in zip(got.named_parameters(), want.parameters()):
            assert torch.equal(a, b), f"{name}: {n} differs from the run without step {BAD_STEP}'s batch"
        assert state(skipping) == state(plain), f"{name}: the codec's state differs from the run without that batch"


class CutNet(nn.Module):
    """13 -> 32 -> DCT-MP cut -> 1, the table rows an alltoall brings added to
    the input; the cut's output exposed for a gradient hook."""

    def __init__(self, non_finite):
        super().__init__()
        torch.manual_seed(0)
        self.lin1, self.lin2 = nn.Linear(13, 32), nn.Linear(32, 1)
        self.cut = st.DctMp(0.5, "cut", non_finite=non_finite)

    def forward(self, x, rows):
        self.out = self.cut(torch.relu(self.lin1(x + rows.sum(0))))
        return self.lin2(self.out)


def train_cut(rank, size, steps, where, bad_rank, non_finite):
    """DDP over CutNet with a skipping DCT-DP hook and a local table whose
    rows cross a quantized_alltoall: at BAD_STEP on bad_rank a NaN enters
    `where` ("alltoall rows", "alltoall grads", "cut grads")."""
    model = CutNet(non_finite)
    table = nn.Parameter(torch.randn(2 * size, 13, generator=torch.Generator().manual_seed(rank)))
    hook = st.dct_hook(0.8, 100, model=model, non_finite=non_finite)
    ddp = DDP(model)
    ddp.register_comm_hook(None, hook)
    _, x, y = model_and_batch(rank)
    for s in steps:
        bad = s == BAD_STEP and rank == bad_rank
        rows = table.clone()
        if bad and where == "alltoall rows":  # still a function of the table: its backward alltoall runs too
            nan_at = torch.zeros_like(rows)
            nan_at[1, 2] = math.nan
            rows = rows + nan_at
        got = st.quantized_alltoall(rows, [2] * size, 32, 32, non_finite=non_finite)
        if bad and where == "alltoall grads":
            poison(got, math.nan, (0, 0), lambda: True)
        ddp.zero_grad(set_to_none=True)
        table.grad = None
        out = ddp(x + s, got)
        if bad and where == "cut grads":
            poison(model.out, math.inf, (3, 1), lambda: True)
        nn.functional.mse_loss(out, y).backward()
        if non_finite == "skip" and hook.step_skipped():
            continue
        with torch.no_grad():
            for p in list(ddp.parameters()) + [table]:
                if p.grad is not None:
                    p -= 0.1 * p.grad
    hook.wait()
    return [p.detach().clone() for p in model.parameters()] + [table.detach().clone()], state(hook)


@check
def skipping_covers_the_alltoall_and_the_dct_mp_cut(rank, size):
    steps = range(5)
    want = train_cut(rank, size, [s for s in steps if s != BAD_STEP], None, -1, "fail")
    for where in ("alltoall rows", "alltoall grads", "cut grads"):
        got = train_cut(rank, size, steps, where, size - 1, "skip")
        for i, (a, b) in enumerate(zip(got[0], want[0])):
            assert torch.equal(a, b), f"{where}: parameter {i} differs from the run without step {BAD_STEP}'s batch"
        assert got[1] == want[1], f"{where}: the hook's state differs from the run without that batch"
