#!/usr/bin/python3
"""The table and the plot of scripts/reproduce-torchrec from its logs.

    scripts/summarize-torchrec.py DIR [--plot docs/figures/torchrec_RATE.png]

DIR holds one log per run, CONFIG-sSEED-PREC.log (PyTorch runs: their
progress, test and CPU lines) or .jsonl (sparq train's --metrics). Every
configuration of a seed started from the same model and took the data in the
same order, so each run is compared with TorchRec fp32 (fp32 MLPs) of its own
seed, the reference. For each configuration and MLP precision, over the
seeds: the median ms/step (the training time from the first test to the
last over the steps between); the median time to the
reference's final test loss (the training time of the first test at or
below it; only where every seed reached it); the median final test loss and
its difference from the reference's, median and worst seed; rank 0's bytes
per step by entity; the CPU ms per step of the ranks together (PyTorch runs).
Then the issue's goals, against the fastest TorchRec configuration of any
precision. Prints markdown.
"""
import argparse
import collections
import json
import os
import re
import statistics

TEST = re.compile(r"Testing at - (\d+)/(\d+) of epoch 0, loss ([0-9.]+).*; training ([0-9.]+) s")
TORCHREC_BYTES = re.compile(r"kB/step sent \(rank 0\): (.*) \(computed\)$")
CPU = re.compile(r"CPU ms/step by thread, \d+ ranks together: ([0-9.]+)")
DDP_BYTES = re.compile(r"([0-9.]+) kB/step sent(?: \+ ([0-9.]+) kB torch allreduce)?")
NAME = re.compile(r"(.+)-s(\d+)-(fp32|bf16)\.(log|jsonl)$")


def read_log(path):
    """A PyTorch run: tests [(step, train_s, loss)], steps, bytes {entity:
    kB/step}, CPU ms/step of the ranks together (None if not printed)."""
    tests, steps, kb, cpu = [], 0, {}, None
    with open(path) as f:
        for line in f:
            m = CPU.search(line)
            if m:
                cpu = float(m[1])
            m = TEST.search(line)
            if m:
                tests.append((int(m[1]), float(m[4]), float(m[3])))
                steps = int(m[2])
            m = TORCHREC_BYTES.search(line)
            if m:  # "W_grad 1903.9 (computed), emb_fwd 33.3, ..."
                kb = {e.split()[0]: float(e.split()[1]) for e in m[1].split(", ")}
            elif "kB/step sent" in line:
                m = DDP_BYTES.search(line)
                kb = {"sparq (hook + alltoall)": float(m[1])}
                if m[2]:
                    kb["torch allreduce (computed)"] = float(m[2])
    return tests, steps, kb, cpu


def read_jsonl(path):
    """The same of a sparq train run, from its --metrics."""
    tests, steps, kb = [], 0, {}
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e["event"] == "test":
                tests.append((e["step"], e["train_s"], e["loss"]))
                steps = e["nbatches"]
            elif e["event"] == "accounting":
                kb[e["entity"]] = e["bytes_per_step"] / 1e3
    return tests, steps, kb, None


def ms_per_step(tests):
    """From the first test to the last: the first steps (warm-up) left out."""
    (s0, t0, _), (s1, t1, _) = tests[0], tests[-1]
    return 1e3 * (t1 - t0) / (s1 - s0)


def last3(tests):
    """The mean test loss of the last three tests: one test's loss moves by
    up to a few tenths of a percent from one step to the next at this rate."""
    return statistics.mean(loss for _, _, loss in tests[-3:])


def time_to(tests, target):
    for _, t, loss in tests:
        if loss <= target:
            return t
    return None


def summarize(d):
    runs = collections.defaultdict(dict)  # (config, prec) -> {seed: (tests, steps, kb, cpu)}
    for name in sorted(os.listdir(d)):
        m = NAME.match(name)
        if not m:
            continue
        read = read_jsonl if m[4] == "jsonl" else read_log
        run = read(os.path.join(d, name))
        if run[0]:
            runs[(m[1], m[3])][int(m[2])] = run
    # sparq train takes the epoch's last, partial batch as one more step (489
    # of 2048 in the default set), the PyTorch examples leave it: every run
    # is read up to the PyTorch runs' last step, so all compare after the
    # same steps.
    last = min((r[1] for (c, _), by_seed in runs.items() if c != "sparq-train" for r in by_seed.values()), default=None)
    if last:
        for by_seed in runs.values():
            for seed, (tests, steps, kb, cpu) in by_seed.items():
                by_seed[seed] = ([t for t in tests if t[0] <= last], min(steps, last), kb, cpu)
    base = runs.get(("torchrec-fp32", "fp32"), {})
    ref = {seed: r[0][-1][2] for seed, r in base.items()}
    ref3 = {seed: last3(r[0]) for seed, r in base.items()}
    rows = []
    for (config, prec), by_seed in sorted(runs.items(), key=lambda kv: (kv[0][1] != "fp32", kv[0][0])):
        seeds = sorted(s for s in by_seed if s in ref)
        if not seeds:
            continue
        rs = [by_seed[s] for s in seeds]
        reach = [time_to(by_seed[s][0], ref[s]) for s in seeds]
        got = [t for t in reach if t is not None]
        rel = [100 * (by_seed[s][0][-1][2] / ref[s] - 1) for s in seeds]
        rel3 = [100 * (last3(by_seed[s][0]) / ref3[s] - 1) for s in seeds]
        cpus = [r[3] for r in rs if r[3] is not None]
        rows.append({
            "config": config, "prec": prec, "seeds": len(rs),
            "ms_per_step": statistics.median(ms_per_step(r[0]) for r in rs),
            "time_to_target_s": statistics.median(got) if len(got) == len(rs) else None,
            "reached": f"{len(got)}/{len(rs)}",
            "final_loss": statistics.median(r[0][-1][2] for r in rs),
            "rel_median": statistics.median(rel), "rel_worst": max(rel),
            "rel3_median": statistics.median(rel3), "rel3_worst": max(rel3),
            "kb": {e: statistics.median(r[2].get(e, 0) for r in rs) for e in rs[0][2]},
            "cpu": statistics.median(cpus) if cpus else None,
            "curves": [[(t, loss) for _, t, loss in r[0]] for r in rs],
        })
    return rows


