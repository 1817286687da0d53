#!/usr/bin/env python3
"""The phases of a `.ci/run` log whose lines carry the epoch second they were
printed at (how docs/data/ci-time's logs were taken:
  .ci/run 2>&1 | while IFS= read -r l; do printf '%s %s\\n' "$(date +%s)" "$l"; done
), as one markdown row per log (named COMMIT.log or COMMIT.log.gz): seconds
in each phase, and in all (.ci/run's own count, from its last line).
    scripts/ci-phases.py LOG [LOG ...]   (plain or .gz)
"""
import gzip
import sys

PHASES = ("release build", "pip install .", "release tests", "ASan build", "ASan tests", "TSan build", "TSan tests",
          "fuzz build + runs", "all")


def phases(lines):
    """Seconds in each phase, and in all."""
    t = {}
    projects = []
    for line in lines:
        stamp, _, text = line.partition(" ")
        s = int(stamp)
        if text.startswith("scripts/setup: built"):
            t["build"] = s
        elif text.startswith("scripts/setup: installed"):
            t["pip"] = s
        elif text.startswith("Test project"):
            projects.append(s)
        elif text.startswith("Total Test time"):
            t.setdefault("tests", []).append(s)
        elif text.startswith("ci: done in "):
            t["end"], took = s, int(text.split()[3])
    release, asan, tsan = t["tests"]
    start = t["end"] - took
    return [t["build"] - start, t["pip"] - t["build"], release - t["pip"], projects[1] - release,
            asan - projects[1], projects[2] - asan, tsan - projects[2], t["end"] - tsan, t["end"] - start]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| commit | " + " | ".join(PHASES) + " |")
    print("|---" * (len(PHASES) + 1) + "|")
    for path in sys.argv[1:]:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            row = phases(f.read().splitlines())
        commit = path.rsplit("/", 1)[-1].split(".")[0]  # the logs are named COMMIT.log[.gz]
        print(f"| {commit} | " + " | ".join(str(s) for s in row) + " |")


if __name__ == "__main__":
    main()
