"""The three per-step operations of examples/dlrm_ddp.py that it does its own
way, timed against the plain PyTorch way on one thread (median of --reps
calls, ms), with a check that both give the same result:

    .venv/bin/python bench/dlrm_ddp_ops.py [--data-path data/synth-bin]

- the tables' SGD update: an accumulating index_put_ against index_add_
  (13312 rows of 16: a 2048 batch's lookups in 6.5 tables, a rank's share
  of 26 tables on 4 ranks);
- the batch's records: np.take against fancy indexing of the memory-mapped
  training file (2048 random records);
- the dot interaction, forward + backward at 512 x 27 x 16: the example's
  (numpy's batched matmul) against torch.bmm.
"""
import argparse
import ctypes
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import dlrm_ddp  # noqa: E402
from sparq.dlrm import NUM_SPARSE, read_bin  # noqa: E402


def median_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def bmm_interaction(z, pairs):
    """The same products through torch.bmm (what autograd-free PyTorch code writes)."""
    out = torch.bmm(z, z.transpose(1, 2)).flatten(1).index_select(1, pairs)

    def backward(grad):
        n = z.shape[1]
        g = z.new_zeros(z.shape[0], n * n).index_copy_(1, pairs, grad).view(-1, n, n)
        return torch.bmm(g + g.transpose(1, 2), z)
    return out, backward


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-path", default="data/synth-bin", help="sparq gen-data --format bin output")
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    try:
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(1)
    except (OSError, AttributeError):
        pass
    g = torch.Generator().manual_seed(1)
    rows = []

    weight = torch.randn(7 * 100000, 16, generator=g)
    idx = torch.randint(0, len(weight), (13312,), generator=g)
    grad = torch.randn(len(idx), 16, generator=g)
    a = weight.clone().index_add_(0, idx, grad * -0.025)
    b = weight.clone().index_put_((idx,), grad * -0.025, accumulate=True)
    assert torch.equal(a, b)
    rows.append(("tables' update", median_ms(lambda: weight.index_add_(0, idx, grad * -0.025), args.reps),
                 median_ms(lambda: weight.index_put_((idx,), grad * -0.025, accumulate=True), args.reps)))

    train = read_bin(os.path.join(args.data_path, "train.bin"))
    order = np.random.default_rng(1).permutation(len(train))
    pick = [order[i * 2048:(i + 1) * 2048] for i in range(args.reps + 1)]
    assert np.array_equal(train[pick[0]], np.take(train, pick[0]))
    it = iter(range(10 ** 9))
    rows.append(("batch's records", median_ms(lambda: train[pick[next(it) % len(pick)]], args.reps),
                 median_ms(lambda: np.take(train, pick[next(it) % len(pick)]), args.reps)))

    b, n, d = 512, NUM_SPARSE + 1, 16
    z = torch.randn(b, n, d, generator=g)
    li, lj = torch.tril_indices(n, n, offset=-1)
    pos = torch.randperm(n, generator=g)
    pairs = pos[li] * n + pos[lj]
    up = torch.randn(b, len(pairs), generator=g)

    def ours():
        zz = z.clone().requires_grad_()
        dlrm_ddp.Interaction.apply(zz, pairs).backward(up)
        return zz.grad

    def theirs():
        out, backward = bmm_interaction(z, pairs)
        return backward(up)

    assert torch.equal(ours(), theirs())
    assert torch.equal(dlrm_ddp.Interaction.apply(z, pairs), bmm_interaction(z, pairs)[0])
    rows.append(("interaction fwd+bwd", median_ms(theirs, args.reps), median_ms(ours, args.reps)))

    print(f"{'operation':<22}{'PyTorch way':>14}{'dlrm_ddp.py':>14}   (ms, median of {args.reps}, one thread)")
    for name, base, new in rows:
        print(f"{name:<22}{base:>14.3f}{new:>14.3f}   {base / new:.1f}x")


if __name__ == "__main__":
    main()
