#!/usr/bin/env python3
"""The DCT paper's Figure 5 from scripts/reproduce-mp's runs: the mean
per-sample top-K threshold of X_act at the first cut over training, at 75/90/95%
sparsity, measured without compression (solid) and with DCT-MP at that level
(dotted).  usage: plot-fig5.py RUNS_DIR OUT.png"""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(path):
    ev = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    pts = [(e["step"], e["mean"]) for e in ev if e["event"] == "threshold"]
    return [p[0] for p in pts], [p[1] for p in pts]


def main():
    runs, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    fig, ax = plt.subplots(figsize=(7, 4))
    for eta, color in (("0.75", "tab:blue"), ("0.90", "tab:orange"), ("0.95", "tab:green")):
        plain = runs / ("mp1_bot2_0_s1.jsonl" if eta == "0.95" else f"fig5_none_{eta}.jsonl")
        dct = runs / f"mp1_bot2_{eta}_s1.jsonl"
        for path, style, label in ((plain, "-", f"{eta[2:]}% sparsity, no compression"),
                                   (dct, ":", f"{eta[2:]}% sparsity, DCT-MP applied")):
            if path.exists():
                x, y = series(path)
                ax.plot(x, y, style, color=color, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("mean per-sample top-K threshold of X_act")
    ax.set_title("X_act after the 2nd bottom layer (2 workers, --mp-splits bot:2)")
    ax.legend(fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
