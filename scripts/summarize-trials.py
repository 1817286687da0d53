#!/usr/bin/env python3
"""docs/reliability.md's tables of the kill and resume trials: a row a plan and mode.

    summarize-trials.py kill DIR     scripts/kill-trials
    summarize-trials.py resume DIR   scripts/fault-resume
    summarize-trials.py fuzz DIR     scripts/fuzz all ... -print_final_stats=1 (its logs)
    summarize-trials.py soak DIR     scripts/soak (its metrics.jsonl.gz)

Reads DIR/trials.jsonl. Kill trials: a trial passes when the job ended
non-zero within --timeout + 5 s; "names the rank" counts the error outputs
that name the killed rank, "left behind" the trials after which a sparq
process was still alive, "hung" the jobs that needed the script's 60 s
limit. Resume trials: "killed at" is the step of the checkpoint each resumed
run started from, "resumed == uninterrupted" the trials whose end equals the
uninterrupted run's checkpoint byte for byte. Fuzzing: every DIR/TARGET.log,
libFuzzer's final count and speed, and whether it reported a finding.
Soak: from DIR/metrics.jsonl.gz (the run's progress lines), the fastest and
slowest progress interval after the warm-up (DIR/summary.txt's, else
120 s), and the training loss: its largest rise from one progress line to
the next with the five lines after it, its lowest and its last.
"""
import gzip
import json
import pathlib
import re
import sys

LABELS = {
    "kill": {
        "dp-dct": "data parallel, `--dp-codec dct:0.9,7`",
        "dp-tablewise": "data parallel, table-wise, q4/q2 alltoalls",
        "mp": "model parallel, 3 stages, 2 micro-batches",
        "hybrid": "hybrid 2 x 2, `--dp-codec dct:0.9,7`",
        "ps": "parameter server, 3 workers + 1 server, `--max-staleness 1`",
    },
    "resume": {
        "dp-dct": "data parallel, 2 ranks, `--dp-codec dct:0.9,7`",
        "hybrid": "hybrid 2 x 2, `--mp-codec dct:0.9 --dp-codec dct:0.9,7`",
        "ps": "parameter server, 1 worker + 1 server, `--dp-codec dct:0.9,7`",
    },
}


def kill_row(ts):
    n = len(ts)
    ok = sum(t["rc"] != 0 and t["end_s"] <= t["timeout"] + 5 for t in ts)
    return (f"{n} | {ok}/{n} | {max(t['end_s'] for t in ts):.1f} | {sum(t['names_rank'] for t in ts)}/{n} | "
            f"{sum(t['left_behind'] for t in ts)} | {sum(t['hung'] for t in ts)}")


def resume_row(ts):
    return f"{len(ts)} | {', '.join(str(t['killed_at']) for t in ts)} | {sum(t['equal'] for t in ts)}/{len(ts)}"


TABLES = {
    "kill": ("| plan | ranks | mode | trials | ended non-zero in time | slowest end (s) | names the rank | "
             "left behind | hung |\n|---|---:|---|---:|---:|---:|---:|---:|---:|", True, kill_row),
    "resume": ("| plan | mode | trials | killed at (step) | resumed == uninterrupted |\n|---|---|---:|---|---:|",
               False, resume_row),
}


def fuzz_table(folder):
    print("| target | executions | exec/s | findings |")
    print("|---|---:|---:|---:|")
    for log in sorted(pathlib.Path(folder).glob("*.log")):
        text = log.read_text(errors="replace")
        stat = dict(re.findall(r"^stat::(\w+):\s*(\d+)", text, re.M))
        found = bool(re.search(r"ERROR: (libFuzzer|AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error:", text))
        print(f"| `{log.stem}` | {int(stat.get('number_of_executed_units', 0)):,} | "
              f"{int(stat.get('average_exec_per_sec', 0)):,} | {int(found)} |")


def soak(folder):
    folder = pathlib.Path(folder)
    with gzip.open(folder / "metrics.jsonl.gz", "rt") as f:
        events = [json.loads(line) for line in f]
    summary = folder / "summary.txt"
    warm = re.search(r" at (\d+) s,", summary.read_text()) if summary.exists() else None
    warm = int(warm.group(1)) if warm else 120
    lr = next(e["flags"]["learning-rate"] for e in events if e.get("event") == "config")
    train = [e for e in events if e.get("event") == "train"]
    after = [e["ms_per_it"] for e in train if e["wall_s"] >= warm]
    print(f"progress intervals after the {warm} s warm-up: {min(after):.0f}-{max(after):.0f} ms a step "
          f"({len(after)} intervals)")
    i = max(range(1, len(train)), key=lambda k: train[k]["loss"] - train[k - 1]["loss"])
    low = min(train, key=lambda e: e["loss"])
    then = ", ".join(f"{e['loss']:.3f}" for e in train[i + 1:i + 6])
    print(f"training loss (learning rate {lr}): largest rise from {train[i - 1]['loss']:.3f} (step "
          f"{train[i - 1]['step']}) to {train[i]['loss']:.3f} (step {train[i]['step']}), then {then}; "
          f"lowest {low['loss']:.3f} (step {low['step']}); last {train[-1]['loss']:.3f} (step {train[-1]['step']})")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "fuzz":
        return fuzz_table(sys.argv[2])
    if len(sys.argv) == 3 and sys.argv[1] == "soak":
        return soak(sys.argv[2])
    if len(sys.argv) != 3 or sys.argv[1] not in TABLES:
        sys.exit(__doc__)
    kind = sys.argv[1]
    header, with_ranks, row = TABLES[kind]
    rows = {}
    for line in (pathlib.Path(sys.argv[2]) / "trials.jsonl").read_text().splitlines():
        t = json.loads(line)
        rows.setdefault((t["plan"], t["mode"]), []).append(t)
    print(header)
    last = None
    for (plan, mode), ts in rows.items():
        label = LABELS[kind].get(plan, plan) + (f" | {ts[0]['ranks']}" if with_ranks else "")
        head = label if plan != last else (" | " if with_ranks else "")
        last = plan
        print(f"| {head} | {mode} | {row(ts)} |")


if __name__ == "__main__":
    main()
