#!/usr/bin/env python3
"""results.md's table of sparq plan against an exhaustive sweep, from the runs
of scripts/reproduce-plan (docs/data/plan: NAME_pruned.{jsonl,log} and
NAME_exhaustive.{jsonl,log}).

    python3 scripts/summarize-plan.py [docs/data/plan]"""
import json
import pathlib
import re
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


if __name__ == "__main__":
    main()
