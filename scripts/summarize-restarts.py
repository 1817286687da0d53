#!/usr/bin/env python3
"""docs/reliability.md's table of scripts/restart-trials: one row a plan.

    summarize-restarts.py DIR

Reads DIR/trials.jsonl. A trial passes when the launch ended 0 after one
restart, lost no more time than its bound (the checkpoint interval at the
3-host pace + 30 s), left nothing on any host, and ended with the model of
the uninterrupted 3-host run resumed from the same checkpoint, bit for bit.
A reference run that failed (twice: scripts/restart-trials tries it again)
leaves its trial without a time lost or a comparison, and is counted apart.
"""
import json
import pathlib
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    by_plan = {}
    for line in (pathlib.Path(sys.argv[1]) / "trials.jsonl").read_text().splitlines():
        t = json.loads(line)
        by_plan.setdefault(t["plan"], []).append(t)
    print("| plan | trials | finished with no one acting | restart s after the cut, median (max) | "
          "time lost s, median (max) | within the interval + 30 s | model == the reference resumed on as many ranks | nothing left |")
    print("|---|---|---|---|---|---|---|---|")
    for plan, ts in by_plan.items():
        n = len(ts)
        # A trial whose reference run failed twice has no pace, so no time lost.
        done = [t for t in ts if t["rc"] == 0 and t["lost_s"] is not None and t.get("reference_rc", 0) == 0]
        no_ref = sum(t["rc"] == 0 and t.get("reference_rc", 0) not in (0, None) for t in ts)
        restart = [t["restart_s"] for t in ts if t["restart_s"] is not None]
        lost = [t["lost_s"] for t in done]
        spread = lambda xs: f"{statistics.median(xs):.1f} ({max(xs):.1f})" if xs else "-"
        print(f"| {plan} | {n} | {len(done)}/{n} | {spread(restart)} | {spread(lost)} | "
              f"{sum(t['lost_s'] <= t['bound_s'] for t in done)}/{n} | {sum(t['identical'] for t in ts)}/{n}"
              f"{f' ({no_ref} reference runs failed)' if no_ref else ''} | "
              f"{sum(all(h.endswith(':0') for h in t['left'].split()) for t in ts)}/{n} |")


if __name__ == "__main__":
    main()
