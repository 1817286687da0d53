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

--stack PREFIX adds the network stack's CPU time per byte and per message
(the model's third and fourth fields): PREFIX*_s<SIZE>_n<COUNT>_r<REP>.cpu are
the machine's CPU ticks (/proc/stat: user, system + softirq, idle) before
and after one TCP stream of COUNT messages of SIZE bytes between two hosts
(scripts/stack-cpu.py), two counts for each of two sizes, each repeated. The
difference in system time (the median of the repetitions: the machine's
system time also holds its other work, and TCP's autocorking merges small
writes now and then) between the two counts of a size,
over the messages between them, is what one message of that size costs both
ends; the two sizes give the cost per message and per byte, at each end half
of it.

Rows larger than one ring segment per step would pipeline several messages
per step; the caller keeps sizes at most P x the segment (1 MiB).
"""
import glob
import json
import os
import re
import sys

import numpy as np


def messages(algo, p):
    if algo == "ring":
        return 2 * (p - 1)
    if algo == "pairwise":
        return p - 1
    sys.exit(f"fit-net.py: no message count for algorithm '{algo}' (ring or pairwise)")


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def stack_cpu(prefix):
    """(CPU seconds per byte, per message) at each end."""
    reps = {}  # (size, count) -> [system seconds of each repetition]
    for path in glob.glob(f"{prefix}*_s*_n*_r*.cpu"):
        m = re.search(r"_s(\d+)_n(\d+)_r\d+\.cpu$", path)
        with open(path) as fh:
            ticks = [int(x) for x in fh.read().split()]
        reps.setdefault((int(m.group(1)), int(m.group(2))), []).append((ticks[4] - ticks[1]) / TICKS_PER_S)
    runs = {}  # size -> [(count, median system seconds)]
    for (size, count), s in reps.items():
        runs.setdefault(size, []).append((count, float(np.median(s))))
    per_message = {}  # size -> system seconds one message costs both ends
    for size, rs in runs.items():
        if len(rs) != 2:
            sys.exit(f"fit-net.py: {prefix}: size {size} needs runs of two counts, found {sorted(rs)}")
        (n0, s0), (n1, s1) = sorted(rs)
        per_message[size] = max(s1 - s0, 0.0) / (n1 - n0)
    if len(per_message) != 2:
        sys.exit(f"fit-net.py: {prefix}: need runs of two message sizes, found {sorted(per_message)}")
    (b0, c0), (b1, c1) = sorted(per_message.items())
    per_byte = max((c1 - c0) / (b1 - b0), 0.0)
    for size, c in sorted(per_message.items()):
        print(f"stack: {size:>7} B messages: {c * 1e6:.2f} us of system CPU each (both ends)", file=sys.stderr)
    return per_byte / 2, max(c0 - per_byte * b0, 0.0) / 2


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
        per_byte, per_msg = stack_cpu(stack)
        print(f"network stack: {per_msg * 1e6:.2f} us per message and {per_byte * 1e9:.3f} ns per byte of "
              "system CPU at each end", file=sys.stderr)
        spec += f",{per_byte * 1e9:.3f}ns,{per_msg * 1e6:.2f}us"
    print(spec)


main()
