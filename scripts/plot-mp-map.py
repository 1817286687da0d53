#!/usr/bin/env python3
"""The figure of scripts/reproduce-mp map: per generated set (Zipf exponent x
teacher AUC) and eta, the mean paired test loss change of DCT-MP against
eta 0 with its 95 % interval, and the pooled mean over all sets.

    .venv/bin/python scripts/plot-mp-map.py docs/data/mp/map docs/figures/mp_map.png
"""
import importlib.util
import pathlib
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

spec = importlib.util.spec_from_file_location("summarize_dp", pathlib.Path(__file__).with_name("summarize-dp.py"))
sdp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sdp)


def change(pairs):
    rel = [100 * (r["test"]["loss"] / b["test"]["loss"] - 1) for r, b in pairs]
    m = statistics.fmean(rel)
    return m, sdp.T975[len(rel) - 1] * statistics.stdev(rel) / len(rel) ** 0.5


def main():
    g = sdp.runs(pathlib.Path(sys.argv[1]))
    sets = sorted({k.rsplit("_", 1)[0] for k in g if k.endswith("_0")})
    labels = [f"Zipf {s.split('_')[0][1:]}\nAUC {s.split('_')[1][1:]}" for s in sets] + ["all sets"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for shift, eta, color in ((-0.12, "0.90", "tab:blue"), (0.12, "0.95", "tab:red")):
        pooled, points = [], []
        for s in sets:
            pairs = sdp.paired(g.get(f"{s}_{eta}", []), g.get(f"{s}_0", []))
            pooled += pairs
            points.append(change(pairs))
        points.append(change(pooled))
        xs = [i + shift for i in range(len(points))]
        ax.errorbar(xs, [m for m, _ in points], yerr=[h for _, h in points], fmt="o", color=color, capsize=3,
                    label=f"eta {eta}")
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("test loss change vs eta 0 (%)")
    ax.set_title("DCT-MP, 2 workers (bot:2), batch 256: mean of paired seeds, 95 % interval", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
