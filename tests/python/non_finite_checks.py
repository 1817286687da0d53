"""The bridge's checks of a NaN or inf entering sparq's codecs (bridge_test.py
runs them on every rank), injected into one tensor's gradient at a chosen
step by a tensor hook, so that it reaches the last bucket DDP exchanges:
  - non_finite="fail": the hook stops that step, naming the rank, the step,
    the tensor and the bucket, with the codec's state as before the step;
    the alltoall stops forward and backward alike (every rank injects, so
    every rank stops before sending: no rank waits for another);
  - non_finite="skip": the step is skipped on every rank (one rank
    injects), and the run ends where a run without that batch ends,
    parameters and codec state bit for bit."""
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


def train(rank, make, steps, bad_ranks, value=math.nan, layer=0, at=(3, 1)):
    """SGD at 0.1 over `steps` (batch shifted by the step) under DDP with
    the hook make(model) (stored in `trained`); at BAD_STEP, on `bad_ranks`,
    the weight gradient of model[layer] gets `value` at `at` (layer 0's
    bucket is DDP's last, layer 4's its first). The update is skipped where
    the hook skipped the step. Returns the model and the hook."""
    model, x, y = model_and_batch(rank)
    hook = make(model)
    trained.append(hook)
    ddp = DDP(model, bucket_cap_mb=0.005)
    ddp.register_comm_hook(None, hook)
    current = {}

    def inject(g):
        if current["step"] == BAD_STEP and rank in bad_ranks:
            g = g.clone()
            g[at] = value
        return g

    model[layer].weight.register_hook(inject)
    for s in steps:
        current["step"] = s
        ddp.zero_grad(set_to_none=True)
        nn.functional.mse_loss(ddp(x + s), y).backward()
        if not hook.skipped:
            with torch.no_grad():
                for p in ddp.parameters():
                    p -= 0.1 * p.grad
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
        got, skipping = train(rank, make, steps, [size - 1])
        assert skipping.skipped_steps == 1 and skipping.step == len(steps) - 1, \
            f"{name}: {skipping.skipped_steps} skipped, at step {skipping.step}"
        want, plain = train(rank, make, [s for s in steps if s != BAD_STEP], [])
        for (n, a), b in zip(got.named_parameters(), want.parameters()):
            assert torch.equal(a, b), f"{name}: {n} differs from the run without step {BAD_STEP}'s batch"
        assert state(skipping) == state(plain), f"{name}: the codec's state differs from the run without that batch"
