#!/usr/bin/env python3
"""results.md's tables of a `sparq bench quantized-allreduce` or
`quantized-alltoall` run on the virtual clock: one row a codec (and
algorithm, where the run has several), with the bytes a rank sent, how many
fewer than fp32's of the same algorithm and size, and the simulated time.

    summarize-collective-bench.py FILE

FILE holds the bench's output (docs/data/collectives/*.txt).
"""
import sys

from bench_output import rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = rows(sys.argv[1])
    several = len({r["algo"] for r in runs}) > 1
    fp32 = {(r["algo"], r["size"]): int(r["bytes_sent_per_rank"]) for r in runs if r["codec"] == "fp32"}
    print(("| algorithm " if several else "") + "| codec | bytes sent per rank | fewer than fp32 | simulated time |")
    print(("|---" if several else "") + "|---|---|---|---|")
    for r in runs:
        sent = int(r["bytes_sent_per_rank"])
        print((f"| {r['algo']} " if several else "") +
              f"| {r['codec']} | {sent} | {fp32[(r['algo'], r['size'])] / sent:.2f}x | "
              f"{float(r['sim_time_us']) / 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
