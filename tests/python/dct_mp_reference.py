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


class ReferenceCut(torch.nn.Module):
    """x times its reference mask: autograd sends the gradient back under it."""

    def __init__(self, eta):
        super().__init__()
        self.eta = eta

    def forward(self, x):
        return x * reference_mask(x.detach(), self.eta)[0]
