#!/usr/bin/env python3
"""Where DCT-MP's test loss goes on DLRM: paired models (eta 0 and eta > 0, the
same seed), exported by `sparq export` (the DCT-MP one with --dense-cuts), run
in PyTorch on the test set with the cut's per-sample top-k applied as sparq
applies it at test time, and the per-sample loss change taken apart:

  - the cut's statistics in both models: active units a sample, the fraction
    of the activation energy the top-k keeps, the per-sample threshold's
    spread, how many of the cut's units the top-k ever selects;
  - which samples carry the change: by the fraction of energy the top-k keeps,
    by how many of the sample's embedding rows were rare in training, by label.

  analyze-mp-cost.py --data DIR --cut-layer 2 --eta 0.95 --out FILE.jsonl \
      SEED:BASE.npz:DCT.npz:DCT_METRICS.jsonl ...
  analyze-mp-cost.py --table FILE.jsonl        # the tables of docs/results.md

One JSON line per seed; the trainer's test loss (the DCT-MP run's --metrics
file) is checked against this script's own: the masked model must reproduce it.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_sparq_export import auc, load_model  # noqa: E402
from sparq_records import categorical_rows, read_records  # noqa: E402

RARE = 5  # an embedding row seen fewer times than this in training is "rare"


def cut_forward(net, dense, rows, cut_layer, keep, batch=8192):
    """Per-sample predictions with the top-`keep` mask at the cut after bottom
    layer `cut_layer` (None: no mask), and the cut's activations."""
    cut_at = 2 * cut_layer  # bot_l holds Linear, ReLU pairs
    preds, acts = [], []
    with torch.no_grad():
        for b in range(0, len(dense), batch):
            e = min(b + batch, len(dense))
            x = net.bot_l[:cut_at](torch.from_numpy(dense[b:e]))
            acts.append(x.numpy().copy())
            if keep is not None:
                idx = torch.topk(x, keep, dim=1, sorted=False).indices
                x = torch.zeros_like(x).scatter_(1, idx, x.gather(1, idx))
            x = net.bot_l[cut_at:](x)
            ly = [E(torch.from_numpy(r[b:e]), torch.arange(e - b)) for E, r in zip(net.emb_l, rows)]
            preds.append(net.top_l(net.interact_features(x, ly)).view(-1).numpy())
    return np.concatenate(preds).astype(np.float64), np.concatenate(acts)


def log_loss(p, y):
    q = np.clip(p, 1e-7, 1 - 1e-7)
    return -(y * np.log(q) + (1 - y) * np.log(1 - q))


def recalibrated(p, y, iters=30):
    """The log loss after the best Platt scaling, sigmoid(a logit(p) + b), fitted
    on (p, y) by Newton's method: what is left is ranking, not calibration."""
    q = np.clip(p, 1e-7, 1 - 1e-7)
    z = np.log(q / (1 - q))
    X = np.stack([z, np.ones_like(z)], 1)
    w = np.array([1.0, 0.0])
    for _ in range(iters):
        s = 1 / (1 + np.exp(-(X @ w)))
        g = X.T @ (s - y)
        H = (X * (s * (1 - s))[:, None]).T @ X
        w -= np.linalg.solve(H, g)
    return float(log_loss(1 / (1 + np.exp(-(X @ w))), y).mean()), w.tolist()


def cut_stats(act, keep):
    """The cut's activations [N, C] under a per-sample top-`keep`."""
    order = np.argsort(-act, axis=1, kind="stable")
    srt = np.take_along_axis(act, order, axis=1)
    energy = (act.astype(np.float64) ** 2).sum(1)
    kept = (srt[:, :keep].astype(np.float64) ** 2).sum(1)
    frac = np.where(energy > 0, kept / np.maximum(energy, 1e-30), 1.0)
    thr = srt[:, keep - 1]
    # how far the first dropped value lies below the threshold, relative to it:
    # near 0 a small change of the input swaps a unit in or out of the top-k
    gap = np.where(thr > 0, (thr - srt[:, keep]) / np.maximum(thr, 1e-30), 1.0)
    selected = np.bincount(order[:, :keep].ravel(), minlength=act.shape[1]) / len(act)
    active = (act > 0).mean(0)
    return frac, gap, {
        "active_units_per_sample": float((act > 0).sum(1).mean()),
        "units_ever_active": int((active > 0).sum()),
        "units_active_1pct": int((active >= 0.01).sum()),
        "kept_energy_mean": float(frac.mean()),
        "kept_energy_p10": float(np.quantile(frac, 0.1)),
        "threshold_cv": float(thr.std() / max(thr.mean(), 1e-30)),
        "relative_gap_median": float(np.median(gap)),
        "units_selected_1pct": int((selected >= 0.01).sum()),
        # the share of all selections that go to the `keep` most selected units
        "top_units_share": float(np.sort(selected)[::-1][:keep].sum() / keep),
    }


