#!/usr/bin/env python3
"""A PyTorch DLRM equal to what `sparq train` runs, timed the same way.

A measuring stick only (not a dependency): it builds the model the way the
DLRM reference (dlrm_s_pytorch.py, --data-generation=random) does -- sum
EmbeddingBags with sparse gradients, Linear+ReLU MLPs (no ReLU on the last top
layer, then sigmoid), pairwise dot interaction (strictly lower triangle,
concatenated with the bottom-MLP output), BCE loss (mean), plain SGD -- and
times forward + loss + backward + update on batches already in memory.

  OMP_NUM_THREADS=2 LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
    python3 scripts/dlrm_torch_bench.py --mini-batch-size 1024 --threads 2

Prints one line per repetition and the median samples/s.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def mlp(widths, relu_last):
    layers = []
    for i in range(len(widths) - 1):
        fan_in, fan_out = widths[i], widths[i + 1]
        lin = nn.Linear(fan_in, fan_out, bias=True)
        # The reference's init: W ~ N(0, sqrt(2/(in+out))), b ~ N(0, sqrt(1/out)).
        with torch.no_grad():
            lin.weight.normal_(0.0, (2.0 / (fan_in + fan_out)) ** 0.5)
            lin.bias.normal_(0.0, (1.0 / fan_out) ** 0.5)
        layers.append(lin)
        if i + 2 < len(widths) or relu_last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Dlrm(nn.Module):
    def __init__(self, bot, top, rows, dim):
        super().__init__()
        self.bot = mlp(bot, relu_last=True)
        self.tables = nn.ModuleList()
        for n in rows:
            e = nn.EmbeddingBag(n, dim, mode="sum", sparse=True)
            with torch.no_grad():
                a = (1.0 / n) ** 0.5
                e.weight.uniform_(-a, a)
            self.tables.append(e)
        m = len(rows) + 1
        self.li, self.lj = torch.tril_indices(m, m, offset=-1)
        self.top = mlp([dim + m * (m - 1) // 2] + top, relu_last=False)

    def forward(self, dense, offsets, indices):
        x = self.bot(dense)
        embs = [t(indices[k], offsets[k]) for k, t in enumerate(self.tables)]
        v = torch.cat([x] + embs, dim=1).view(x.shape[0], -1, x.shape[1])
        z = torch.bmm(v, v.transpose(1, 2))[:, self.li, self.lj]
        return torch.sigmoid(self.top(torch.cat([x, z], dim=1)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch-mlp-bot", default="13-512-256-64-16")
    p.add_argument("--arch-mlp-top", default="512-256-1")
    p.add_argument("--arch-embedding-size", default="100000")
    p.add_argument("--arch-sparse-feature-size", type=int, default=16)
    p.add_argument("--num-tables", type=int, default=26)
    p.add_argument("--mini-batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--num-batches", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    g = torch.Generator().manual_seed(a.seed)
    bot = [int(v) for v in a.arch_mlp_bot.split("-")]
    top = [int(v) for v in a.arch_mlp_top.split("-")]
    rows = [int(v) for v in a.arch_embedding_size.split("-")]
    if len(rows) == 1:
        rows = rows * a.num_tables
    B = a.mini_batch_size
    model = Dlrm(bot, top, rows, a.arch_sparse_feature_size)
    opt = torch.optim.SGD(model.parameters(), lr=a.learning_rate)
    loss_fn = nn.BCELoss(reduction="mean")

    # Batches in memory up front: generation is not timed.
    nb = 32
    batches = []
    for _ in range(nb):
        dense = torch.rand((B, bot[0]), generator=g)
        offsets = [torch.arange(B, dtype=torch.int64) for _ in rows]
        indices = [torch.randint(0, n, (B,), generator=g, dtype=torch.int64) for n in rows]
        y = torch.randint(0, 2, (B, 1), generator=g).float()
        batches.append((dense, offsets, indices, y))

    def step(i):
        dense, offsets, indices, y = batches[i % nb]
        opt.zero_grad()
        loss = loss_fn(model(dense, offsets, indices), y)
        loss.backward()
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    rates = []
    for r in range(a.repeats):
        t0 = time.perf_counter()
        for i in range(a.num_batches):
            step(i)
        el = time.perf_counter() - t0
        rates.append(B * a.num_batches / el)
        print(f"torch rep {r}: batch {B}, threads {a.threads}, {1e3 * el / a.num_batches:.2f} ms/it, "
              f"{rates[-1]:.0f} samples/s", flush=True)
    print(f"torch median: {statistics.median(rates):.0f} samples/s (batch {B}, threads {a.threads}, "
          f"torch {torch.__version__})")


if __name__ == "__main__":
    main()
