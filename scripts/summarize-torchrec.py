#!/usr/bin/python3
"""The table and the plot of scripts/reproduce-torchrec from its logs.

    scripts/summarize-torchrec.py DIR [--plot docs/figures/torchrec_RATE.png]

DIR holds one log per run, CONFIG-sSEED-PREC.log (PyTorch runs: their
progress and test lines) or .jsonl (sparq train's --metrics). For each
configuration and MLP precision, over the seeds: the median ms/step (training
time / steps), the median time to TorchRec-fp32's final test loss (that
precision's median over seeds; the training time at the first test at or
below it), the median final test loss against TorchRec fp32's, and rank 0's
bytes per step by entity. Prints a markdown table.
"""
import argparse
import collections
import json
import os
import re
import statistics

TEST = re.compile(r"Testing at - (\d+)/(\d+) of epoch 0, loss ([0-9.]+).*; training ([0-9.]+) s")
TORCHREC_BYTES = re.compile(r"kB/step sent \(rank 0\): (.*) \(computed\)$")
DDP_BYTES = re.compile(r"([0-9.]+) kB/step sent(?: \+ ([0-9.]+) kB torch allreduce)?")
NAME = re.compile(r"(.+)-s(\d+)-(fp32|bf16)\.(log|jsonl)$")


def read_log(path):
    """(tests [(step, train_s, loss)], steps, bytes {entity: kB/step}) of a PyTorch run."""
    tests, steps, kb = [], 0, {}
    with open(path) as f:
        for line in f:
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
    return tests, steps, kb


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
    return tests, steps, kb


def time_to(tests, target):
    for _, t, loss in tests:
        if loss <= target:
            return t
    return None


def summarize(d):
    runs = collections.defaultdict(list)  # (config, prec) -> [(tests, steps, kb)]
    for name in sorted(os.listdir(d)):
        m = NAME.match(name)
        if not m:
            continue
        read = read_jsonl if m[4] == "jsonl" else read_log
        tests, steps, kb = read(os.path.join(d, name))
        if tests:
            runs[(m[1], m[3])].append((tests, steps, kb))
    rows = []
    for prec in ("fp32", "bf16"):
        base = runs.get(("torchrec-fp32", prec))
        if not base:
            continue
        target = statistics.median(r[0][-1][2] for r in base)
        for (config, p), rs in sorted(runs.items()):
            if p != prec:
                continue
            ms = statistics.median(1e3 * r[0][-1][1] / r[1] for r in rs)
            reach = [time_to(r[0], target) for r in rs]
            got = [t for t in reach if t is not None]
            rows.append({
                "config": config, "prec": prec, "seeds": len(rs), "ms_per_step": ms,
                "time_to_target_s": statistics.median(got) if len(got) == len(rs) else None,
                "reached": f"{len(got)}/{len(rs)}", "target": target,
                "final_loss": statistics.median(r[0][-1][2] for r in rs),
                "kb": {e: statistics.median(r[2].get(e, 0) for r in rs) for e in rs[0][2]},
                "curves": [[(t, loss) for _, t, loss in r[0]] for r in rs],
            })
    return rows


def table(rows):
    out = ["| configuration | MLPs | runs | ms/step | s to TorchRec-fp32's loss | final test loss (vs TorchRec fp32) "
           "| kB/step sent by rank 0 |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        reach = f"{r['time_to_target_s']:.1f}" if r["time_to_target_s"] is not None else f"not reached ({r['reached']})"
        rel = 100 * (r["final_loss"] / r["target"] - 1)
        kb = ", ".join(f"{e} {v:.1f}" for e, v in r["kb"].items())
        out.append(f"| {r['config']} | {r['prec']} | {r['seeds']} | {r['ms_per_step']:.1f} | {reach} | "
                   f"{r['final_loss']:.6f} ({rel:+.2f} %) | {kb} |")
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
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
