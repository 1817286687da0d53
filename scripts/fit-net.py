#!/usr/bin/python3
"""The alpha-beta network that a cluster's own collective benchmarks imply.

    fit-net.py [--stack PREFIX] BENCH.json [BENCH.json ...]

Reads `sparq bench allreduce --algo ring` and `sparq bench alltoall --algo
pairwise` rows (`--json`) measured on the cluster, and fits the model that
`--net BW,LAT` charges: every message costs LAT plus its bytes over BW, and a
rank's messages go one after the other. On P ranks a ring allreduce is
2(P-1) messages in sequence, a pairwise alltoall P-1, so a row's median time is
modelled as messages * LAT + bytes_sent_per_rank / BW (bytes from the
transport's counters). Least squares over all rows, both parameters kept
non-negative. Prints the `--net` value (e.g. `97.2MBps,61us`) on stdout and
the fit, row by row, on stderr.

--stack PREFIX adds the network stack's CPU time per byte (the model's third
field): PREFIX_i20.json/.cpu and PREFIX_i200.json/.cpu are the same ring
allreduce benchmark run for 20 and 200 iterations with the machine's CPU
ticks (/proc/stat: user, system + softirq, idle) before and after; the
system time the 180 extra iterations took, over twice the bytes they sent
(each byte is sent and received), is the kernel's CPU per byte at each end.

Rows larger than one ring segment per step would pipeline several messages
per step; the caller keeps sizes at most P x the segment (1 MiB).
"""
import json
import os
import sys

import numpy as np


def messages(algo, p):
    if algo == "ring":
        return 2 * (p - 1)
    if algo == "pairwise":
        return p - 1
    sys.exit(f"fit-net.py: no message count for algorithm '{algo}' (ring or pairwise)")


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def stack_cpu_per_byte(prefix):
    runs = []
    for iters in (20, 200):
        with open(f"{prefix}_i{iters}.json") as fh:
            (row,) = json.load(fh)
        with open(f"{prefix}_i{iters}.cpu") as fh:
            ticks = [int(x) for x in fh.read().split()]
        system = (ticks[4] - ticks[1]) / TICKS_PER_S
        runs.append((row["iters"], system, row["bytes_sent_per_rank"] * row["ranks"]))
    (i0, s0, b0), (i1, s1, b1) = runs
    if b0 != b1 or i1 <= i0:
        sys.exit(f"fit-net.py: {prefix}: the two runs must differ only in iterations")
    return max(s1 - s0, 0.0) / (2 * (i1 - i0) * b0)


def main():
    args = sys.argv[1:]
    stack = None
    if args[:1] == ["--stack"]:
        if len(args) < 2:
            sys.exit(__doc__)
        stack, args = args[1], args[2:]
    if not args:
        sys.exit(__doc__)
    rows = []
    for path in args:
        with open(path) as fh:
            for r in json.load(fh):
                if r.get("wrong"):
                    sys.exit(f"fit-net.py: {path}: a row with wrong elements")
                rows.append((r["algo"], r["size"], messages(r["algo"], r["ranks"]), r["bytes_sent_per_rank"],
                             r["time_us"] * 1e-6))
    if len(rows) < 2:
        sys.exit("fit-net.py: need at least two rows")
    a = np.array([[m, b] for _, _, m, b, _ in rows], dtype=float)
    t = np.array([s for *_, s in rows])
    (alpha, beta), *_ = np.linalg.lstsq(a, t, rcond=None)
    # Keep both terms non-negative: refit the other alone when one goes below zero.
    if alpha < 0:
        alpha, beta = 0.0, float(a[:, 1] @ t / (a[:, 1] @ a[:, 1]))
    if beta <= 0:
        sys.exit("fit-net.py: the times do not grow with the bytes; no bandwidth to fit")
    for (algo, size, m, b, s), fit in zip(rows, a @ np.array([alpha, beta])):
        print(f"{algo:>9} {size:>9} B: measured {s * 1e3:8.3f} ms, model {fit * 1e3:8.3f} ms ({fit / s:.2f}x)",
              file=sys.stderr)
    spec = f"{1 / beta / 1e6:.1f}MBps,{alpha * 1e6:.0f}us"
    if stack:
        o = stack_cpu_per_byte(stack)
        print(f"network stack: {o * 1e9:.3f} ns of system CPU per byte at each end", file=sys.stderr)
        spec += f",{o * 1e9:.3f}ns"
    print(spec)


main()
