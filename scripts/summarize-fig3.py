#!/usr/bin/env python3
"""results.md's three tables of sparq's sparse allreduce in the shape of
SparCML's Figure 3, from scripts/sparcml-figure3's JSON rows: time against
ranks and against density on the virtual clock, and for real under mpiexec.
Cells: time (bytes a rank sent, MB); the simulated tables also name what
`auto` picked and, against ranks, its time over the best sparse algorithm's.

    summarize-fig3.py DIR        (DIR holds fig3_*.json: docs/data)
"""
import json
import pathlib
import sys

SPARSE = ["ssar-recursive-double", "ssar-split-allgather", "dsar-split-allgather"]


def by_algo(rows):
    """{algorithm: row}, names with dashes (older runs wrote underscores);
    auto's row under "auto", what it ran under "picked"."""
    out = {}
    for r in rows:
        name = r["algo"].replace("_", "-")
        if name.startswith("auto:"):
            out["picked"] = name.split(":", 1)[1]
            name = "auto"
        out[name] = r
    return out


def load(path):
    return json.loads(pathlib.Path(path).read_text())


def cell(r, real=False):
    ms = (r["time_us"] if real else r["sim_time_us"]) / 1e3
    return f"{ms:.1f} ms" if real else f"{ms:.2f} ms", f"({r['bytes_sent_per_rank'] / 1e6:.1f} MB)"


def fmt(r, real=False):
    return "-" if r is None else " ".join(cell(r, real))


def header(first, extra, after):
    cols = [first] + extra + SPARSE + ["dense"] + after
    return "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = pathlib.Path(sys.argv[1])
    print(header("P", ["result nnz"], ["auto picks", "auto / best sparse"]))
    for p in (2, 4, 8, 16, 32, 64, 128, 256):
        by = by_algo(load(d / f"fig3_ranks_P{p}.json"))
        best = min(by[a]["sim_time_us"] for a in SPARSE)
        print(f"| {p} | {int(by[SPARSE[0]]['result_nnz'])} | " + " | ".join(fmt(by.get(a)) for a in SPARSE + ["dense"])
              + f" | {by['picked']} | {by['auto']['sim_time_us'] / best:.3f} |")
    print()
    rows = load(d / "fig3_density_P8_sim.json")
    print(header("density", ["result nnz"], ["auto picks"]))
    for density in sorted({r["density"] for r in rows}):
        by = by_algo([r for r in rows if r["density"] == density])
        print(f"| {100 * density:.2f}% | {int(by[SPARSE[0]]['result_nnz'])} | "
              + " | ".join(fmt(by.get(a)) for a in SPARSE + ["dense"]) + f" | {by['picked']} |")
    print()
    print(header("P", [], []))
    for p in (2, 4, 8):
        by = by_algo(load(d / f"fig3_ranks_mpi_P{p}.json"))
        print(f"| {p} | " + " | ".join(fmt(by.get(a), real=True) for a in SPARSE + ["dense"]) + " |")

if __name__ == "__main__":
    main()
