#!/usr/bin/env python3
"""docs/results.md's table of scripts/bench_single_rank.sh: a row a batch and
thread count, medians of the repetitions (the speed-up is the ratio of the
medians).

    summarize-single-rank.py DIR
"""
import json
import pathlib
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = {}
    for line in (pathlib.Path(sys.argv[1]) / "runs.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows.setdefault((r["batch"], r["threads"]), []).append(r)
    print("| batch | threads | runs | sparq samples/s | PyTorch samples/s | speed-up | sparq MLP GFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    for (batch, threads), rs in rows.items():
        s = statistics.median(r["sparq_samples_per_s"] for r in rs)
        t = statistics.median(r["torch_samples_per_s"] for r in rs)
        g = statistics.median(r["sparq_mlp_gflops"] for r in rs)
        print(f"| {batch} | {threads} | {len(rs)} | {s:.0f} | {t:.0f} | {s / t:.2f}x | {g:.1f} |")


if __name__ == "__main__":
    main()
