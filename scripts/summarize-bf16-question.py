#!/usr/bin/env python3
"""The table of scripts/bf16-question: each build's fp32 and bf16 runs, the
step (steps 62-122: the second print interval, after the first's warm-up),
its forward and backward phases, medians over the rounds, and bf16's
speed-up over fp32 within a build.

    summarize-bf16-question.py [docs/data/bf16-question]"""
import json
import pathlib
import re
import statistics
import sys


def last_interval(path):
    trains = [e for e in map(json.loads, path.read_text().splitlines()) if e.get("event") == "train"]
    e = trains[-1]
    return e["ms_per_it"], e["phase_ms"]["forward"], e["phase_ms"]["backward"]


def main():
    d = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/bf16-question")
    print("| build | MLPs | ms/step, round by round | median | forward ms | backward ms | bf16 against fp32 | kernels |")
    print("|---|---|---|---|---|---|---|---|")
    for build in ("old", "today"):
        step = {}
        for prec in ("fp32", "bf16"):
            runs = [last_interval(f) for f in sorted(d.glob(f"{build}-{prec}_r*.jsonl"))]
            step[prec] = statistics.median(r[0] for r in runs)
            log = next(d.glob(f"{build}-{prec}_r1.log")).read_text()
            kernels = re.search(r"(\w+) kernels", log).group(1)
            faster = f"{step['fp32'] / step['bf16']:.2f}x" if prec == "bf16" else ""
            print(f"| {build} | {prec} | {', '.join(f'{r[0]:.2f}' for r in runs)} | {step[prec]:.2f} | "
                  f"{statistics.median(r[1] for r in runs):.2f} | {statistics.median(r[2] for r in runs):.2f} | "
                  f"{faster} | {kernels} |")


if __name__ == "__main__":
    main()
