#!/usr/bin/env python3
"""The tables of scripts/device-check: reads the files it writes
(machine.txt, gpu_tests.log, kernels.jsonl, bridge.log, dlrm.log, cpu.log),
each from the last DATA_DIR that has it (runs of different days: each
table names its folder), and replaces the block between
'<!-- device:begin -->' and '<!-- device:end -->' in RESULTS_MD.

  summarize-device.py RESULTS_MD DATA_DIR... [--emulated EMULATED_RUNS]

EMULATED_RUNS: the output of docs/data/device/emulated-weak/run.sh (the
weak scaling on the virtual clock), tabled beside the measured one.
"""
import argparse
import json
import pathlib
import re
import statistics
import sys


def machine(p):
    text = p.read_text().splitlines()
    gpu = next((line for line in text if "NVIDIA" in line), "no GPU listed")
    soft = next((line for line in text if line.startswith("torch")), "")
    cpus = next((line for line in text if line.startswith("cpus")), "")
    return f"{gpu.split(',')[0]}; {soft}; {cpus}"


def tests(p):
    m = re.findall(r"^(\d+ (?:passed|failed).*?) in [\d.]+s", p.read_text(), re.M)
    return m[-1] if m else "no pytest summary in gpu_tests.log"


def kernel_table(rows):
    out = ["| kernel | bits | row | GB/s | of the copy's | ms (256 MiB in) |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["kernel"].startswith("tune:"):
            continue
        name = r["kernel"] + (f" ({r['fmt']})" if "fmt" in r else "")  # the stream codec's value format
        out.append(f"| {name} | {r.get('bits', '')} | {r.get('cols', '')} | {r['gbps']:.0f} | "
                   f"{r['of_copy']:.2f} | {r['ms']:.3f} |")
    return out


def tune_table(rows):
    best = {}
    for r in rows:
        if r["kernel"].startswith("tune:"):
            k = r["kernel"][5:]
            if k not in best or r["of_copy"] > best[k]["of_copy"]:
                best[k] = r
    if not best:
        return []
    out = ["", "Best tile (values a program) and warps of `--tune`:", "",
           "| kernel | tile | warps | of the copy's |", "|---|---|---|---|"]
    out += [f"| {k} | {r['tile']} | {r['warps']} | {r['of_copy']:.2f} |" for k, r in best.items()]
    return out


def cpu_table(p):
    rate, label, rows = None, None, []
    for line in p.read_text().splitlines():
        m = re.match(r"(weak (?:[a-z-]+ )?ranks \d+|threads \d+|torch threads \d+): (.*)", line)
        if m:
            label = m.group(1)
            continue
        s = re.search(r"with data assembly (\d+) samples/s", line) or re.search(r"torch median: (\d+) samples/s", line)
        if s and label:
            rows.append((label, int(s.group(1))))
            label = None
    rate = dict(rows)
    # Efficiency against the fastest one-rank, one-thread run of any
    # placement, with or without mpiexec: one run each, and a slow first run
    # would flatter every ratio above it.
    one = max(r for label, r in rows if label.endswith("ranks 1") or label == "threads 1")
    out = [f"Weak-scaling efficiency: samples/s over P x {one}, the fastest one-rank run.", "",
           "| tables | ranks (1 thread, 1024 samples each) | samples/s | weak-scaling efficiency |",
           "|---|---|---|---|"]
    for label, r in rows:
        if label.startswith("weak"):
            words = label.split()
            placement = words[1] if len(words) == 4 else "replicated"
            p_ = int(words[-1])
            out.append(f"| {placement} | {p_} | {r} | {r / (p_ * one):.0%} |")
    out += ["", "| threads (one process, batch 1024) | sparq samples/s | PyTorch samples/s | sparq / PyTorch |",
            "|---|---|---|---|"]
    for t in (1, 2, 16):
        s, tt = rate.get(f"threads {t}"), rate.get(f"torch threads {t}")
        if s and tt:
            out.append(f"| {t} | {s} | {tt} | {s / tt:.2f} |")
    return out


def emulated_table(path):
    runs = {}
    for line in pathlib.Path(path).read_text().splitlines():
        m = re.match(r"run \d+ (\S+) P=(\d+): modeled ([\d.]+) ms/it", line)
        if m:
            runs.setdefault((m[1], int(m[2])), []).append(float(m[3]))
    out = ["", f"Predicted on the virtual clock (`{path}`: an infinite network, so each rank's own CPU time; "
           "median of 3 runs of 40 steps):", "",
           "| tables | ranks | modelled ms/step | weak-scaling efficiency |", "|---|---|---|---|"]
    for (placement, p), v in sorted(runs.items()):
        one = statistics.median(runs[(placement, 1)])
        out.append(f"| {placement} | {p} | {statistics.median(v):.1f} | {one / statistics.median(v):.0%} |")
    return out


def bridge_line(p):
    text = p.read_text()
    ok = sorted(set(re.findall(r"\] ok   (\w+)", text)))
    failed = sorted(set(re.findall(r"\] FAIL (\w+)", text)))
    return (f"The bridge's CUDA checks (`{p}`, 2 processes sharing the GPU): {len(ok)} passed on every rank"
            + (f", **failed: {', '.join(failed)}**" if failed else "") + f" ({', '.join(ok)}).")


def dlrm_runs(p):
    """{(hook, emb codec, codecs, kernels): [per run: dict(ms=..., pcie=..., gpu=..., ours=...)]} of
    dlrm.log (runs before the CUDA kernels name no kernels: Triton's)."""
    runs, cur = {}, None
    for line in p.read_text().splitlines():
        m = re.match(r"config hook (\S+) emb-codec (\S+) codecs (\S+)(?: kernels (\S+))?", line)
        if m:
            cur = {"ms": []}
            runs.setdefault(m.groups()[:3] + (m[4] or "triton",), []).append(cur)
        elif cur is not None:
            m = re.match(r"Finished training it (\d+)/\d+ .*?, ([\d.]+) ms/it", line)
            if m and int(m[1]) in (20, 30):  # steps 11-30: warm, before the profiled last 10
                cur["ms"].append(float(m[2]))
            m = re.match(r"profile \(rank 0, \d+ steps\): GPU time ([\d.]+) ms/step, sparq.gpu ([\d.]+) ms/step", line)
            if m:
                cur["gpu"], cur["ours"] = float(m[1]), float(m[2])
            m = re.match(r"host copies \(rank 0\): ([\d.]+) MB/step to the host, ([\d.]+) MB/step back", line)
            if m:
                cur["pcie"] = float(m[1]) + float(m[2])
    return runs


def dlrm_table(p):
    runs = dlrm_runs(p)
    step = {cfg: statistics.median(statistics.mean(r["ms"]) for r in rs) for cfg, rs in runs.items()}
    fastest_baseline = min(v for cfg, v in step.items() if cfg[2] == "host")
    staging = max(statistics.median(r["pcie"] for r in rs) for cfg, rs in runs.items() if cfg[2] == "host")
    out = [f"DLRM on the GPU (`{p}`): the default architecture, batch 16384, 2 processes sharing the GPU over "
           "sparq's transport; each configuration run "
           f"{max(len(rs) for rs in runs.values())} times, interleaved; step time: each run's mean over steps "
           "11-30, median of the runs; GPU time and sparq.gpu's part: torch.profiler over the last 10 steps "
           "(rank 0); PCIe: `sparq.torch.host_copies`, both ways, rank 0.", "",
           "| DP hook | lookups alltoall | codecs | kernels | ms/step (runs) | vs fastest host plan | PCIe MB/step | "
           "vs fp32 staging | GPU ms/step | sparq.gpu's part |", "|---|---|---|---|---|---|---|---|---|---|"]
    for cfg, rs in runs.items():
        pcie = statistics.median(r["pcie"] for r in rs)
        gpu = statistics.median(r["gpu"] for r in rs)
        ours = statistics.median(r["ours"] / r["gpu"] for r in rs)
        each = ", ".join(f"{statistics.mean(r['ms']):.1f}" for r in rs)
        kernels = cfg[3] if cfg[2] == "device" else ""
        out.append(f"| {cfg[0]} | {cfg[1]} | {cfg[2]} | {kernels} | {step[cfg]:.1f} ({each}) | "
                   f"{fastest_baseline / step[cfg]:.2f}x | {pcie:.2f} | {pcie / staging:.3f} | {gpu:.2f} | "
                   f"{ours:.1%} |")
    return out


def latest(dirs, name):
    found = [d / name for d in dirs if (d / name).exists()]
    return found[-1] if found else None


def main():
    ap = argparse.ArgumentParser(description="the tables of scripts/device-check into docs/results.md")
    ap.add_argument("results")
    ap.add_argument("dirs", nargs="+", type=pathlib.Path)
    ap.add_argument("--emulated", help="docs/data/device/emulated-weak/runs.txt")
    args = ap.parse_args()
    f = {name: latest(args.dirs, name) for name in
         ("machine.txt", "gpu_tests.log", "kernels.jsonl", "bridge.log", "dlrm.log", "cpu.log")}
    rows = [json.loads(line) for line in f["kernels.jsonl"].read_text().splitlines() if line.strip()]
    block = ["<!-- device:begin -->",
             f"GPU machine: {machine(f['machine.txt'])} (`{f['machine.txt']}`).", "",
             f"GPU codecs against the CPU codecs' results (`{f['gpu_tests.log']}`): **{tests(f['gpu_tests.log'])}**.",
             "", f"Kernels (`{f['kernels.jsonl']}`):", "",
             *kernel_table(rows), *tune_table(rows), "",
             *([bridge_line(f["bridge.log"]), ""] if f["bridge.log"] else []),
             *([*dlrm_table(f["dlrm.log"]), ""] if f["dlrm.log"] else []),
             *([f"The 16-core node (`{f['cpu.log']}`):", "", *cpu_table(f["cpu.log"])] if f["cpu.log"] else []),
             *(emulated_table(args.emulated) if args.emulated else []),
             "<!-- device:end -->"]
    results = pathlib.Path(args.results)
    text = results.read_text()
    begin, end = text.find("<!-- device:begin -->"), text.find("<!-- device:end -->")
    if begin < 0 or end < 0:
        sys.exit(f"{results}: no '<!-- device:begin -->' ... '<!-- device:end -->' block")
    results.write_text(text[:begin] + "\n".join(block) + text[end + len("<!-- device:end -->"):])


if __name__ == "__main__":
    main()
