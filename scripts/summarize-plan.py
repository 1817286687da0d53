#!/usr/bin/env python3
"""results.md's tables of sparq plan: against an exhaustive sweep of its space
on the virtual clock, from the runs of scripts/reproduce-plan (docs/data/plan:
NAME_pruned.{jsonl,log} and NAME_exhaustive.{jsonl,log}); and, where
scripts/plan-cluster-sweep measured the same plans on the 4-host cluster
(docs/data/plan/cluster4), measured against modelled.

    python3 scripts/summarize-plan.py [docs/data/plan]"""
import json
import pathlib
import re
import statistics
import sys

DEFAULTS = {"emb-placement": "replicated", "dp-codec": "none", "dp-allreduce": "auto",
            "emb-codec-fwd": "fp32", "emb-codec-bwd": "fp32", "fuse-bytes": "0"}


def load(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def fp32(p):
    f = p["flags"]
    return f["dp-codec"] == "none" and f["emb-codec-fwd"] == "fp32" and f["emb-codec-bwd"] == "fp32"


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/plan")
    print("| setting | plans (admitted) | run: planner / sweep | planning s | planner's plan | its ms/step (in the sweep) "
          "| sweep's fastest | ms/step | planner / fastest | vs defaults | vs fastest fp32 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for pruned_path in sorted(out.glob("*_pruned.jsonl")):
        name = pruned_path.name[: -len("_pruned.jsonl")]
        pruned, sweep = load(pruned_path), load(out / f"{name}_exhaustive.jsonl")
        secs = re.search(r"planned in ([\d.]+) s", (out / f"{name}_pruned.log").read_text()).group(1)
        chosen = json.loads((out / f"{name}_pruned.plan.json").read_text())
        ran = [p for p in sweep if "modelled_ms_per_step" in p]
        by_flags = {json.dumps(p["flags"], sort_keys=True): p for p in ran}
        mine = by_flags[json.dumps(chosen["flags"], sort_keys=True)]["modelled_ms_per_step"]
        best = min((p for p in ran if p["admitted"]), key=lambda p: p["modelled_ms_per_step"])
        default = by_flags[json.dumps(DEFAULTS, sort_keys=True)]["modelled_ms_per_step"]
        best_fp32 = min(p["modelled_ms_per_step"] for p in ran if fp32(p))
        admitted = sum(p["admitted"] for p in sweep)
        n_pruned = sum("modelled_ms_per_step" in p for p in pruned)
        label = lambda p: next(x["label"] for x in sweep if x["flags"] == p["flags"])
        print(f"| {name} | {len(sweep)} ({admitted}) | {n_pruned} / {len(ran)} | {secs} | {label(chosen)} | {mine:.2f} "
              f"| {best['label']} | {best['modelled_ms_per_step']:.2f} | {mine / best['modelled_ms_per_step']:.3f} "
              f"| {default / mine:.2f}x | {best_fp32 / mine:.2f}x |")


def measured_ms(path):
    """A cluster run's step: the median of its print intervals after the first."""
    trains = [e for e in load(path) if e["event"] == "train"]
    return statistics.median(e["ms_per_it"] for e in trains[1:])


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0] * len(xs)
    for pos, i in enumerate(order):
        r[i] = pos
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def cluster(out):
    runs = out / "cluster4"
    if not runs.is_dir():
        return
    sweep = [p for p in load(out / "cluster4-1gbit_exhaustive.jsonl") if p["admitted"] and "modelled_ms_per_step" in p]
    rows = []
    for i, p in enumerate(sweep):
        files = sorted(runs.glob(f"p{i}_r*.jsonl"))
        if files:
            rows.append((p, statistics.median(measured_ms(f) for f in files), len(files)))
    defaults = statistics.median(measured_ms(f) for f in sorted(runs.glob("defaults_r*.jsonl")))
    chosen = json.loads((out / "cluster4-1gbit_pruned.plan.json").read_text())["flags"]
    mine = next(ms for p, ms, _ in rows if p["flags"] == chosen)
    best = min(rows, key=lambda r: r[1])
    best_fp32 = min(ms for p, ms, _ in rows if fp32(p))
    errors = [p["modelled_ms_per_step"] / ms for p, ms, _ in rows]
    print(f"\n{len(rows)} plans measured on the cluster ({rows[0][2]} rounds each, median): Spearman "
          f"{spearman([p['modelled_ms_per_step'] for p, _, _ in rows], [ms for _, ms, _ in rows]):.3f} between modelled "
          f"and measured; modelled/measured {min(errors):.2f}-{max(errors):.2f} (median "
          f"{statistics.median(errors):.2f}), {sum(abs(e - 1) <= 0.15 for e in errors)} of {len(rows)} within 15 %.")
    print(f"The planner's plan measured {mine:.2f} ms/step; the fastest measured plan ({best[0]['label']}) "
          f"{best[1]:.2f}: {mine / best[1]:.3f}x. The default flags (--threads 2) {defaults:.2f} ms/step: "
          f"{defaults / mine:.2f}x the plan's; the fastest fp32 plan {best_fp32:.2f}: {best_fp32 / mine:.2f}x.\n")
    print("| plan | modelled ms/step | measured ms/step | modelled / measured |")
    print("|---|---|---|---|")
    for p, ms, _ in sorted(rows, key=lambda r: r[1]):
        print(f"| {p['label']} | {p['modelled_ms_per_step']:.2f} | {ms:.2f} | {p['modelled_ms_per_step'] / ms:.2f} |")


if __name__ == "__main__":
    main()
    cluster(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/plan"))
