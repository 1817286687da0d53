#!/usr/bin/env python3
"""scripts/results-check passes on the project as it is and fails, naming
the place, when a stored run or a published figure is changed by hand.

    results_check_test.py PROJECT_ROOT

One process: a page changed by hand is checked against the project's own
runs (--data-root), so the summarize scripts run once for all such changes;
a changed run is checked in a copy of the whole project.
"""
import importlib.machinery
import json
import pathlib
import shutil
import sys
import tempfile


def load_results_check(src):
    loader = importlib.machinery.SourceFileLoader("results_check", str(src / "scripts/results-check"))
    module = type(sys)("results_check")
    loader.exec_module(module)
    return module


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


# (what is changed, how, what the check must name, whether it changes the runs)
MUTATIONS = [
    ("a stored run", mutate_run, "docs/results.md:", True),
    ("a pasted table", lambda r: replace_once(r / "docs/results.md", "| **44.66x** |", "| **44.67x** |"), "44.67", False),
    ("a table a shell script prints", lambda r: replace_once(r / "docs/reliability.md", "| with it | 0 of 30 |",
                                                             "| with it | 1 of 30 |"), "docs/reliability.md:", False),
    ("a written block", lambda r: replace_once(r / "docs/results.md", "<!-- linear-defaults:begin -->\n",
                                                "<!-- linear-defaults:begin -->\nby hand\n"), "by hand", False),
    ("the README's table", lambda r: replace_once(r / "README.md", "(1.67x in the sweep), each codec", "(1.97x in the sweep), each codec"),
     "README.md:", False),
    ("a table without its mark", lambda r: replace_once(r / "docs/results.md", "<!-- kept as recorded: history, each "
                                                        "change against the build before it", "<!-- each change"),
     "a table with neither a results-check mark nor a kept-as-recorded reason", False),
    ("a figure in prose", lambda r: replace_once(r / "docs/results.md", "lower (0.507950", "lower (0.507960"),
     "0.507960 in prose", False),
    ("a figure in the README's prose", lambda r: replace_once(r / "README.md", "AUC 0.7751", "AUC 0.7851"),
     "0.7851 in prose", False),
    ("a paragraph of history without its mark", lambda r: replace_once(
        r / "docs/results.md", "<!-- kept as recorded: the generator's tuning runs of an early session, not stored -->\n",
        ""), "0.128 in prose", False),
    ("a folder of runs without its record", lambda r: (r / "docs/data/time/1gbit/provenance.txt").unlink(),
     "docs/data/time/1gbit: stored runs with no record", True),
]


def main():
    src = pathlib.Path(sys.argv[1])
    rc = load_results_check(src)
    problems = rc.check(rc.Roots(src, src))
    assert not problems, "results-check fails on the project itself:\n" + "\n".join(problems)
    for what, mutate, named, of_runs in MUTATIONS:
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            if of_runs:
                for d in ("docs", "scripts"):
                    shutil.copytree(src / d, root / d, ignore=shutil.ignore_patterns("figures", "__pycache__"))
            else:
                (root / "docs").mkdir()
                for page in src.glob("docs/*.md"):
                    shutil.copy(page, root / "docs" / page.name)
            shutil.copy(src / "README.md", root / "README.md")
            mutate(root)
            out = "\n".join(rc.check(rc.Roots(root, root if of_runs else src)))
            assert named in out, f"{what} changed by hand: results-check said:\n{out}"
            print(f"{what} changed by hand: caught")


if __name__ == "__main__":
    main()
