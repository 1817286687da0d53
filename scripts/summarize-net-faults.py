#!/usr/bin/env python3
"""docs/reliability.md's tables of scripts/net-fault-trials: one row per
plan, --timeout and fault, from the trials' JSON lines.

    summarize-net-faults.py DIR [DIR ...]

Reads DIR/trials.jsonl of each DIR in order; a later DIR's trials of a plan,
timeout and fault replace an earlier one's (a rerun). The columns follow
the script's own summary: a cut must end the launch non-zero within
--timeout + 30 s and name the lost host; every trial must leave no process
on any host; a flap or a slow link must end normally with the undisturbed
run's checkpoint ('n/a' where two undisturbed runs differ, as the
parameter server's do; trials from before the script recorded that say
how many matched).
"""
import json
import pathlib
import sys


def load(dirs):
    groups = {}  # (plan, timeout, fault) -> trials, in first-seen order
    for d in dirs:
        mine = {}
        for line in (pathlib.Path(d) / "trials.jsonl").read_text().splitlines():
            t = json.loads(line)
            mine.setdefault((t["plan"], t.get("timeout", 20), t["fault"]), []).append(t)
        groups.update(mine)
    return groups


def row(key, trials):
    plan, timeout, fault = key
    n = len(trials)
    frac = lambda k: f"{k}/{n}"
    clean = frac(sum(all(h.endswith(":0") for h in t["left"].split()) for t in trials))
    slowest_clean = max(t["clean_s"] for t in trials)
    if fault.startswith("cut"):
        ok = sum(t["rc"] not in (0, 124, 137) and t["end_s"] <= timeout + 30 for t in trials)
        resumes = [t["resume_identical"] for t in trials if t["resume_identical"] is not None]
        cells = [frac(ok), f"{max(t['end_s'] for t in trials):.1f}", frac(sum(t["names_rank"] for t in trials)),
                 clean, slowest_clean, "-", f"{sum(resumes)}/{len(resumes)}" if resumes else "-"]
    else:
        same = frac(sum(t["ckpt_identical"] for t in trials))
        comparable = all(t.get("comparable", True) for t in trials)  # recorded since the timeout trials
        cells = [frac(sum(t["rc"] == 0 for t in trials)), "-", "-", clean, slowest_clean,
                 same if comparable else "n/a", "-"]
    return f"| {plan} | {timeout} | {fault} | {n} | " + " | ".join(str(c) for c in cells) + " |"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| plan | --timeout s | fault | trials | ended as it should | slowest end s | names the lost host | "
          "nothing left | slowest clean-up s | ckpt == | resume == |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key, trials in load(sys.argv[1:]).items():
        print(row(key, trials))


if __name__ == "__main__":
    main()
