#!/usr/bin/env python3
"""results.md's "P ranks equal one rank" table from scripts/dp-equivalence's
outputs: each run's final training loss, test loss and AUC, and the bytes
rank 0 sent for each entity of its accounting (with the ratio against the
plain fp32 exchange).

    summarize-dp-equivalence.py DIR
"""
import pathlib
import re
import sys

RUNS = ["1-rank", "ranks-2", "mpiexec-2", "ranks-2-no-overlap", "ranks-3", "ranks-2-table-wise",
        "mpiexec-2-table-wise", "ranks-3-table-wise"]


def parse(text):
    train = re.findall(r"^Finished training it .*?, loss ([\d.]+)", text, re.M)[-1]
    test = re.findall(r"^Testing at .*?, loss ([\d.]+), .*?auc ([\d.]+)", text, re.M)[-1]
    sent = {m[0]: (int(m[1]), m[2]) for m in re.findall(r"^\s+(\w+)\s+\d+\s+(\d+)\s+\d+\s+([\d.]+x)", text, re.M)}
    return train, test, sent


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = pathlib.Path(sys.argv[1])
    print("| run | final train loss | test loss | test AUC | bytes sent, rank 0 (ratio) |")
    print("|---|---|---|---|---|")
    for name in RUNS:
        train, (loss, auc), sent = parse((d / f"{name}.out").read_text())
        bytes_ = ", ".join(f"{k} {v:,} ({r})" for k, (v, r) in sent.items()) or "-"
        print(f"| {name} | {train} | {loss} | {auc} | {bytes_} |")


if __name__ == "__main__":
    main()
