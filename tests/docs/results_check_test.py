#!/usr/bin/env python3
"""scripts/results-check passes on the project as it is and fails, naming
the place, when a stored run or a published figure is changed by hand.

    results_check_test.py PROJECT_ROOT
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile


def check(root):
    p = subprocess.run([sys.executable, str(root / "scripts/results-check"), "--root", str(root)],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def replace_once(path, old, new):
    text = path.read_text()
    assert text.count(old) >= 1, f"{path}: '{old}' not found: the mutation needs updating"
    path.write_text(text.replace(old, new, 1))


def mutate_run(root):
    """A stored run's test loss, moved in its last digits."""
    run = root / "docs/data/dp/t2_none_s1.jsonl"
    lines = run.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if json.loads(line).get("event") == "test")
    event = json.loads(lines[last])
    event["loss"] *= 1.001
    lines[last] = json.dumps(event)
    run.write_text("\n".join(lines) + "\n")


# (what is changed, how, what the check must name)
MUTATIONS = [
    ("a stored run", mutate_run, "docs/results.md:"),
    ("a pasted table", lambda r: replace_once(r / "docs/results.md", "| **44.66x** |", "| **44.67x** |"), "44.67"),
    ("a table a shell script prints", lambda r: replace_once(r / "docs/reliability.md", "| with it | 0 of 30 |",
                                                             "| with it | 1 of 30 |"), "docs/reliability.md:"),
    ("a written block", lambda r: replace_once(r / "docs/results.md", "<!-- linear-defaults:begin -->\n",
                                                "<!-- linear-defaults:begin -->\nby hand\n"), "by hand"),
    ("the README's table", lambda r: replace_once(r / "README.md", "| 1.54x faster per step", "| 1.58x faster per step"),
     "README.md:"),
    ("a table without its mark", lambda r: replace_once(r / "docs/results.md", "<!-- kept as recorded: history, each "
                                                        "change against the build before it", "<!-- each change"),
     "a table with neither a results-check mark nor a kept-as-recorded reason"),
    ("a figure in prose", lambda r: replace_once(r / "docs/results.md", "lower (0.507950", "lower (0.507960"),
     "0.507960 in prose"),
    ("a figure in the README's prose", lambda r: replace_once(r / "README.md", "AUC 0.7747", "AUC 0.7847"),
     "0.7847 in prose"),
    ("a paragraph of history without its mark", lambda r: replace_once(
        r / "docs/results.md", "<!-- kept as recorded: the generator's tuning runs of an early session, not stored -->\n",
        ""), "0.128 in prose"),
    ("a folder of runs without its record", lambda r: (r / "docs/data/time/1gbit/provenance.txt").unlink(),
     "docs/data/time/1gbit: stored runs with no record"),
]


def main():
    src = pathlib.Path(sys.argv[1])
    rc, out = check(src)
    assert rc == 0, f"results-check fails on the project itself:\n{out}"
    for what, mutate, named in MUTATIONS:
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            for d in ("docs", "scripts"):
                shutil.copytree(src / d, root / d, ignore=shutil.ignore_patterns("figures", "__pycache__"))
            shutil.copy(src / "README.md", root / "README.md")
            mutate(root)
            rc, out = check(root)
            assert rc == 1 and named in out, f"{what} changed by hand: results-check said (rc {rc}):\n{out}"
            print(f"{what} changed by hand: caught")


if __name__ == "__main__":
    main()