def table(rows):
    out = ["| configuration | MLPs | seeds | ms/step | CPU ms/step, ranks together | s to TorchRec-fp32's loss "
           "| final test loss | vs TorchRec fp32: median, worst seed | last 3 tests' mean vs TorchRec fp32's "
           "| kB/step sent by rank 0 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        reach = f"{r['time_to_target_s']:.1f}" if r["time_to_target_s"] is not None else f"not reached ({r['reached']})"
        cpu = f"{r['cpu']:.1f}" if r["cpu"] is not None else "-"
        kb = ", ".join(f"{e} {v:.1f}" for e, v in r["kb"].items())
        out.append(f"| {r['config']} | {r['prec']} | {r['seeds']} | {r['ms_per_step']:.1f} | {cpu} | {reach} | "
                   f"{r['final_loss']:.6f} | {r['rel_median']:+.3f} %, {r['rel_worst']:+.3f} % | "
                   f"{r['rel3_median']:+.3f} %, {r['rel3_worst']:+.3f} % | {kb} |")
    return "\n".join(out)


def goals(rows):
    """The issue's goals, each against the fastest TorchRec configuration of
    any MLP precision with TorchRec's own codecs (fp32 included)."""
    def name(r):
        return f"{r['config']} ({r['prec']})"
    torchrec = [r for r in rows if r["config"].startswith("torchrec-")]
    ours = [r for r in rows if not r["config"].startswith("torchrec-")]
    if not torchrec or not ours:
        return ""
    out = []
    fast = min(torchrec, key=lambda r: r["ms_per_step"])
    with_sparq = min((r for r in ours if r["config"] == "torchrec+sparq"), key=lambda r: r["ms_per_step"], default=None)
    if with_sparq:
        out.append(f"- per step: {name(with_sparq)} {with_sparq['ms_per_step']:.1f} ms against the fastest TorchRec, "
                   f"{name(fast)} {fast['ms_per_step']:.1f} ms: {fast['ms_per_step'] / with_sparq['ms_per_step']:.2f}x "
                   "(goal >= 1.5x)")
    planned = next((r for r in ours if r["config"] == "torchrec+plan"), None)
    if planned:
        than_hand = (f", {with_sparq['ms_per_step'] / planned['ms_per_step']:.2f}x {name(with_sparq)}'s flags"
                     if with_sparq else "")
        out.append(f"- per step, TorchRec with sparq.plan's plan: {name(planned)} {planned['ms_per_step']:.1f} ms: "
                   f"{fast['ms_per_step'] / planned['ms_per_step']:.2f}x the fastest TorchRec{than_hand}")
    best = min(ours, key=lambda r: r["ms_per_step"])
    out.append(f"- per step, sparq's fastest: {name(best)} {best['ms_per_step']:.1f} ms: "
               f"{fast['ms_per_step'] / best['ms_per_step']:.2f}x the fastest TorchRec")
    reached = [r for r in torchrec if r["time_to_target_s"] is not None]
    first = min((r for r in ours if r["time_to_target_s"] is not None), key=lambda r: r["time_to_target_s"],
                default=None)
    if first and reached:
        soonest = min(reached, key=lambda r: r["time_to_target_s"])
        out.append(f"- to TorchRec fp32's loss: {name(first)} in {first['time_to_target_s']:.1f} s, TorchRec's soonest "
                   f"configuration {name(soonest)} in {soonest['time_to_target_s']:.1f} s: "
                   f"{soonest['time_to_target_s'] / first['time_to_target_s']:.2f}x sooner (goal >= 2x)")
    elif first:
        out.append(f"- to TorchRec fp32's loss: {name(first)} in {first['time_to_target_s']:.1f} s; no TorchRec "
                   "configuration reached it in every seed")
    for key, what in (("rel_worst", "final test loss"), ("rel3_worst", "mean of the last 3 tests")):
        over = [f"{name(r)} {r[key]:+.3f} %" for r in rows if r["config"] != "torchrec-fp32" and r[key] > 0.1]
        out.append(f"- {what} within +0.1 % of TorchRec fp32's in every seed: "
                   + ("all" if not over else "all but " + ", ".join(over)))
    return "\n".join(out)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    precs = sorted({r["prec"] for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(precs), figsize=(7 * len(precs), 5), squeeze=False)
    for ax, prec in zip(axes[0], precs):
        for r in (r for r in rows if r["prec"] == prec):
            curve = r["curves"][0]  # the first seed's run
            ax.plot([t for t, _ in curve], [loss for _, loss in curve], marker="o", ms=3, label=r["config"])
        ax.set_title(f"{prec} MLPs (first seed)")
        ax.set_xlabel("training time (s, tests left out)")
        ax.set_ylabel("test loss")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--plot")
    args = ap.parse_args()
    rows = summarize(args.dir)
    print(table(rows))
    print()
    print(goals(rows))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
