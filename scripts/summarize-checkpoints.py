#!/usr/bin/env python3
"""docs/reliability.md's table of scripts/checkpoint-trials: one row a kind of
checkpointing and --threads, with the medians of the repeated runs.

    summarize-checkpoints.py DIR

Reads DIR/runs.jsonl. "slower" is the median over the repetitions of each
run's training seconds (the steps and the saves between them) against the
run without checkpoints of the same repetition and --threads, minus 1; the
bytes are those of the checkpoint files each run left, counted on disk.
"the steps alone, slower" compares the median over a run's windows of
EVERY steps (each a progress line's ms per step: the steps' own time, the
saves left out) with the same median of the run without checkpoints: what
the background writer takes from the steps; runs recorded before the
windows were: "-". Last, the delta runs' own line of what their checkpoint
files hold (median over the runs; MB are 10^6 bytes, as in the table).
"""
import json
import pathlib
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = [json.loads(line) for line in (pathlib.Path(sys.argv[1]) / "runs.jsonl").read_text().splitlines()]
    resume = [r for r in runs if r["kind"] == "resume"]
    runs = [r for r in runs if r["kind"] != "resume"]
    by = {}
    for r in runs:
        by.setdefault((r["threads"], r["kind"]), []).append(r)
    every = runs[0]["every"]
    print(f"| --threads | checkpoints every {every} steps | files | MB written | fewer bytes than whole | "
          "training s, median | slower than none, median | the steps alone, slower, median | ms of the steps | "
          "writer CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (threads, kind), rs in by.items():
        none = {r["rep"]: r["train_wall_s"] for r in by[(threads, "none")]}
        whole = statistics.median(r["bytes"] for r in by[(threads, "whole")])
        mb = statistics.median(r["bytes"] for r in rs) / 1e6
        slower = statistics.median(r["train_wall_s"] / none[r["rep"]] - 1 for r in rs)
        ck = [r["checkpoints"] for r in rs if r.get("checkpoints")]
        step_ms = f"{statistics.median(c['step_ms'] for c in ck):.0f}" if ck else "-"
        cpu = f"{statistics.median(c['writer_cpu_s'] for c in ck):.2f}" if ck else "-"
        fewer = f"{whole / 1e6 / mb:.1f}x" if kind == "delta" else "-"
        slow = "-" if kind == "none" else f"{100 * slower:.1f} %"
        none_step = {r["rep"]: r.get("window_ms") for r in by[(threads, "none")]}
        steps = [statistics.median(r["window_ms"]) / statistics.median(none_step[r["rep"]]) - 1 for r in rs
                 if r.get("window_ms") and none_step[r["rep"]]]
        step = f"{100 * statistics.median(steps):.1f} %" if steps and kind != "none" else "-"
        label = {"none": "none", "whole": "whole (every one)",
                 "delta": f"deltas, whole every {rs[0]['whole_every']}"}[kind]
        print(f"| {threads} | {label} | {rs[0]['files']} | {mb:.0f} | {fewer} | "
              f"{statistics.median(r['train_wall_s'] for r in rs):.2f} | {slow} | {step} | {step_ms} | {cpu} |")
    for r in resume:
        print(f"\nResumed from the {r['from']} to step {r['to']} (--threads {r['threads']}): "
              f"{'equal' if r['equal_to_whole_run'] else 'NOT equal'} byte for byte to the whole run's checkpoint.")
    ck = [r["checkpoints"] for r in runs if r["kind"] == "delta" and r.get("checkpoints")]
    if ck:
        med = lambda k: statistics.median(c[k] for c in ck)
        print(f"\nThe delta runs' own line, median of {len(ck)}: checkpoints: {med('wholes'):.0f} whole "
              f"({med('whole_bytes') / 1e6:.1f} MB) and {med('deltas'):.0f} deltas ({med('delta_bytes') / 1e6:.1f} MB); "
              f"{med('delta_bytes') / med('deltas') / 1e6:.1f} MB a delta.")


if __name__ == "__main__":
    main()
