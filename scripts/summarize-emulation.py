#!/usr/bin/python3
"""Tables and the plot of scripts/reproduce-emulation's runs.

    summarize-emulation.py DATA_DIR RESULTS_MD FIGURES_DIR   ('' for FIGURES_DIR: no figures)

Reads the runs under DATA_DIR (sparq train --metrics: <net>/ and
<net>-steps/ for the tables, scaling/ and scaling-before/, fidelity/, flat/
and flat-before/), replaces the block between '<!-- emulation:begin -->'
and '<!-- emulation:end -->' in RESULTS_MD, and writes emulation_scaling.png
into FIGURES_DIR.

Accuracy change (the paper's delta_q, in percentage points): a run's final
test accuracy less the fp32 run's of the same P and seed, averaged over the
seeds. Modelled ms/step: modelled training time (tests excluded) over the
steps. Bytes a step: rank 0's bytes sent (transport counters) over all its
exchanges.
"""
import glob
import json
import os
import re
import statistics
import sys

PLANS = [
    ("fp32", "fp32"),
    ("q4-ring", "q4 ring"),
    ("q4-ring-ec", "q4 ring EC"),
    ("q4-rd", "q4 RD"),
    ("q4-ring-ec-f4b4", "q4 ring EC; (f4, b4)"),
]
# The plans of the scaling part.
SCALING = [
    ("dp-fp32", "table-wise DP, fp32"),
    ("dp-dct", "table-wise DP, DCT-DP 98% + q4/q2 alltoalls"),
    ("hybrid-fp32", "hybrid, uncompressed"),
    ("hybrid-dct", "hybrid, DCT-MP 90% + DCT-DP 99%"),
]
# The plans of the fidelity check, named as in docs/data/time (the shaped
# clusters' runs).
SHAPED = {"fp32-tablewise": "fp32, table-wise (sparq ring)",
          "dct-tablewise-q4q2": "DCT-DP 98% L=1000, table-wise q4/q2"}


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_summary(events):
    train = [e for e in events if e.get("event") == "train"]
    if not train or not any(e.get("event") == "summary" for e in events):
        return None  # not finished
    tests = [e for e in events if e.get("event") == "test"]
    acct = [e for e in events if e.get("event") == "accounting"]
    mem = [e for e in events if e.get("event") == "memory"]
    last = train[-1]
    return {
        "steps": last["step"],
        "ms": 1e3 * last["train_s"] / last["step"],
        "modeled_ms": 1e3 * last["modeled_train_s"] / last["step"] if "modeled_train_s" in last else None,
        "modeled_ms_last": last.get("modeled_ms_per_it"),  # the last print interval: past the warm-up
        "accuracy": tests[-1]["accuracy"] if tests else None,
        "loss": tests[-1]["loss"] if tests else None,
        "bytes": sum(a["bytes_per_step"] for a in acct) if acct else None,
        "peak_mib": mem[-1]["peak_rss_bytes"] / 2**20 if mem else None,
        "wall_s": last["wall_s"],
    }


def runs_of(data, net):
    """{(plan, P): {seed: summary}}"""
    out = {}
    for path in sorted(glob.glob(os.path.join(data, net, "*.jsonl"))):
        m = re.match(r"(.+)_p(\d+)_s(\d+)\.jsonl$", os.path.basename(path))
        s = run_summary(load(path)) if m else None
        if s:
            out.setdefault((m.group(1), int(m.group(2))), {})[int(m.group(3))] = s
    return out


def fmt_bytes(b):
    return f"{b / 1e6:.2f} MB" if b >= 1e6 else f"{b / 1e3:.1f} kB"


