#!/usr/bin/python3
"""Tables and plots of scripts/reproduce-time's runs.

    summarize-time.py DATA_DIR RESULTS_MD FIGURES_DIR   ('' for FIGURES_DIR: no figures)

Reads DATA_DIR/<rate>/<plan>_s<seed>[_r<run>].jsonl (sparq train --metrics;
<rate> 1gbit-bf16 holds the runs with --mlp-precision bf16)
and DATA_DIR/colls/*.json (sparq bench --json), replaces the block between
'<!-- time:begin -->' and '<!-- time:end -->' in RESULTS_MD, and writes
time_loss.png and time_steps.png into FIGURES_DIR.

ms/step of a run is its training time (tests excluded: train_s) over its
steps; a plan's figure is the median over its runs. Time to target: the
target of seed s is the fp32 table-wise run's final test loss for seed s;
a run reaches it at its first test with loss <= target (train_s there).
"""
import glob
import json
import os
import re
import statistics
import sys

PLANS = [
    ("fp32-replicated", "fp32, replicated tables"),
    ("fp32-tablewise", "fp32, table-wise (sparq ring)"),
    ("fp32-tablewise-native", "fp32, table-wise (Open MPI ring)"),
    ("dct-tablewise-q4q2", "DCT-DP 98% L=1000, table-wise q4/q2"),
    ("dct-tablewise-q4q2-fp8", "same, +fp8 values"),
    ("hybrid-dct", "hybrid 2x2, DCT-MP 90% + DCT-DP 99%, table-wise q4/q2"),
]
# The baseline is the faster fp32 table-wise run (sparq's ring or Open MPI's
# allreduce), so that no ratio is flattered by a slow dense path.
BASES = ("fp32-tablewise", "fp32-tablewise-native")


def plan_flags(data):
    """{plan: flags} as scripts/reproduce-time ran them (DATA_DIR/plans.tsv)."""
    path = os.path.join(data, "plans.tsv")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_summary(events):
    train = [e for e in events if e.get("event") == "train"]
    tests = [e for e in events if e.get("event") == "test"]
    if not train:
        return None
    last = train[-1]
    return {
        "steps": last["step"],
        "train_s": last["train_s"],
        "ms_per_step": 1e3 * last["train_s"] / last["step"],
        "tests": [(t["train_s"], t["step"], t["loss"], t["auc"]) for t in tests],  # train_s: when the test began
        "final_loss": tests[-1]["loss"] if tests else None,
        "final_auc": tests[-1]["auc"] if tests else None,
    }


def runs_of(data, rate):
    """{plan: {(seed, run): summary}}"""
    out = {}
    for path in sorted(glob.glob(os.path.join(data, rate, "*.jsonl"))):
        m = re.match(r"(.+)_s(\d+)(?:_r(\d+))?\.jsonl$", os.path.basename(path))
        if not m:
            continue
        s = run_summary(load(path))
        if s:
            out.setdefault(m.group(1), {})[(int(m.group(2)), int(m.group(3) or 1))] = s
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fastest_base(runs):
    have = [b for b in BASES if runs.get(b)]
    return min(have, key=lambda b: med([s["ms_per_step"] for s in runs[b].values()])) if have else BASES[0]


