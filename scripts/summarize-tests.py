#!/usr/bin/env python3
"""The test points of one `sparq train --metrics` run as results.md's
table: step, test loss, accuracy, AUC.

    summarize-tests.py METRICS.jsonl
"""
import json
import pathlib
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    events = [json.loads(line) for line in pathlib.Path(sys.argv[1]).read_text().splitlines()]
    print("| it | test loss | accuracy | AUC |")
    print("|---|---|---|---|")
    for e in events:
        if e.get("event") == "test":
            print(f"| {e['step']} | {e['loss']:.6f} | {100 * e['accuracy']:.3f} % | {e['auc']:.4f} |")


if __name__ == "__main__":
    main()
