"""sparq.torch.PipelineStage on every rank of bridge_test.py's runs (rank s
runs stage s): GPipe over sparq's transport against the unsplit model
trained in one process, with the plain reference cut at the same places;
bytes per cut from the transport's counters against the closed form;
stages that disagree raise, naming stage and cut, instead of waiting."""
import time

import torch
from torch import nn

import sparq
import sparq.torch as st
from dct_mp_reference import ReferenceCut

CHECKS = []
WIDTH, ROWS, MICRO, STEPS = 40, 24, 3, 3


def check(fn):
    CHECKS.append(fn)
    return fn


def stages(size, width=WIDTH):
    """The parts of one MLP, the same on every rank: every cut after a ReLU."""
    torch.manual_seed(0)
    parts = [nn.Sequential(nn.Linear(12, width), nn.ReLU())]
    parts += [nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(size - 2)]
    parts.append(nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)))
    return parts


def batches():
    g = torch.Generator().manual_seed(5)
    return [(torch.randn(ROWS, 12, generator=g), torch.randn(ROWS, 1, generator=g)) for _ in range(STEPS)]


def sgd(module):
    with torch.no_grad():
        for p in module.parameters():
            p -= 0.05 * p.grad
            p.grad = None


def train_pipeline(rank, size, eta, values):
    part = stages(size)[rank]
    stage = st.PipelineStage(part, eta=eta, values=values)
    losses = []
    for x, y in batches():
        losses.append(stage.step(x if rank == 0 else None, y if rank == size - 1 else None,
                                 loss_fn=nn.functional.mse_loss, micro_batches=MICRO))
        sgd(part)
    stage.counters = stage.comm.counters()
    stage.close()
    return part, stage, losses


def train_reference(size, eta, values):
    """The unsplit model with the reference cut (or none) between the parts,
    the same micro-batches' losses weighted by their rows, backward in the
    pipeline's order (last micro-batch first)."""
    parts = stages(size)
    layers = []
    for i, p in enumerate(parts):
        layers.append(p)
        if i + 1 < len(parts) and eta is not None:
            layers.append(ReferenceCut(eta, values))
    model = nn.Sequential(*layers)
    losses = []
    for x, y in batches():
        mb = [nn.functional.mse_loss(model(xm), ym) * (ym.shape[0] / ROWS)
              for xm, ym in zip(x.tensor_split(MICRO), y.tensor_split(MICRO))]
        for loss in reversed(mb):
            loss.backward()
        losses.append(sum(loss.item() for loss in mb))
        sgd(model)
    return parts, losses


def pipeline_trains_as_the_unsplit_model(rank, size, eta, values="f32"):
    part, stage, losses = train_pipeline(rank, size, eta, values)
    ref_parts, ref_losses = train_reference(size, eta, values)
    for (n, p), q in zip(part.named_parameters(), ref_parts[rank].parameters()):
        assert torch.equal(p, q), f"stage {rank} parameter {n} at eta {eta}: max diff {(p - q).abs().max()}"
    if rank == size - 1:
        assert losses == ref_losses, (losses, ref_losses)
    return stage


@check
def pipeline_dense_and_at_eta_0_trains_as_the_unsplit_model(rank, size):
    pipeline_trains_as_the_unsplit_model(rank, size, None)
    pipeline_trains_as_the_unsplit_model(rank, size, 0.0)


@check
def pipeline_with_dct_mp_trains_as_the_reference_cuts_and_counts_its_bytes(rank, size):
    for values, vb in (("f32", 4), ("bf16", 2)):
        counts_its_bytes(rank, size, pipeline_trains_as_the_unsplit_model(rank, size, 0.9, values), vb)


def counts_its_bytes(rank, size, stage, vb):
    keep = WIDTH - int(WIDTH * 0.9)
    header, messages = 16, STEPS * MICRO
    rows = [len(r) for r in torch.arange(ROWS).tensor_split(MICRO)] * STEPS
    per_peer = stage.counters["per_peer"]
    if rank + 1 < size:  # the cut after this stage: forward messages, mask + values
        want = sum(header + r * ((WIDTH + 7) // 8) + r * keep * vb for r in rows)
        assert per_peer[rank + 1]["bytes_sent"] == want, (per_peer[rank + 1], want)
        assert per_peer[rank + 1]["msgs_sent"] == messages
        s = stage.stats.as_dict()
        assert s["fwd_bytes"] + header * messages == want and s["bwd_bytes"] == sum(r * keep * vb for r in rows)
    if rank > 0:  # the cut before: gradients, values only
        want = sum(header + r * keep * vb for r in rows)
        assert per_peer[rank - 1]["bytes_sent"] == want, (per_peer[rank - 1], want)


@check
def evaluation_applies_the_mask_unless_dense_eval(rank, size):
    x = torch.randn(ROWS, 12, generator=torch.Generator().manual_seed(9))
    for dense_eval, eta in ((False, 0.9), (True, None)):
        stage = st.PipelineStage(stages(size)[rank], eta=0.9, dense_eval=dense_eval)
        out = stage.forward(x if rank == 0 else None, micro_batches=2)
        stage.close()
        if rank == size - 1:
            layers = []
            for i, p in enumerate(stages(size)):
                layers += [p] + ([ReferenceCut(eta)] if eta is not None and i + 1 < size else [])
            with torch.no_grad():
                assert torch.equal(out, nn.Sequential(*layers)(x))


def expect_failure(rank, size, parts_eta, failing_stage, pattern):
    """Every stage raises: the failing one its own error, the others a
    PipelineError naming themselves and their cut; nobody waits for long."""
    part, eta = parts_eta
    stage = st.PipelineStage(part, eta=eta)
    x, y = batches()[0]
    t0 = time.monotonic()
    try:
        stage.step(x if rank == 0 else None, y if rank == size - 1 else None,
                   loss_fn=nn.functional.mse_loss, micro_batches=MICRO)
        raise AssertionError(f"stage {rank} did not fail")
    except sparq.Error as e:
        text = str(e)
        if rank != failing_stage:
            assert isinstance(e, st.PipelineError), repr(e)
    except RuntimeError as e:  # the failing stage's own torch error, renamed
        text = str(e)
    finally:
        stage.close()
    assert time.monotonic() - t0 < 20, "a stage waited for the failed one"
    assert f"sparq pipeline stage {rank} of {size}" in text, text
    assert pattern in text, (pattern, text)


@check
def stages_whose_eta_differ_all_raise(rank, size):
    eta = 0.95 if rank == 1 else 0.9
    expect_failure(rank, size, (stages(size)[rank], eta), 1, "the stages' eta differ")


@check
def stages_whose_shapes_differ_all_raise(rank, size):
    part = stages(size)[rank]
    if rank == 1:
        part[0] = nn.Linear(WIDTH + 3, WIDTH)  # takes another width than stage 0 sends
    expect_failure(rank, size, (part, 0.9), 1, "stage 1 of")


@check
def a_dense_stage_beside_a_dct_mp_stage_is_an_error(rank, size):
    expect_failure(rank, size, (stages(size)[rank], None if rank == 0 else 0.9), 1,
                   "stage 0 sends dense activations, this stage expects DCT-MP")


@check
def a_stage_output_that_is_not_2d_per_sample_is_an_error(rank, size):
    part = stages(size)[rank]
    if rank == 0:
        part.append(nn.Unflatten(1, (WIDTH // 4, 4)))
    expect_failure(rank, size, (part, 0.9), 0, "cut 0 (stage 0 -> 1): an output of shape (8, 10, 4)")
