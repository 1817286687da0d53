#!/usr/bin/env python3
"""The tables of scripts/device-check: reads DATA_DIR (machine.txt,
gpu_tests.log, kernels.jsonl, cpu.log: the files device-check writes) and
replaces the block between '<!-- device:begin -->' and '<!-- device:end -->'
in RESULTS_MD.

  summarize-device.py DATA_DIR RESULTS_MD [EMULATED_RUNS]

EMULATED_RUNS: the output of docs/data/device/emulated-weak/run.sh (the
weak scaling on the virtual clock), tabled beside the measured one.
"""
import json
import pathlib
import re
import statistics
import sys


def machine(d):
    text = (d / "machine.txt").read_text().splitlines()
    gpu = next((line for line in text if "NVIDIA" in line), "no GPU listed")
    soft = next((line for line in text if line.startswith("torch")), "")
    cpus = next((line for line in text if line.startswith("cpus")), "")
    return f"{gpu.split(',')[0]}; {soft}; {cpus}"


def tests(d):
    p = d / "gpu_tests.log"
    if not p.exists():
        return "not run"
    m = re.findall(r"^(\d+ (?:passed|failed).*?) in [\d.]+s", p.read_text(), re.M)
    return m[-1] if m else "no pytest summary in gpu_tests.log"


def kernel_table(rows):
    out = ["| kernel | bits | row | GB/s | of the copy's | ms (256 MiB in) |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["kernel"].startswith("tune:"):
            continue
        out.append(f"| {r['kernel']} | {r.get('bits', '')} | {r.get('cols', '')} | {r['gbps']:.0f} | "
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


def cpu_table(d):
    p = d / "cpu.log"
    if not p.exists():
        return ["(the cpu part did not run)"]
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
    out = ["| tables | ranks (1 thread, 1024 samples each) | samples/s | weak-scaling efficiency |",
           "|---|---|---|---|"]
    for label, r in rows:
        if label.startswith("weak"):
            words = label.split()
            placement = words[1] if len(words) == 4 else "replicated"
            p_ = int(words[-1])
            one = rate.get(label.replace(f"ranks {p_}", "ranks 1"))
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


def main():
    data, results = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    rows = [json.loads(line) for line in (data / "kernels.jsonl").read_text().splitlines() if line.strip()]
    block = ["<!-- device:begin -->",
             f"Machine: {machine(data)} (`{data}`).", "",
             f"GPU codecs against the CPU codecs' results: **{tests(data)}**.", "",
             *kernel_table(rows), *tune_table(rows), "",
             *cpu_table(data),
             *(emulated_table(sys.argv[3]) if len(sys.argv) > 3 else []),
             "<!-- device:end -->"]
    text = results.read_text()
    begin, end = text.find("<!-- device:begin -->"), text.find("<!-- device:end -->")
    if begin < 0 or end < 0:
        sys.exit(f"{results}: no '<!-- device:begin -->' ... '<!-- device:end -->' block")
    results.write_text(text[:begin] + "\n".join(block) + text[end + len("<!-- device:end -->"):])


if __name__ == "__main__":
    main()
