#!/usr/bin/env python3
"""results.md's "Two ranks against one rank with two threads" table from
scripts/threads-vs-ranks' runs: samples a second with data assembly (the
summary line), the median over the rounds, and the median of each round's
ratio against `--threads 2` of the same round.

    summarize-threads-vs-ranks.py RUNS_TXT
"""
import pathlib
import re
import statistics
import sys

LABELS = {"--threads 2": "`--threads 2`", "--ranks 2": "`--ranks 2` (replicated tables)",
          "--ranks 2 --emb-placement table-wise": "`--ranks 2 --emb-placement table-wise`"}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rate = {}
    for rnd, cfg, v in re.findall(r"^round (\d+) (.*?): summary: .*?with data assembly (\d+) samples/s",
                                  pathlib.Path(sys.argv[1]).read_text(), re.M):
        rate[(int(rnd), cfg)] = int(v)
    rounds = sorted({r for r, _ in rate})
    print("| run | samples/s | vs `--threads 2` |")
    print("|---|---|---|")
    for cfg, label in LABELS.items():
        med = statistics.median(rate[(r, cfg)] for r in rounds)
        ratio = statistics.median(rate[(r, cfg)] / rate[(r, "--threads 2")] for r in rounds)
        print(f"| {label} | {med / 1e3:.1f}k | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
