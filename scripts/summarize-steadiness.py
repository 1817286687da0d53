#!/usr/bin/env python3
"""results.md's table of the virtual clock's steadiness: the runs of
scripts/emulator-steadiness (docs/data/emulation/steadiness/PLACEMENT_pP_rR.jsonl),
each run's modelled step (the median of its print intervals after the first),
and the spread of the five runs of a configuration (max / min - 1). A folder
of folders (one per way of charging the dense kernels, --kernel-costs, the
runs interleaved) gives one table with that way as its first column.

    python3 scripts/summarize-steadiness.py [docs/data/emulation/steadiness]"""
import json
import pathlib
import re
import statistics
import sys


def modelled_ms(path):
    trains = [json.loads(l) for l in path.read_text().splitlines() if '"event":"train"' in l]
    return statistics.median(e["modeled_ms_per_it"] for e in trains[1:])


def rows(folder):
    """(placement, P) -> the runs' modelled steps in run order."""
    runs = {}
    for p in folder.glob("*.jsonl"):
        m = re.fullmatch(r"(.+)_p(\d+)_r(\d+)", p.stem)
        runs.setdefault((m.group(1), int(m.group(2))), []).append((int(m.group(3)), modelled_ms(p)))
    return {k: [x for _, x in sorted(rs)] for k, rs in sorted(runs.items())}


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/emulation/steadiness")
    ways = sorted(d for d in out.iterdir() if d.is_dir() and any(d.glob("*.jsonl")))
    if not any(out.glob("*.jsonl")) and ways:
        print("| kernels charged | tables | P | modelled ms/step, run by run | median | spread (max / min - 1) |")
        print("|---|---|---|---|---|---|")
        table = [((placement, p, way.name), ms) for way in ways for (placement, p), ms in rows(way).items()]
        for (placement, p, way), ms in sorted(table):
            print(f"| {way} | {placement} | {p} | {', '.join(f'{x:.2f}' for x in ms)} | {statistics.median(ms):.2f} "
                  f"| {100 * (max(ms) / min(ms) - 1):.1f} % |")
        return
    print("| tables | P | modelled ms/step, run by run | spread (max / min - 1) |")
    print("|---|---|---|---|")
    for (placement, p), ms in rows(out).items():
        print(f"| {placement} | {p} | {', '.join(f'{x:.2f}' for x in ms)} | {100 * (max(ms) / min(ms) - 1):.1f} % |")


if __name__ == "__main__":
    main()
