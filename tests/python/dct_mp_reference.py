"""The plain reference of a DCT-MP cut for the tests: per sample (row) the
top (1 - eta) magnitudes by a stable sort, ties to the lower columns."""
import math

import torch


def reference_mask(x, eta):
    """(mask like x, keep): keep = d - floor(d * eta), in double with the
    1e-9 slack that makes 0.95 of 20 drop 19."""
    x2 = x.reshape(-1, x.shape[-1])
    d = x2.shape[1]
    keep = d - math.floor(d * eta + 1e-9)
    order = torch.sort(-x2.abs(), dim=1, stable=True).indices[:, :keep]
    mask = torch.zeros_like(x2, dtype=torch.bool)
    mask.scatter_(1, order, True)
    return mask.reshape(x.shape), keep


def rounded(x, values):
    """x as the wire carries it: f32 as is, bf16 rounded to nearest even (torch's conversion)."""
    return x if values == "f32" else x.bfloat16().float()


class _MaskedRounded(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask, values):
        ctx.mask, ctx.values = mask, values
        return torch.where(mask, rounded(x, values), torch.zeros_like(x))

    @staticmethod
    def backward(ctx, g):
        return torch.where(ctx.mask, rounded(g, ctx.values), torch.zeros_like(g)), None, None


class ReferenceCut(torch.nn.Module):
    """x under its reference mask, values as the wire carries them; autograd
    sends the gradient back under the same mask, rounded the same way."""

    def __init__(self, eta, values="f32"):
        super().__init__()
        self.eta, self.values = eta, values

    def forward(self, x):
        return _MaskedRounded.apply(x, reference_mask(x.detach(), self.eta)[0], self.values)