def plans_table(runs):
    lines = []
    base_key = fastest_base(runs)
    base = runs.get(base_key, {})
    targets = {seed: s["final_loss"] for (seed, _), s in base.items() if s["final_loss"] is not None}
    base_ms = med([s["ms_per_step"] for s in base.values()])
    # The baseline's own time to its target, by the same rule as every plan's
    # (its first test at or below it: fp32's test loss is unsteady, so that
    # can come before its last test).
    base_tt = {seed: hit[0] for (seed, _), s in base.items()
               if (hit := next((t for t in s["tests"] if t[2] <= targets.get(seed, -1)), None))}
    # A single test swings by up to 2 % from one to the next (50 steps): the
    # mean of the last three (the epoch's last 150 steps) is steadier.
    base_last3 = {seed: [t[2] for t in s["tests"][-3:]] for (seed, _), s in base.items()}
    base_name = dict(PLANS)[base_key]
    lines.append(f"Baseline (the faster fp32 table-wise run, by median ms/step): {base_name}; the target of each "
                 "seed is its final test loss.")
    lines.append("")
    lines.append("| plan | ms/step (runs) | median | faster per step | time to target (s, per seed) | "
                 "sooner to target (median of seeds) | final test loss vs baseline (mean of seeds) | "
                 "last 3 tests vs baseline's (mean of seeds) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for key, name in PLANS:
        r = runs.get(key)
        if not r:
            continue
        ms = [r[k]["ms_per_step"] for k in sorted(r)]
        m = med(ms)
        tts, ratios, dl, dl3 = [], [], [], []
        for (seed, _), s in sorted(r.items()):
            tgt = targets.get(seed)
            if tgt is None:
                continue
            if len(s["tests"]) >= 3 and len(base_last3.get(seed, [])) >= 3:
                dl3.append(100 * (statistics.mean(t[2] for t in s["tests"][-3:]) /
                                  statistics.mean(base_last3[seed]) - 1))
            hit = next((t for t in s["tests"] if t[2] <= tgt), None)
            tts.append(f"{hit[0]:.1f}" if hit else "not reached")
            if hit and seed in base_tt:
                ratios.append(base_tt[seed] / hit[0])
            if s["final_loss"] is not None:
                dl.append(100 * (s["final_loss"] / tgt - 1))
        lines.append(
            f"| {name} | {', '.join(f'{x:.1f}' for x in ms)} | {m:.1f} | {base_ms / m:.2f}x | {', '.join(tts)} | "
            f"{(f'{med(ratios):.2f}x' if ratios else '-')} | "
            f"{(f'{statistics.mean(dl):+.3f}%' if dl else '-')} | "
            f"{(f'{statistics.mean(dl3):+.3f}%' if dl3 else '-')} |")
    return lines, targets


def steps_table(runs):
    base_key = fastest_base(runs)
    lines = [f"| plan | ms/step (runs) | median | faster per step than {dict(PLANS)[base_key]} |", "|---|---|---|---|"]
    base = med([s["ms_per_step"] for s in runs.get(base_key, {}).values()])
    for key, name in PLANS:
        r = runs.get(key)
        if not r:
            continue
        ms = [r[k]["ms_per_step"] for k in sorted(r)]
        lines.append(f"| {name} | {', '.join(f'{x:.1f}' for x in ms)} | {med(ms):.1f} | {base / med(ms):.2f}x |")
    return lines


def lsweep_table(data):
    rows = []
    for L in ["none", "1", "10", "100", "1000"]:
        p = os.path.join(data, "lsweep", f"L{L}.jsonl")
        if os.path.exists(p):
            s = run_summary(load(p))
            rows.append((L, s["ms_per_step"]))
            steps = s["steps"]
    if not rows:
        return [], 0
    base = dict(rows).get("none")
    lines = ["| `--dp-codec` | ms/step | time vs none |", "|---|---|---|"]
    for L, ms in rows:
        codec = "none" if L == "none" else f"dct:0.98,{L}"
        lines.append(f"| `{codec}` | {ms:.1f} | {ms / base:.2f}x |")
    return lines, steps


def colls_table(data):
    rows = {}
    for path in sorted(glob.glob(os.path.join(data, "colls", "*.json"))):
        ompi_ring = "ompi_ring" in os.path.basename(path)
        for r in json.load(open(path)):
            algo = r["algo"]
            if r["collective"] == "allreduce" and algo == "native":
                algo = "Open MPI ring (tuned, algorithm 4)" if ompi_ring else "Open MPI default"
            elif r["collective"] == "allreduce":
                algo = f"sparq {algo}"
            key = (r["collective"], algo, r.get("codec", "fp32"), r.get("density"))
            rows.setdefault(key, []).append((r["time_us"], r["wrong"], r.get("bytes_sent_per_rank")))
    if not rows:
        return []
    dense_best = min(med([t for t, _, _ in v]) for k, v in rows.items() if k[0] == "allreduce" and "Open MPI" in k[1])
    lines = ["| collective | algorithm | codec / density | time ms (runs) | median | Open MPI's best dense 64 MiB / this | "
             "#wrong |", "|---|---|---|---|---|---|---|"]
    for key in sorted(rows):
        coll, algo, codec, dens = key
        ts = [t for t, _, _ in rows[key]]
        wrong = sum(w for _, w, _ in rows[key])
        what = f"{100 * dens:.2f}% of N=16M" if dens is not None else codec
        lines.append(f"| {coll} | {algo} | {what} | {', '.join(f'{t / 1e3:.1f}' for t in ts)} | "
                     f"{med(ts) / 1e3:.1f} | {dense_best / med(ts):.2f}x | {wrong} |")
    return lines


def plots(runs, targets, figures):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("summarize-time: matplotlib missing, no plots", file=sys.stderr)
        return
    os.makedirs(figures, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, name in PLANS:
        s = runs.get(key, {}).get((1, 1))
        if s and s["tests"]:
            ax.plot([t[0] for t in s["tests"]], [t[2] for t in s["tests"]], marker="o", label=name)
    if 1 in targets:
        ax.axhline(targets[1], color="gray", linestyle=":", label="target: fp32 table-wise final")
    ax.set_xlabel("training time, s (tests excluded)")
    ax.set_ylabel("test loss")
    ax.set_title("4 hosts, 1 Gbit/s each, seed 1")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(figures, "time_loss.png"), dpi=110)
    fig, ax = plt.subplots(figsize=(8, 4))
    names, ms = [], []
    for key, name in PLANS:
        r = runs.get(key)
        if r:
            names.append(name)
            ms.append(med([s["ms_per_step"] for s in r.values()]))
    ax.barh(names[::-1], ms[::-1])
    ax.set_xlabel("ms/step (median of runs)")
    ax.set_title("4 hosts, 1 Gbit/s each, global batch 2048")
    fig.tight_layout()
    fig.savefig(os.path.join(figures, "time_steps.png"), dpi=110)


def main():
    data, results, figures = sys.argv[1:4]
    out = ["<!-- time:begin -->", "<!-- written by scripts/summarize-time.py from docs/data/time; "
           "re-run scripts/reproduce-time to refresh -->", ""]
    runs = runs_of(data, "1gbit")
    targets = {}
    if runs:
        t, targets = plans_table(runs)
        out += ["One epoch of data/synth (1M samples), global batch 2048, 4 hosts at 1 Gbit/s, "
                "`scripts/reproduce-time plans` (seeds 1-3). Every run is `scripts/cluster run --mca coll_tuned_use_dynamic_rules 1 "
                "--mca coll_tuned_allreduce_algorithm 4 -- build/sparq train "
                "--data-path data/synth --mini-batch-size 2048 --threads 1 --print-freq 50 --test-freq 50 --seed S` "
                "plus the plan's flags:", ""]
        flags = plan_flags(data)
        out += [f"- {name}: `{flags.get(key, '?')}`" for key, name in PLANS if key in runs]
        out += ["", *t, ""]
    bf16 = runs_of(data, "1gbit-bf16")
    if bf16:
        t, _ = plans_table(bf16)
        out += ["The table-wise plans again with the MLPs' GEMMs in bfloat16, `--mlp-precision bf16` added to every run "
                "of the table above, the fp32-communication baselines included (`scripts/reproduce-time bf16`, "
                "seeds 1-3; targets are this table's own baseline's final test losses):", "", *t, ""]
    for rate, title in [("2.5gbit", "2.5 Gbit/s"), ("none", "unshaped")]:
        r = runs_of(data, rate)
        if r:
            steps = next(iter(next(iter(r.values())).values()))["steps"]
            out += [f"{title}, {steps} steps, seed 1, three runs each (`scripts/reproduce-time rates`):", "",
                    *steps_table(r), ""]
    ls, steps = lsweep_table(data)
    if ls:
        out += [f"DCT-DP's L in time, 1 Gbit/s, table-wise fp32 tables, {steps} steps "
                "(`scripts/reproduce-time lsweep`):", "", *ls, ""]
    cs = colls_table(data)
    if cs:
        out += ["Collectives, 4 hosts at 1 Gbit/s, 5 iterations each, three runs (`scripts/reproduce-time colls`):",
                "", *cs, ""]
    out.append("<!-- time:end -->")
    text = open(results).read()
    block = "\n".join(out)
    if "<!-- time:begin -->" in text:
        text = re.sub(r"<!-- time:begin -->.*<!-- time:end -->", lambda _: block, text, flags=re.S)
    else:
        text += "\n## Time on a shaped cluster\n\n" + block + "\n"
    open(results, "w").write(text)
    if runs and figures:  # '' (scripts/results-check): the page only
        plots(runs, targets, figures)
    print(block)


if __name__ == "__main__":
    main()
