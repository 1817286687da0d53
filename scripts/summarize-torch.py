#!/usr/bin/env python3
"""results.md's table of examples/dlrm_ddp.py on the shaped cluster, from
scripts/reproduce-torch's runs.tsv: for fp32 and bf16 MLPs, torch's own
allreduce with fp32 alltoalls (`--hook none --emb-codec fp32`) against
sparq's DCT-DP hook with q4/q2 alltoalls; ms a step over the epoch (each
round's, and the median), the ratio of the medians, the test loss and the
kB rank 0 sent a step; then, under the table, the hook's test loss change
and how many times fewer bytes it sent.

    summarize-torch.py DIR
"""
import pathlib
import re
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = {}
    for line in (pathlib.Path(sys.argv[1]) / "runs.tsv").read_text().splitlines():
        _, prec, hook, codec, transport, ms, loss, sent = line.split("\t")
        runs.setdefault((prec, hook), []).append((float(ms), float(loss), sent, transport))
    print("| MLPs | `--hook none --emb-codec fp32`, ms/step | `--hook dct:0.98,1000 --emb-codec q4/q2`, ms/step | "
          "faster | test loss, none / dct | sent a step, rank 0: none / dct |")
    print("|---|---|---|---|---|---|")
    for prec in ("fp32", "bf16"):
        a, b = runs[(prec, "none")], runs[(prec, "dct:0.98,1000")]
        ma, mb = statistics.median(r[0] for r in a), statistics.median(r[0] for r in b)
        cell = lambda rs, m: f"{m:.1f} <sub>{', '.join(f'{r[0]:.1f}' for r in rs)}</sub>"
        print(f"| {prec} | {cell(a, ma)} | {cell(b, mb)} | {ma / mb:.2f}x | "
              f"{statistics.median(r[1] for r in a):.6f} / {statistics.median(r[1] for r in b):.6f} | "
              f"{a[-1][2]} / {b[-1][2]} |")
    print()
    for prec in ("fp32", "bf16"):
        a, b = runs[(prec, "none")], runs[(prec, "dct:0.98,1000")]
        la, lb = statistics.median(r[1] for r in a), statistics.median(r[1] for r in b)
        kb = lambda sent: sum(float(x) for x in re.findall(r"([\d.]+) kB", sent))
        print(f"{prec}: the hook's test loss {100 * (lb / la - 1):+.2f} % against none's, "
              f"{kb(a[-1][2]) / kb(b[-1][2]):.1f}x fewer kB a step")


if __name__ == "__main__":
    main()
