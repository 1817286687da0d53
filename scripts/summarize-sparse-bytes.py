#!/usr/bin/env python3
"""results.md's table of the bytes a rank sends in each sparse allreduce
(`sparq bench sparse-allreduce --ranks 8 --dim 16M --density 0.78%`, and
DSAR with a 4-bit QSGD dense phase), against the dense ring's.

    summarize-sparse-bytes.py RUN QSGD_RUN     (the bench's outputs)
"""
import sys

from bench_output import rows

NAMES = {"dense": "dense (ring/Rabenseifner)", "ssar-recursive-double": "ssar-recursive-double",
         "ssar-split-allgather": "ssar-split-allgather", "dsar-split-allgather": "dsar-split-allgather"}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sent = {r["algo"]: int(r["bytes_sent_per_rank"]) for r in rows(sys.argv[1])}
    qsgd = {r["algo"]: int(r["bytes_sent_per_rank"]) for r in rows(sys.argv[2])}
    dense = sent["dense"]
    print("| algorithm | bytes sent per rank | fewer than dense ring |")
    print("|---|---|---|")
    for algo, name in NAMES.items():
        print(f"| {name} | {sent[algo]:,} | {dense / sent[algo]:.3g}x |")
    q = qsgd["dsar-split-allgather"]
    print(f"| dsar-split-allgather, 4-bit QSGD dense phase | {q:,} | {dense / q:.3g}x |")


if __name__ == "__main__":
    main()
