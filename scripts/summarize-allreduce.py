#!/usr/bin/env python3
"""results.md's "Dense collectives" tables from scripts/allreduce-vs-native's
JSON rows: sparq's ring and Rabenseifner against Open MPI's own allreduce
at 64 MiB (medians of the iterations, one row a run), the bytes a rank sent
against 2(P-1)/P x N in one process and under mpiexec, and the crossover of
every algorithm from 1 KiB to 4 MiB at P = 3 and 4 (median us, the cheapest
sparq algorithm in bold).

    summarize-allreduce.py DIR
"""
import json
import pathlib
import sys


def load(path):
    return {(r["algo"].replace("_", "-"), r["size"]): r for r in json.loads(pathlib.Path(path).read_text())}


def size_name(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = pathlib.Path(sys.argv[1])
    big = 64 << 20
    print("| run | ring | rabenseifner | native | ring / native | rabenseifner / native | #wrong |")
    print("|---|---|---|---|---|---|---|")
    runs = sorted(d.glob("native-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    for path in runs:
        t = load(path)
        ms = {a: t[(a, big)]["time_us"] / 1e3 for a in ("ring", "rabenseifner", "native")}
        wrong = sum(int(t[(a, big)]["wrong"]) for a in ("ring", "rabenseifner"))
        print(f"| {path.stem.split('-')[1]} | {ms['ring']:.1f} ms | {ms['rabenseifner']:.1f} ms | {ms['native']:.1f} ms | "
              f"{ms['ring'] / ms['native']:.2f} | {ms['rabenseifner'] / ms['native']:.2f} | {wrong} |")
    print()
    local, under = load(d / "bytes-local.json"), load(runs[0])
    print("| size | 2(P-1)/P x N | ring, --ranks 4 | ring, mpiexec -n 4 | rabenseifner, --ranks 4 | "
          "rabenseifner, mpiexec -n 4 |")
    print("|---|---|---|---|---|---|")
    for size in sorted({s for (_, s) in local}):
        cells = [int(t[(a, size)]["bytes_sent_per_rank"]) for a in ("ring", "rabenseifner") for t in (local, under)]
        print(f"| {size_name(size)} | {2 * 3 * size // 4} | " + " | ".join(map(str, cells)) + " |")
    for p in (3, 4):
        t = load(d / f"crossover-P{p}.json")
        algos = ["ring", "recursive-doubling", "rabenseifner", "native"]
        print(f"\nP = {p}:\n\n| size | " + " | ".join(algos) + " |\n|" + "---|" * 5)
        for size in sorted({s for (_, s) in t}):
            us = {a: t[(a, size)]["time_us"] for a in algos}
            best = min(algos[:3], key=lambda a: us[a])
            print(f"| {size_name(size)} | " + " | ".join(f"**{us[a]:.0f}**" if a == best else f"{us[a]:.0f}"
                                                          for a in algos) + " |")


if __name__ == "__main__":
    main()
