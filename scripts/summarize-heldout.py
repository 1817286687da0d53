#!/usr/bin/env python3
"""results.md's table of DCT-MP's test loss with and without the mask at
test time, from the output of docs/data/mp/heldout/run.sh (its "seed S eta
E, ...: loss L" lines): the change is against eta 0 of the same seed.

    summarize-heldout.py RUN_OUTPUT
"""
import pathlib
import re
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    loss = {}
    for seed, eta, how, value in re.findall(r"^seed (\d+) eta ([\d.]+), (mask at test|no mask)[^:]*:\s+loss ([\d.]+)",
                                            pathlib.Path(sys.argv[1]).read_text(), re.M):
        loss[(int(seed), eta, how)] = float(value)
    print("| seed | eta 0 | eta 0.95, mask at test (trainer) | eta 0.95, no mask (dense forward pass) |")
    print("|---|---|---|---|")
    for seed in sorted({k[0] for k in loss}):
        base = loss[(seed, "0", "mask at test")]
        cells = [f"{loss[(seed, '0.95', how)]:.6f} ({100 * (loss[(seed, '0.95', how)] / base - 1):+.2f} %)"
                 for how in ("mask at test", "no mask")]
        print(f"| {seed} | {base:.6f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
