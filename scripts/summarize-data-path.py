#!/usr/bin/env python3
"""results.md's "Data path" table from scripts/data-path-trials' output:
the median over the repetitions of reading 1M records from the TSV and from
the binary file, and the conversion's own line.

    summarize-data-path.py SCAN_TXT
"""
import pathlib
import re
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    text = pathlib.Path(sys.argv[1]).read_text()
    seconds = {"tsv": [], "binary": []}
    for kind, n, s in re.findall(r"^scanned \S+ \((tsv|binary)[^)]*\): (\d+) records in ([\d.]+) s", text, re.M):
        seconds[kind].append((int(n), float(s)))
    conv = re.search(r"^converted (\d+) records .* in ([\d.]+) s \((\d+) records/s\)", text, re.M)
    print(f"convert: {conv[1]} records in {conv[2]} s, {int(conv[3]) / 1e3:.0f}k records/s")
    print("| read 1M records (warm page cache) | time | records/s |")
    print("|---|---|---|")
    med = {}
    for kind, label in (("tsv", "TSV, streaming parser thread"), ("binary", "binary, `mmap` (MAP_POPULATE)")):
        n = seconds[kind][0][0]
        med[kind] = statistics.median(s for _, s in seconds[kind])
        print(f"| {label} | {med[kind]:.3g} s | {n / med[kind] / 1e6:.2g} M |")
    print(f"binary {med['tsv'] / med['binary']:.0f}x faster to read than TSV (medians of {len(seconds['tsv'])})")


if __name__ == "__main__":
    main()