def buckets(d, key, edges, labels):
    """Per bucket of `key` (edges: increasing, right-open): its share of the
    samples, of the total loss change, and the mean change."""
    total = d.sum()
    out = []
    for lo, hi, name in zip(edges[:-1], edges[1:], labels):
        m = (key >= lo) & (key < hi)
        out.append({"bucket": name, "samples": float(m.mean()), "mean_change": float(d[m].mean()) if m.any() else 0.0,
                    "share_of_change": float(d[m].sum() / total) if total else 0.0})
    return out


def rare_counts(train_rows, test_rows, ln_emb):
    """How many of each test sample's embedding rows were seen < RARE times in training."""
    n = np.zeros(len(test_rows[0]), np.int32)
    for tr, te, rows in zip(train_rows, test_rows, ln_emb):
        n += np.bincount(tr, minlength=rows)[te] < RARE
    return n


def analyze(spec, a, data):
    seed, base_path, dct_path, metrics = spec.split(":")
    trainer_loss = [json.loads(line) for line in open(metrics) if '"event":"test"' in line][-1]["loss"]
    base, ln_emb = load_model(base_path)
    dct, _ = load_model(dct_path)
    y, dense, rows, rare = data(ln_emb)
    width = base.bot_l[2 * a.cut_layer - 2].out_features
    keep = width - math.floor(width * a.eta)  # sparq's kept_count
    p0, act0 = cut_forward(base, dense, rows, a.cut_layer, None)
    p1, act1 = cut_forward(dct, dense, rows, a.cut_layer, keep)
    l0, l1 = log_loss(p0, y), log_loss(p1, y)
    if abs(l1.mean() - trainer_loss) > 1e-5 * trainer_loss:
        raise SystemExit(f"seed {seed}: the masked model's test loss {l1.mean():.6f} is not the trainer's {trainer_loss}")
    d = l1 - l0
    r0, w0 = recalibrated(p0, y)
    r1, w1 = recalibrated(p1, y)
    frac1, gap1, s1 = cut_stats(act1, keep)
    frac0, _, s0 = cut_stats(act0, keep)
    q = lambda v: np.quantile(v, [0, 0.2, 0.4, 0.6, 0.8]).tolist() + [np.inf]  # noqa: E731
    quint = ["q1 (least kept)", "q2", "q3", "q4", "q5 (most kept)"]
    return {
        "seed": int(seed), "keep": keep, "cut_width": act0.shape[1],
        "test_loss_base": float(l0.mean()), "test_loss_dct": float(l1.mean()),
        "change_percent": float(100 * (l1.mean() / l0.mean() - 1)),
        "positives": float(y.mean()), "mean_prediction_base": float(p0.mean()), "mean_prediction_dct": float(p1.mean()),
        "recalibrated_loss_base": r0, "recalibrated_loss_dct": r1, "platt_base": w0, "platt_dct": w1,
        "recalibrated_change_percent": float(100 * (r1 / r0 - 1)),
        "auc_base": float(auc(p0, y)), "auc_dct": float(auc(p1, y)),
        "cut_base": s0, "cut_dct": s1,
        "by_kept_energy_dct": buckets(d, frac1, q(frac1), quint),
        "by_kept_energy_base": buckets(d, frac0, q(frac0), quint),
        "by_threshold_gap_dct": buckets(d, gap1, q(gap1), ["q1 (smallest gap)", "q2", "q3", "q4", "q5 (largest gap)"]),
        "by_rare_rows": buckets(d, rare, [0, 1, 2, 4, 99], ["0", "1", "2-3", "4+"]),
        "by_label": buckets(d, y, [0, 0.5, 2], ["no click", "click"]),
        "spearman_change_vs_kept_energy": float(spearman(d, frac1)),
    }


