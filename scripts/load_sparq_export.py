#!/usr/bin/env python3
"""Runs a model exported by `sparq export` in PyTorch, as the DLRM reference's
DLRM_Net (facebookresearch/dlrm dlrm_s_pytorch.py) with its module names, so
its state_dict loads the export unchanged:

  emb_l.{k}.weight            EmbeddingBag k (mode "sum"), rows x dim
  bot_l.{2i}.weight / .bias   bottom Sequential: Linear, ReLU, Linear, ReLU, ...
  top_l.{2i}.weight / .bias   top Sequential: Linear, ReLU, ..., Linear, Sigmoid
  interaction: dot, without self-interaction; T = [bottom output, emb_0..]
  Z = T T^T, its strictly lower triangle (i outer, j < i), R = [x, Zflat]

The inputs are sparq's data (TSV or sparq binary): dense = log(1 + max(x, 0)),
each categorical value mapped to its row as sparq does (sparq_records.py).

  load_sparq_export.py MODEL.npz DATA [--out scores.tsv] [--batch 4096]

Prints the log loss, accuracy and AUC; --out writes one click probability per
line in data order (as `sparq predict`).
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn

from sparq_records import categorical_rows, read_records


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(len(ln) - 1):
            layers.append(nn.Linear(int(ln[i]), int(ln[i + 1]), bias=True))
            layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
        return nn.Sequential(*layers)

    def __init__(self, m_spa, ln_emb, ln_bot, ln_top):
        super().__init__()
        self.emb_l = nn.ModuleList([nn.EmbeddingBag(int(n), int(m_spa), mode="sum") for n in ln_emb])
        self.bot_l = self.create_mlp(ln_bot, -1)
        self.top_l = self.create_mlp(ln_top, len(ln_top) - 2)

    def interact_features(self, x, ly):
        batch_size, d = x.shape
        T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        _, ni, nj = Z.shape
        li = torch.tensor([i for i in range(ni) for j in range(i)])
        lj = torch.tensor([j for i in range(nj) for j in range(i)])
        return torch.cat([x, Z[:, li, lj]], dim=1)

    def forward(self, dense_x, lS_o, lS_i):
        x = self.bot_l(dense_x)
        ly = [E(lS_i[k], lS_o[k]) for k, E in enumerate(self.emb_l)]
        return self.top_l(self.interact_features(x, ly))


def layer_sizes(state, prefix):
    idx = sorted(int(k.split(".")[1]) for k in state if k.startswith(prefix + ".") and k.endswith(".weight"))
    ws = [state[f"{prefix}.{i}.weight"] for i in idx]
    if idx != list(range(0, 2 * len(idx), 2)):
        raise SystemExit(f"{prefix}: layers {idx}, expected 0, 2, 4, ...")
    return [ws[0].shape[1]] + [w.shape[0] for w in ws]


def load_model(path):
    with np.load(path) as z:
        state = {k: torch.from_numpy(z[k]) for k in z.files}
    ntables = sum(1 for k in state if k.startswith("emb_l."))
    ln_emb = [state[f"emb_l.{k}.weight"].shape[0] for k in range(ntables)]
    m_spa = state["emb_l.0.weight"].shape[1]
    net = DLRM_Net(m_spa, ln_emb, layer_sizes(state, "bot_l"), layer_sizes(state, "top_l"))
    net.load_state_dict(state, strict=True)
    return net.eval(), ln_emb


def auc(scores, labels):
    """Exact ROC AUC, tied scores sharing their average rank (as sparq's roc_auc)."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = ((ends - counts + 1 + ends) / 2)[inverse]
    pos = labels > 0.5
    p, n = pos.sum(), len(labels) - pos.sum()
    return 0.5 if p == 0 or n == 0 else (ranks[pos].sum() - p * (p + 1) / 2) / (p * n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="the .npz written by `sparq export`")
    ap.add_argument("data", help="sparq TSV or binary records")
    ap.add_argument("--out", help="write one score per line here")
    ap.add_argument("--batch", type=int, default=4096)
    a = ap.parse_args()
    net, ln_emb = load_model(a.model)
    labels, dense, cats = read_records(a.data)
    if len(ln_emb) != cats.shape[1]:
        raise SystemExit(f"{a.model}: {len(ln_emb)} tables, the data has {cats.shape[1]} categorical features")
    rows = [categorical_rows(cats[:, t], t, n) for t, n in enumerate(ln_emb)]
    scores = []
    with torch.no_grad():
        for b in range(0, len(labels), a.batch):
            e = min(b + a.batch, len(labels))
            lS_i = [torch.from_numpy(r[b:e]) for r in rows]
            lS_o = [torch.arange(e - b) for _ in rows]
            scores.append(net(torch.from_numpy(dense[b:e]), lS_o, lS_i).view(-1).numpy())
    p = np.concatenate(scores).astype(np.float64)
    q = np.clip(p, 1e-12, 1 - 1e-12)
    loss = -np.mean(labels * np.log(q) + (1 - labels) * np.log(1 - q))
    acc = np.mean((p > 0.5) == (labels > 0.5))
    print(f"{len(p)} samples: loss {loss:.6f}, accuracy {100 * acc:.3f} %, auc {auc(p, labels):.6f}")
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(f"{float(x):.9g}\n" for x in p)
        os.replace(tmp, a.out)


if __name__ == "__main__":
    sys.exit(main())
