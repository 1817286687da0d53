#!/usr/bin/env python3
"""The tables and the plot of scripts/reproduce-translation: reads
DATA_DIR/runs/*.json (examples/translation.py --out), writes
docs/figures/translation_loss.png and replaces the block between
'<!-- translation:begin -->' and '<!-- translation:end -->' in RESULTS_MD.

Runs with the same seed share the initialisation and the batch order, so
each configuration is compared with the baseline seed by seed: the mean of
the paired differences and its 95 % t-interval.

  summarize-translation.py DATA_DIR RESULTS_MD [--no-figure]
"""
import json
import math
import pathlib
import statistics
import sys

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}  # Student's t, two-sided 95 %


def load(data):
    runs = {}
    for p in sorted(pathlib.Path(data, "runs").glob("*.json")):
        r = json.loads(p.read_text().splitlines()[-1])
        runs[p.stem] = r
    return runs


CUT_NAMES = {1: "enc5", 2: "enc5, dec5", 4: "enc3, dec3, enc5, dec5"}  # translation.py's CUTS


def key(r):
    if r.get("narrow_cuts"):  # no DCT-MP: the FFNs at the cut places this wide
        return ("narrow", r["splits"], r["narrow_cuts"])
    if r.get("hook"):  # TopK SGD runs compare with the fp32 exchange under the same optimizer, rate and length
        return ("dp", r["hook"], r.get("optimizer", "adam"), r.get("lr"), r["epochs"])
    return ("mp", r["splits"], r["eta"], r.get("values") or "f32")


def paired(runs, config, base, field, relative):
    """Mean and 95 % half-interval of config - base over the seeds both ran
    (relative: in % of the base)."""
    d = []
    for seed, r in runs[config].items():
        b = runs[base].get(seed)
        if b is not None:
            d.append((r[field] - b[field]) / b[field] * 100 if relative else r[field] - b[field])
    if not d:
        return math.nan, math.nan, 0
    half = T975.get(len(d) - 1, 2.0) * statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else math.nan
    return statistics.mean(d), half, len(d)


def mean(runs, config, field):
    return statistics.mean(r[field] for r in runs[config].values())


def fmt_pm(m, h, unit=""):
    return f"{m:+.2f}{unit} ± {h:.2f}" if not math.isnan(h) else f"{m:+.2f}{unit}"


def table4(by, base):
    rows = ["| sparsity | MP workers | cuts | train loss | test loss | test loss vs baseline | BLEU | BLEU vs baseline "
            "| forward bytes | backward bytes | seeds |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| baseline | – | – | {mean(by, base, 'train_loss'):.4f} | {mean(by, base, 'test_loss'):.4f} | | "
            f"{mean(by, base, 'bleu'):.2f} | | | | {len(by[base])} |"]
    for config in sorted((c for c in by if c[0] == "mp" and c[1]), key=lambda c: (c[1], c[2], c[3] != "f32")):
        _, splits, eta, values = config
        dl = paired(by, config, base, "test_loss", True)
        db = paired(by, config, base, "bleu", False)
        one = next(iter(by[config].values()))
        fwd = statistics.mean(c["fwd_reduction"] for c in one["cuts"])
        bwd = statistics.mean(c["bwd_reduction"] for c in one["cuts"])
        rows.append(f"| {eta:.0%}{' (bf16 values)' if values == 'bf16' else ''} | {splits + 1} | {', '.join(c['cut'] for c in one['cuts'])} | "
                    f"{mean(by, config, 'train_loss'):.4f} | {mean(by, config, 'test_loss'):.4f} | "
                    f"{fmt_pm(dl[0], dl[1], ' %')} | {mean(by, config, 'bleu'):.2f} | {fmt_pm(db[0], db[1])} | "
                    f"{fwd:.1f}x fewer | {bwd:.1f}x fewer | {dl[2]} |")
    for config in sorted(c for c in by if c[0] == "narrow"):
        _, splits, width = config
        dl = paired(by, config, base, "test_loss", True)
        db = paired(by, config, base, "bleu", False)
        rows.append(f"| none: the FFNs at the cuts {width} wide | {splits + 1} | {CUT_NAMES[splits]} | "
                    f"{mean(by, config, 'train_loss'):.4f} | {mean(by, config, 'test_loss'):.4f} | "
                    f"{fmt_pm(dl[0], dl[1], ' %')} | {mean(by, config, 'bleu'):.2f} | {fmt_pm(db[0], db[1])} | "
                    f"– | – | {dl[2]} |")
    return rows


def topk_order(config):
    """topk:K/B[+fmt] by K, then format."""
    k = config[1].split(":")[1].split("/")[0] if ":" in config[1] else "0"
    return int(k), config[1]


OPTIMIZERS = {"sgd": "sgd (momentum 0.9)", "sgd-mc": "sgd, momentum 0.9 before the exchange (DGC)",
              "adam-pre": "adam before the exchange"}


def best_dense(by, epochs):
    """The full-precision exchange with the lowest mean test loss among the
    optimizers run for `epochs`: every TopK run of that length is compared
    with it."""
    dense = [c for c in by if c[0] == "dp" and c[1] == "none" and c[4] == epochs]
    return min(dense, key=lambda c: mean(by, c, "test_loss")) if dense else None