def spearman(x, y):
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return np.corrcoef(rx, ry)[0, 1]


def loader(path):
    """The test set and, once per table layout, each test sample's rare-row count."""
    cache = {}

    def data(ln_emb):
        key = tuple(ln_emb)
        if key not in cache:
            y, dense, cats = read_records(os.path.join(path, "test.bin"))
            _, _, tcats = read_records(os.path.join(path, "train.bin"))
            test_rows = [categorical_rows(cats[:, t], t, n) for t, n in enumerate(ln_emb)]
            train_rows = [categorical_rows(tcats[:, t], t, n) for t, n in enumerate(ln_emb)]
            cache[key] = (y.astype(np.float64), dense, test_rows, rare_counts(train_rows, test_rows, ln_emb))
        return cache[key]
    return data


def table(path):
    runs = [json.loads(line) for line in open(path)]
    print(f"Seeds {', '.join(str(r['seed']) for r in runs)}; per-seed values, mean in the last column.\n")
    print("| | " + " | ".join(f"seed {r['seed']}" for r in runs) + " | mean |")
    print("|---|" + "---|" * (len(runs) + 1))
    rows = [("test loss change", lambda r: r["change_percent"], "{:+.2f} %"),
            ("after Platt scaling of each model", lambda r: r["recalibrated_change_percent"], "{:+.2f} %"),
            ("AUC change", lambda r: r["auc_dct"] - r["auc_base"], "{:+.4f}"),
            ("mean prediction - positives, base", lambda r: r["mean_prediction_base"] - r["positives"], "{:+.4f}"),
            ("mean prediction - positives, DCT-MP", lambda r: r["mean_prediction_dct"] - r["positives"], "{:+.4f}")]
    for model in ("base", "dct"):
        for key, fmt in (("active_units_per_sample", "{:.1f}"), ("units_ever_active", "{:.0f}"),
                         ("units_active_1pct", "{:.0f}"), ("units_selected_1pct", "{:.0f}"),
                         ("kept_energy_mean", "{:.3f}"), ("kept_energy_p10", "{:.3f}"), ("threshold_cv", "{:.2f}"),
                         ("relative_gap_median", "{:.4f}")):
            rows.append((f"{model}: {key.replace('_', ' ')}", lambda r, m=model, k=key: r[f"cut_{m}"][k], fmt))
    rows.append(("spearman(change, kept energy)", lambda r: r["spearman_change_vs_kept_energy"], "{:+.3f}"))
    for name, get, fmt in rows:
        vals = [get(r) for r in runs]
        print(f"| {name} | " + " | ".join(fmt.format(v) for v in vals) + f" | {fmt.format(float(np.mean(vals)))} |")
    for key in ("by_kept_energy_dct", "by_kept_energy_base", "by_threshold_gap_dct", "by_rare_rows", "by_label"):
        print(f"\n| {key.replace('_', ' ')} | samples | share of the loss change (mean over seeds) | per seed |")
        print("|---|---|---|---|")
        for i, b in enumerate(runs[0][key]):
            shares = [r[key][i]["share_of_change"] for r in runs]
            print(f"| {b['bucket']} | {100 * np.mean([r[key][i]['samples'] for r in runs]):.1f} % | "
                  f"{100 * np.mean(shares):+.0f} % | " + ", ".join(f"{100 * s:+.0f}" for s in shares) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="*", help="SEED:BASE.npz:DCT.npz:DCT_METRICS.jsonl")
    ap.add_argument("--data", help="the data set's directory (train.bin, test.bin)")
    ap.add_argument("--cut-layer", type=int, default=2, help="the cut follows this bottom layer (--mp-splits bot:N)")
    ap.add_argument("--eta", type=float, default=0.95)
    ap.add_argument("--out", help="append one JSON line per seed here")
    ap.add_argument("--table", help="print the tables of a --out file")
    a = ap.parse_args()
    if a.table:
        return table(a.table)
    if not (a.pairs and a.data and a.out):
        ap.error("pairs, --data and --out are needed (or --table)")
    torch.set_num_threads(2)
    data = loader(a.data)
    for spec in a.pairs:
        result = analyze(spec, a, data)
        with open(a.out, "a") as f:
            f.write(json.dumps(result) + "\n")
        print(f"seed {result['seed']}: {result['change_percent']:+.2f} %", flush=True)


if __name__ == "__main__":
    sys.exit(main())