def tables_block(data):
    """Accuracy and bytes from the epoch runs (DATA/10gbit), modelled steps
    from the 100-step runs (DATA/<net>-steps); beside them the epoch runs'
    and the old 25 Gbit/s runs' modelled steps, taken before the model
    stopped charging the emulation's own work."""
    ten, fast_old = runs_of(data, "10gbit"), runs_of(data, "25gbit")
    steps = {net: runs_of(data, f"{net}-steps") for net in ("10gbit", "25gbit")}
    ps = sorted({p for (_, p) in ten})
    if not ps:
        return []
    lines = ["| P | plan | accuracy change, pp (mean; per seed) | test loss change | bytes a step, rank 0 | "
             "modelled ms/step at 10 Gbit/s | at 25 Gbit/s | before the correction: 10, 25 Gbit/s | "
             "real ms/step on 2 cores |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in ps:
        base = ten.get(("fp32", p), {})
        for key, name in PLANS:
            runs = ten.get((key, p))
            if not runs:
                continue
            seeds = sorted(s for s in runs if s in base and runs[s]["accuracy"] is not None)
            d_acc = [100 * (runs[s]["accuracy"] - base[s]["accuracy"]) for s in seeds]
            d_loss = [100 * (runs[s]["loss"] / base[s]["loss"] - 1) for s in seeds]
            acc = (f"{statistics.mean(d_acc):+.3f} ({', '.join(f'{x:+.3f}' for x in d_acc)})"
                   if key != "fp32" and d_acc else "-")
            loss = f"{statistics.mean(d_loss):+.2f}%" if key != "fp32" and d_loss else "-"
            one = runs[min(runs)]
            now = [steps[net].get((key, p), {}).get(1) for net in ("10gbit", "25gbit")]
            now = " | ".join(f"{r['modeled_ms']:.1f}" if r else "-" for r in now)
            f25 = fast_old.get((key, p), {}).get(1)
            old = (f"{statistics.median(r['modeled_ms'] for r in runs.values()):.1f}, "
                   f"{f25['modeled_ms']:.1f}" if f25 else "-")
            lines.append(f"| {p} | {name} | {acc} | {loss} | {fmt_bytes(one['bytes'])} | {now} | {old} | "
                         f"{statistics.median(r['ms'] for r in runs.values()):.0f} |")
    return lines


def scaling_runs(data, sub="scaling"):
    """{net: {(plan, P): [summary of each run]}} of the scaling part."""
    out = {}
    for net in ("10gbit", "25gbit"):
        out[net] = {}
        for path in sorted(glob.glob(os.path.join(data, sub, net, "*.jsonl"))):
            m = re.match(r"(.+)_p(\d+)_r(\d+)\.jsonl$", os.path.basename(path))
            s = run_summary(load(path)) if m else None
            if s:
                out[net].setdefault((m.group(1), int(m.group(2))), []).append(s)
    return out


def scaled_ms(runs):
    """The median over runs of the last interval's modelled ms/step."""
    return statistics.median(r["modeled_ms_last"] for r in runs)


def scaling_block(data, sub="scaling"):
    runs = scaling_runs(data, sub)
    ps = sorted({p for net in runs.values() for (_, p) in net})
    if not ps:
        return []
    lines = ["| P | network | " + " | ".join(name for _, name in SCALING) + " |", "|---|---|" + "---|" * len(SCALING)]
    for p in ps:
        for net, rs in runs.items():
            cells = []
            for key, _ in SCALING:
                r, b = rs.get((key, p)), rs.get((key.split("-")[0] + "-fp32", p))
                gain = f" ({scaled_ms(b) / scaled_ms(r):.2f}x)" if r and b and b is not r else ""
                each = ", ".join(f"{x['modeled_ms_last']:.1f}" for x in r) if r else ""
                cells.append(f"{scaled_ms(r):.1f}{gain} <sub>{each}</sub>" if r else "-")
            lines.append(f"| {p} | {net[:2]} Gbit/s | " + " | ".join(cells) + " |")
    return lines


def plot_scaling(data, figures):
    runs = scaling_runs(data)
    if not any(runs.values()):
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
    for ax, (net, rs) in zip(axes, runs.items()):
        for (key, name), style in zip(SCALING, ("-o", "--o", "-s", "--s")):
            pts = sorted((p, 64 * p / (1e-3 * scaled_ms(r))) for (k, p), r in rs.items() if k == key)
            if pts:
                ax.plot([p for p, _ in pts], [x for _, x in pts], style, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{net[:2]} Gbit/s, 20 us")
        ax.set_xlabel("emulated nodes P (global batch 64 P)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("modelled samples/s")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(figures, "emulation_scaling.png"), dpi=120)


def fidelity_block(data):
    """Modelled against measured ms/step on the shaped clusters of the
    fidelity part: the model on the nominal network and on the network fitted
    to the cluster's benchmarks (net_cluster<P>)."""
    fid = os.path.join(data, "fidelity")

    def values(pattern, key):
        runs = [run_summary(load(p)) for p in sorted(glob.glob(os.path.join(fid, pattern)))]
        return [r[key] for r in runs if r]

    def cell(xs, real):
        if not xs:
            return "-"
        m = statistics.median(xs)
        return (f"{m:.1f} <sub>{', '.join(f'{x:.1f}' for x in xs)}</sub>" +
                (f" ({m / real:.2f}x)" if real else ""))

    def busy(plan, p):
        """The machine's CPU busy during the cluster's runs (median over runs)."""
        shares = []
        for path in glob.glob(os.path.join(fid, f"{plan}_cluster{p}_r*.cpu")):
            with open(path) as fh:
                b = [int(x) for x in fh.read().split()]
            d = [after - before for before, after in zip(b[:3], b[3:])]
            shares.append(1 - d[2] / sum(d))
        return f"{100 * statistics.median(shares):.0f} %" if shares else "-"

    lines = []
    for p in (8, 4, 2):
        net = os.path.join(fid, f"net_cluster{p}")
        fitted = open(net).read().strip() if os.path.exists(net) else None
        for key, name in SHAPED.items():
            real = values(f"{key}_cluster{p}_r*.jsonl", "ms")
            if not real:
                continue
            med = statistics.median(real)
            lines.append(f"| {p} | {name} | {cell(real, None)} | {busy(key, p)} | "
                         f"{cell(values(f'{key}_p{p}_nominal_r*.jsonl', 'modeled_ms'), med)} | "
                         f"{fitted or '-'} | {cell(values(f'{key}_p{p}_fit_r*.jsonl', 'modeled_ms'), med)} | "
                         f"{cell(values(f'{key}_p{p}_fit1core_r*.jsonl', 'modeled_ms'), med)} |")
    if not lines:
        return []
    return ["| hosts P | plan | measured on the cluster, ms/step | machine's CPU busy | "
            "modelled on 1gbit,50us (/ measured) | network fitted to the cluster's benchmarks | "
            "modelled on it (/ measured) | the same, `--host-cores 1` (/ measured) |",
            "|---|---|---|---|---|---|---|---|"] + lines


FLAT = [("fp32", "fp32"), ("dct", "DCT-DP 98% + q4/q2 alltoalls")]


def flat_runs(data, sub):
    """{(plan, P): [per run: medians over steps 11-40 of the modelled step, its
    phases and its exchanges]} of the flat part in DATA_DIR/<sub>."""
    out = {}
    for path in sorted(glob.glob(os.path.join(data, sub, "*.jsonl"))):
        m = re.match(r"(.+)_p(\d+)_r(\d+)\.jsonl$", os.path.basename(path))
        steps = [e for e in load(path) if e.get("event") == "train" and e["step"] > 10] if m else []
        if len(steps) < 30:
            continue  # not finished
        med = lambda f: statistics.median(f(e) for e in steps)  # noqa: E731
        run = {"step": med(lambda e: e["modeled_ms_per_it"])}
        if "modeled_phase_ms" in steps[0]:
            run.update({k: med(lambda e, k=k: e["modeled_phase_ms"][k]) for k in steps[0]["modeled_phase_ms"]})
            run.update({x: med(lambda e, x=x: e["traffic"][x]["modeled_ms_per_step"]) for x in steps[0]["traffic"]})
        out.setdefault((m.group(1), int(m.group(2))), []).append(run)
    return out


def flat_block(data):
    runs, before = flat_runs(data, "flat"), flat_runs(data, "flat-before")
    ps = sorted({p for (_, p) in runs})
    if not ps:
        return []
    mid = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    cols = ["forward", "backward", "comm_wait", "optimizer", "emb_fwd", "emb_bwd", "W_grad"]
    lines = ["| plan | P | modelled ms/step (/ P = 2) | before the change (/ P = 2) | forward | backward | "
             "comm wait | optimizer | exchanges on the comm thread: lookups, their gradients, W_grad |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, name in FLAT:
        base, base_old = runs.get((key, 2)), before.get((key, 2))
        for p in ps:
            rs = runs.get((key, p))
            if not rs:
                continue
            old = before.get((key, p))
            each = ", ".join(f"{r['step']:.2f}" for r in rs)
            cell = f"{mid(rs, 'step'):.2f} <sub>{each}</sub>" + (
                f" ({mid(rs, 'step') / mid(base, 'step'):.2f}x)" if base else "")
            cell_old = (f"{mid(old, 'step'):.2f}" + (f" ({mid(old, 'step') / mid(base_old, 'step'):.2f}x)"
                                                     if base_old else "")) if old else "-"
            ph = [f"{mid(rs, c):.2f}" if c in rs[0] else "-" for c in cols]
            lines.append(f"| {name} | {p} | {cell} | {cell_old} | " + " | ".join(ph[:4]) + " | " +
                         ", ".join(ph[4:]) + " |")
    ring = []
    for path in glob.glob(os.path.join(data, "flat", "ring_4KiB_p*.json")):
        with open(path) as fh:
            (row,) = json.load(fh)
        ring.append((row["ranks"], row["sim_time_us"]))
    if ring:
        lines += ["", "A ring allreduce of 4 KiB alone (`build/sparq bench allreduce --ranks P --algo ring --sizes 4KiB "
                  "--net 100000gbit,0us --compute-scale 1 --iters 50`): its 2(P-1) hops in sequence, each rank's CPU "
                  "between its calls into the transport charged.", "",
                  "| P | modelled us | per hop |", "|---|---|---|"]
        for p, t in sorted(ring):
            lines.append(f"| {p} | {t:.1f} | {t / (2 * (p - 1)):.2f} us |")
    return lines


def main():
    data, results, figures = sys.argv[1:4]
    block = ["<!-- emulation:begin -->",
             "<!-- written by scripts/summarize-emulation.py from docs/data/emulation; re-run "
             "scripts/reproduce-emulation to refresh -->", ""]
    for intro, lines in (
        ("One epoch of data/synth, global batch 64 x P, `scripts/reproduce-emulation tables rates`: every run is "
         "`build/sparq train --data-path data/synth --ranks P --mini-batch-size 64P --net 10gbit,20us --nepochs 1 "
         "--test-freq 0 --seed S` plus the plan's flags (docs/data/emulation/plans.tsv): accuracy, loss and bytes "
         "(the virtual clock does not touch the numerics). The modelled steps are 100 steps of seed 1 on "
         "`--net 10gbit,20us` and `--net 25gbit,20us` (`rates`); before the correction: the epoch runs' and the "
         "earlier 25 Gbit/s runs' modelled steps, when the model charged the emulation's own work.",
         tables_block(data)),
        ("Scaling in modelled time, `scripts/reproduce-emulation scaling`: median modelled ms/step of steps 21-40 "
         "over the runs (seed 1, global batch 64 x P; in brackets the speed-up over the same plan uncompressed; "
         "small: each run's); flags in "
         "docs/data/emulation/plans.tsv; plot: docs/figures/emulation_scaling.png.", scaling_block(data)),
        ("The same runs before the correction (docs/data/emulation/scaling-before): the model then charged the "
         "emulation's own work (thread switches, in-process copies) as computation.",
         scaling_block(data, "scaling-before")),
        ("Fidelity at 1 Gbit/s, `scripts/reproduce-emulation fidelity`: shaped clusters of 8, 4 and 2 hosts "
         "(`scripts/cluster up P 1gbit`), 512 samples a rank, 150 steps, 3 runs (median, runs small); the model "
         "runs the same flags with `--ranks P --compute-scale P/2` (the 8 and 4 hosts share 2 cores), last with a "
         "rank's two threads on one core (`--host-cores 1`), as on a cluster host. The fitted network is "
         "`scripts/fit-net.py`: bandwidth and latency fitted to the cluster's `bench allreduce --algo ring` and "
         "`bench alltoall` (16 KiB-4 MiB), and the kernel's CPU per byte and per message from the machine's "
         "system time around TCP streams between two hosts (`scripts/stack-cpu.py`: 20,000 and 220,000 messages "
         "of 64 B, 2,000 and 22,000 of 64 KiB, three times on each cluster: the median of the nine; "
         "docs/data/emulation/fidelity/fit_cluster*.txt). The CPU column is the machine's, busy during the "
         "cluster's runs (launch included).", fidelity_block(data)),
        ("The emulation's own cost, `scripts/reproduce-emulation flat`: `build/sparq train --ranks P --net "
         "100000gbit,0us --data-generation random --num-batches 40 --print-freq 1 --test-freq -1 "
         "--mini-batch-size 256P --emb-placement table-wise --fuse-bytes 4MiB` plus the plan's flags: an "
         "effectively infinite network and 256 samples a rank; modelled ms of steps 11-40 (median), the median of "
         "the runs (small: each run's); phases on rank 0's training thread and its exchanges' time on its "
         "communication thread, in modelled ms a step. Before the change: the same runs with the build of commit "
         "f164ecb, whose model charged the emulation's own work (docs/data/emulation/flat-before).", flat_block(data))):
        if lines:
            block += [intro, ""] + lines + [""]
    block.append("<!-- emulation:end -->")
    with open(results) as fh:
        text = fh.read()
    begin, end = text.find("<!-- emulation:begin -->"), text.find("<!-- emulation:end -->")
    if begin < 0 or end < 0:
        sys.exit(f"{results}: no '<!-- emulation:begin -->' ... '<!-- emulation:end -->' block")
    text = text[:begin] + "\n".join(block) + text[end + len("<!-- emulation:end -->"):]
    with open(results, "w") as fh:
        fh.write(text)
    if figures:  # '' (scripts/results-check): the page only
        plot_scaling(data, figures)


main()