def topk_table(by):
    groups = sorted({c[2:] for c in by if c[0] == "dp"}, key=lambda g: (g[2], g[0] != "adam", g))
    rows = ["| gradient exchange (2 ranks) | optimizer | epochs | train loss | test loss | test loss vs best fp32 | BLEU "
            "| BLEU vs best fp32 | gradient bytes sent per rank and step | vs the dense ring | seeds |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for opt, lr, epochs in groups:
        best = best_dense(by, epochs)
        own = ("dp", "none", opt, lr, epochs)
        mine = sorted((c for c in by if c[0] == "dp" and c[2:] == (opt, lr, epochs) and c != own), key=topk_order)
        for config in ([own] if own in by else []) + mine:
            runs = list(by[config].values())
            sent = statistics.mean(r["grad_bytes_sent"] / r["steps"] for r in runs)
            ratio = statistics.mean(r["grad_dense_bytes"] / r["grad_bytes_sent"] for r in runs)
            name = "fp32 (sparq's dense allreduce)" if config == own else f"`{config[1]}`"
            against = best is not None and config != best
            dl = paired(by, config, best, "test_loss", True) if against else None
            db = paired(by, config, best, "bleu", False) if against else None
            rows.append(f"| {name} | {OPTIMIZERS.get(opt, opt)} lr {lr:g} | {epochs} | "
                        f"{mean(by, config, 'train_loss'):.4f} | {mean(by, config, 'test_loss'):.4f} | "
                        f"{fmt_pm(dl[0], dl[1], ' %') if dl else 'best'} | {mean(by, config, 'bleu'):.2f} | "
                        f"{fmt_pm(db[0], db[1]) if db else ''} | {sent / 1e3:.1f} kB | {ratio:.0f}x fewer | "
                        f"{len(runs)} |")
    return rows


def label(config, base):
    if config[0] == "dp":
        return f"{'fp32' if config[1] == 'none' else config[1]}, {config[2]}, 2 ranks, {config[4]} epochs"
    if config == base:
        return "baseline"
    return f"{config[2]:.0%}{' bf16' if config[3] == 'bf16' else ''}, {config[1] + 1} workers"


def curve_mean(by, config):
    curves = [r["curve"] for r in by[config].values()]
    steps = [s for s, _ in curves[0]]
    return steps, [statistics.mean(c[i][1] for c in curves) for i in range(len(steps))]


def curve_change(by, config, ref):
    """The mean over seeds of the paired change (%) of the test loss at each step."""
    seeds = [s for s in by[config] if s in by[ref]]
    steps = [s for s, _ in by[config][seeds[0]]["curve"]]
    return steps, [statistics.mean(100 * (by[config][s]["curve"][i][1] / by[ref][s]["curve"][i][1] - 1)
                                   for s in seeds) for i in range(len(steps))]


def plot(by, base, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mp = sorted((c for c in by if c[0] == "mp" and c[1]), key=lambda c: (c[1], c[2], c[3] != "f32"))
    # The plot's TopK: the longest runs, against the best full-precision exchange of that length.
    epochs = max((c[4] for c in by if c[0] == "dp"), default=None)
    dense = best_dense(by, epochs) if epochs else None
    dp = sorted((c for c in by if c[0] == "dp" and c[4] == epochs and c[1] != "none"), key=topk_order)
    dp = ([dense] if dense else []) + dp
    color = {c: plt.cm.tab20(i % 20) for i, c in enumerate([base] + mp + dp)}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for config in [base] + mp + dp:
        axes[0].plot(*curve_mean(by, config), label=label(config, base), lw=1, color=color[config])
    axes[0].set_yscale("log")
    axes[0].set_ylabel("test loss (nats per token, mean over seeds)")
    axes[0].set_title("test loss")
    for ax, configs, ref, title in ((axes[1], mp, base, "DCT-MP against the baseline"),
                                    (axes[2], [c for c in dp if c != dense], dense,
                                     f"TopK SGD against the best fp32 DDP, {epochs} epochs")):
        for config in configs:
            ax.plot(*curve_change(by, config, ref), label=label(config, base), lw=1, color=color[config])
        ax.axhline(0, color="black", lw=0.5)
        ax.set_ylabel("test loss change, % (paired seeds, mean)")
        ax.set_title(title)
    axes[2].set_yscale("symlog", linthresh=2)  # hundreds of % early, a few % at the end
    for ax in axes:
        ax.set_xlabel("step")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    data, md = sys.argv[1], sys.argv[2]
    by = {}
    for name, r in load(data).items():
        by.setdefault(key(r), {})[r["seed"]] = r
    base = ("mp", 0, None, "f32")
    if base not in by:
        sys.exit(f"summarize-translation: no baseline runs in {data}/runs")
    one = by[base][min(by[base])]
    figure = pathlib.Path(md).parent / "figures" / "translation_loss.png"
    if sys.argv[3:] != ["--no-figure"]:  # scripts/results-check: the page only
        plot(by, base, figure)
    body = ["<!-- translation:begin -->",
            "<!-- written by scripts/summarize-translation.py from docs/data/translation; "
            "re-run scripts/reproduce-translation to refresh -->",
            "",
            f"Model: {one['layers']} + {one['layers']} layers, d_model {one['d_model']}, FFN {one['ffn']}, "
            f"{one['epochs']} epochs ({one['steps']} steps of {one['batch_size']} sentence pairs). Losses: "
            "per-token cross-entropy in nats (teacher forced); BLEU: greedy decoding, sacrebleu. "
            "Differences are paired by seed (mean ± 95 % t-interval); bytes per cut are the DCT-MP messages "
            "against dense fp32 (forward: mask + values; backward: values).",
            "", *table4(by, base), "", *topk_table(by), "",
            f"![test loss against step](figures/{figure.name})", "",
            "<!-- translation:end -->"]
    text = pathlib.Path(md).read_text()
    begin, end = text.find("<!-- translation:begin -->"), text.find("<!-- translation:end -->")
    if begin < 0 or end < 0:
        sys.exit(f"summarize-translation: no translation:begin/end block in {md}")
    pathlib.Path(md).write_text(text[:begin] + "\n".join(body) + text[end + len("<!-- translation:end -->"):])


if __name__ == "__main__":
    main()
