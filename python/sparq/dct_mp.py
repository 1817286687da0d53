"""DCT-MP at a cut of any PyTorch model (Gupta et al., KDD'21, Algorithm 2).

Per sample (a row of the cut's activations; every leading index of a
(..., features) tensor is a sample, e.g. a token of a sequence) only the
largest (1 - eta) of the magnitudes go forward, as values and a mask in
sparq's DCT-MP wire format; on the way back the activation gradients are
kept at the same positions and sent as values alone::

    ffn = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), sparq.torch.DctMp(0.95, "enc5"), nn.Linear(1024, 512))

In one process the cut runs the whole wire round trip (select, encode,
validate, decode), so a model trains exactly as it would split at that cut,
and the bytes that would cross are counted. sparq.torch.PipelineStage runs
the same cut between processes. In eval mode the mask is applied as in
training (the model was trained with it) unless dense_eval is set.
"""
import math

import numpy as np
import torch
from torch import nn

from . import _sparq, non_finite
from .non_finite import check_mode as non_finite_mode


class CutStats:
    """What crossed one cut: bytes of the forward messages (mask + values) and
    backward messages (values), what dense fp32 would have taken, and the
    per-sample thresholds (the smallest kept magnitude of each row) of the
    last forward and over all of them."""

    def __init__(self, name):
        self.name = name
        self.forwards = 0
        self.fwd_bytes = 0
        self.bwd_bytes = 0
        self.dense_fwd_bytes = 0
        self.dense_bwd_bytes = 0
        self.threshold_sum = 0.0
        self.threshold_rows = 0
        self.last_threshold = None  # (mean, min, max) over the rows of the last forward

    def record_forward(self, mask, message, values="f32"):
        self.forwards += 1
        self.fwd_bytes += message.nbytes
        self.dense_fwd_bytes += mask.rows * mask.cols * 4
        if mask.rows and mask.keep:
            tail = message[mask.rows * ((mask.cols + 7) // 8):]
            kept = tail.view(np.float32) if values == "f32" else (tail.view(np.uint16).astype(np.uint32) << 16).view(
                np.float32)
            t = np.abs(kept.reshape(mask.rows, mask.keep)).min(axis=1)
            self.last_threshold = (float(t.mean(dtype=np.float64)), float(t.min()), float(t.max()))
            self.threshold_sum += float(t.sum(dtype=np.float64))
            self.threshold_rows += mask.rows

    def record_backward(self, mask, message):
        self.bwd_bytes += message.nbytes
        self.dense_bwd_bytes += mask.rows * mask.cols * 4

    def as_dict(self):
        ratio = lambda dense, sent: dense / sent if sent else math.nan  # noqa: E731
        return {
            "cut": self.name,
            "forwards": self.forwards,
            "fwd_bytes": self.fwd_bytes,
            "bwd_bytes": self.bwd_bytes,
            "fwd_reduction": ratio(self.dense_fwd_bytes, self.fwd_bytes),
            "bwd_reduction": ratio(self.dense_bwd_bytes, self.bwd_bytes),
            "mean_threshold": self.threshold_sum / self.threshold_rows if self.threshold_rows else math.nan,
            "last_threshold": self.last_threshold,
        }


def rows_of(x, what):
    """x as a contiguous (rows, features) float32 CPU tensor; `what` names the
    cut in errors."""
    if x.dim() < 2:
        raise _sparq.InputError(f"{what}: a {x.dim()}-D tensor {tuple(x.shape)}; a cut takes (samples, features) "
                                "or (..., features), one row per sample")
    if x.dtype != torch.float32:
        raise _sparq.InputError(f"{what}: {x.dtype} activations; DCT-MP's wire format carries float32")
    if x.device.type not in ("cpu", "cuda"):
        raise _sparq.InputError(f"{what}: a tensor on {x.device}; sparq takes CPU tensors and stages CUDA ones")
    return x.detach().reshape(-1, x.shape[-1]).cpu().contiguous()


def check_eta(eta, what):
    if not isinstance(eta, (int, float)) or not 0 <= eta < 1:
        raise _sparq.InputError(f"{what}: sparsity eta {eta!r} outside [0, 1)")


def check_values(values, what):
    if values not in ("f32", "bf16"):
        raise _sparq.InputError(f"{what}: values '{values}'; they are f32 or bf16")


def select(x2, eta, values, what):
    """The forward side of a cut: (RowMask, message) for rows x2."""
    try:
        return _sparq.dct_mp_forward(x2.numpy(), x2.shape[1], float(eta), values)
    except _sparq.Error as e:
        raise type(e)(f"{what}: {e}") from None


def receive(message, rows, cols, keep, values, what):
    """The other side: the dense rows of a forward message, and its mask."""
    out = torch.empty(rows, cols)
    try:
        mask = _sparq.dct_mp_receive(message, rows, cols, keep, out.numpy(), values)
    except _sparq.Error as e:
        raise type(e)(f"{what}: {e}") from None
    return out, mask


def check_finite(t, what, matrix):
    """NonFiniteError naming `what` and the matrix for t's first NaN or inf,
    as the C++ codecs name theirs."""
    bad = (~torch.isfinite(t)).view(-1).nonzero()
    if bad.numel():
        i = int(bad[0, 0])
        raise _sparq.NonFiniteError(f"{what}: the {matrix} matrix holds {float(t.view(-1)[i])} at {i} of {t.numel()}")


def gather(mask, grad2, values, what):
    """The backward message: the gradient rows at the mask's positions. A NaN
    or inf in grad2 raises NonFiniteError, as the forward's selection does."""
    check_finite(grad2, what, "gradient")
    packed = torch.empty(mask.rows * mask.keep)
    _sparq.dct_mp_gather(mask, grad2.numpy(), packed.numpy())
    return _sparq.dct_mp_values_encode(packed.numpy(), values)


def scatter(mask, message, values, what):
    """The dense gradient rows of a backward message."""
    packed, dense = torch.empty(mask.rows * mask.keep), torch.empty(mask.rows, mask.cols)
    try:
        _sparq.dct_mp_values_decode(message, packed.numpy(), values)
    except _sparq.Error as e:
        raise type(e)(f"{what}: {e}") from None
    _sparq.dct_mp_scatter(mask, packed.numpy(), dense.numpy())
    return dense


class _Cut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, eta, values, stats, skip):
        what = f"DCT-MP cut '{stats.name}'"
        x2 = rows_of(x, what)
        if skip:  # a NaN or inf crosses as 0, the step marked (non_finite.py)
            x2 = non_finite.zeroed(x2)
        mask, message = select(x2, eta, values, what)
        stats.record_forward(mask, message, values)
        out, _ = receive(message, mask.rows, mask.cols, mask.keep, values, what)
        ctx.mask, ctx.values, ctx.stats, ctx.shape, ctx.device, ctx.skip = mask, values, stats, x.shape, x.device, skip
        return out.reshape(x.shape).to(x.device)

    @staticmethod
    def backward(ctx, grad):
        mask = ctx.mask
        g2 = grad.detach().reshape(-1, mask.cols).float().cpu().contiguous()
        if ctx.skip:
            g2 = non_finite.zeroed(g2)
        message = gather(mask, g2, ctx.values, f"DCT-MP cut '{ctx.stats.name}'")
        ctx.stats.record_backward(mask, message)
        dense = scatter(mask, message, ctx.values, f"DCT-MP cut '{ctx.stats.name}'")
        return dense.reshape(ctx.shape).to(ctx.device), None, None, None, None


def dct_mp(x, eta, stats, values="f32", non_finite="fail"):
    """DCT-MP on x at one cut (its statistics in `stats`, a CutStats): the
    largest (1 - eta) magnitudes of every row (ties to the lower columns),
    zeros elsewhere; the gradient goes back under the same mask. values:
    f32, or bf16 (sparq's extension: both directions' values rounded to
    bfloat16, half the value bytes). non_finite: a NaN or inf in x (or,
    backward, its gradient) raises sparq.NonFiniteError naming the cut
    ("fail"), or ("skip") crosses as 0 and marks the step for a skipping
    hook's step_skipped()."""
    check_eta(eta, f"DCT-MP cut '{stats.name}'")
    check_values(values, f"DCT-MP cut '{stats.name}'")
    skip = non_finite_mode(non_finite, f"DCT-MP cut '{stats.name}'")
    return _Cut.apply(x, eta, values, stats, skip)


class DctMp(nn.Module):
    """DCT-MP at a cut, as a layer: put it where a model-parallel split
    would be (the paper: after a ReLU). `stats` counts what crosses."""

    def __init__(self, eta, name="cut", *, values="f32", dense_eval=False, non_finite="fail"):
        super().__init__()
        check_eta(eta, f"DCT-MP cut '{name}'")
        check_values(values, f"DCT-MP cut '{name}'")
        self.skip = non_finite_mode(non_finite, f"DCT-MP cut '{name}'")
        self.eta, self.values = eta, values
        self.dense_eval = dense_eval
        self.stats = CutStats(name)

    def forward(self, x):
        if not self.training and self.dense_eval:
            return x
        return _Cut.apply(x, self.eta, self.values, self.stats, self.skip)

    def extra_repr(self):
        return (f"eta={self.eta}, name='{self.stats.name}'" + (", values='bf16'" if self.values == "bf16" else "")
                + (", dense_eval=True" if self.dense_eval else "") + (", non_finite='skip'" if self.skip else ""))
