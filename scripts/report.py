#!/usr/bin/python3
"""Plots of `sparq train --metrics` files, one curve per file (run by `sparq report`).

    report.py --out DIR METRICS...

Writes into DIR: test_loss.png, auc.png and ne.png (each against step and
against training time, train_s), train_loss.png (against step) and
traffic.png (bytes per step of each entity, from the train events).
A run's label is the flags in which its config line differs from the other
files' (the file's name when none differ).

Every file must start with the run's config event; a line that is not a JSON
event is an error naming file:line. Both are checked before matplotlib is
imported, so bad input is reported the same where matplotlib is missing.
NE (test loss over the entropy of the test set's positive rate) comes from the
test events' "ne", or from their loss and "positive_rate"; a file whose test
events carry neither has no NE curve, and the script says so.
"""
import argparse
import json
import math
import os
import sys
import tempfile

# Flags that name output files: they differ between runs without making the runs differ.
OUTPUT_FLAGS = {"metrics", "save", "load"}


def fail(msg):
    print(f"sparq: error: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    """The events of one metrics file, checked."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        fail(f"cannot read '{path}': {e.strerror}")
    if not lines:
        fail(f"{path}:1: empty file: a metrics file starts with the run's config line")
    events = []
    for n, line in enumerate(lines, 1):
        try:
            e = json.loads(line)
        except json.JSONDecodeError as x:
            fail(f"{path}:{n}: malformed JSON line ({x.msg})")
        if not isinstance(e, dict) or not isinstance(e.get("event"), str):
            fail(f"{path}:{n}: not a metrics event (no \"event\" field)")
        if n == 1 and e["event"] != "config":
            fail(f"{path}:1: a '{e['event']}' event where the run's config line belongs "
                 "(written by a sparq without config lines?)")
        events.append(e)
    return events


def settings(config):
    """What describes a run: its flags, and how many ranks over which transport."""
    s = {k: v for k, v in config.get("flags", {}).items() if k not in OUTPUT_FLAGS}
    s["world"] = f"{config.get('ranks')} ranks ({config.get('transport')})"
    return s


def labels(paths, configs):
    runs = [settings(c) for c in configs]
    keys = sorted({k for r in runs for k in r})
    differ = [k for k in keys if len({json.dumps(r.get(k)) for r in runs}) > 1]
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    out = []
    for name, r in zip(names, runs):
        parts = [r[k] if k == "world" else f"--{k} {r.get(k)}" for k in differ]
        out.append(", ".join(parts) or name)
    if len(set(out)) < len(out):  # the same settings twice: the file names tell them apart
        out = [f"{name}: {lab}" if lab != name else name for name, lab in zip(names, out)]
    return out


def ne_points(path, tests):
    """(step, train_s, ne) of the tests that allow it; a note when none do."""
    pts = []
    for t in tests:
        ne = t.get("ne")
        p = t.get("positive_rate")
        if ne is None and p is not None and 0 < p < 1:
            ne = t["loss"] / -(p * math.log(p) + (1 - p) * math.log(1 - p))
        if ne is not None:
            pts.append((t["step"], t["train_s"], ne))
    if tests and not pts:
        print(f"note: {path}: its test events carry no NE or positive rate: no NE curve", file=sys.stderr)
    return pts


def save(fig, out_dir, name, written):
    """Writes the figure atomically: a reader never sees half a PNG."""
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # as open() would create it: mkstemp makes it private
        fig.savefig(tmp, format="png", dpi=90)
        os.replace(tmp, os.path.join(out_dir, name))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    written.append(os.path.join(out_dir, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for the PNGs (created)")
    ap.add_argument("metrics", nargs="+", help="--metrics files of sparq train")
    args = ap.parse_args()
    runs = [load(p) for p in args.metrics]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail(f"matplotlib is missing for {sys.executable}: install Debian's python3-matplotlib (scripts/setup does)")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        fail(f"cannot create '{args.out}': {e.strerror}")

    names = labels(args.metrics, [r[0] for r in runs])
    tests = [[e for e in r if e["event"] == "test"] for r in runs]
    trains = [[e for e in r if e["event"] == "train"] for r in runs]
    written = []

    def against_step_and_time(name, title, series):
        """series: per run, a list of (step, train_s, y). Nothing to draw: no figure."""
        if not any(series):
            print(f"note: no run has {title.lower()} points: no {name}", file=sys.stderr)
            return
        fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
        for label, pts in zip(names, series):
            if pts:
                by_step.plot([p[0] for p in pts], [p[2] for p in pts], marker=".", label=label)
                by_time.plot([p[1] for p in pts], [p[2] for p in pts], marker=".", label=label)
        by_step.set_xlabel("step")
        by_time.set_xlabel("training time, s (tests excluded)")
        by_step.set_ylabel(title)
        by_step.grid(alpha=0.3)
        by_time.grid(alpha=0.3)
        by_step.legend(fontsize="small")
        fig.suptitle(title)
        fig.tight_layout()
        save(fig, args.out, name, written)
        plt.close(fig)

    against_step_and_time("test_loss.png", "Test loss",
                          [[(t["step"], t["train_s"], t["loss"]) for t in ts] for ts in tests])
    against_step_and_time("auc.png", "Test AUC", [[(t["step"], t["train_s"], t["auc"]) for t in ts] for ts in tests])
    against_step_and_time("ne.png", "Normalized entropy (test)",
                          [ne_points(p, ts) for p, ts in zip(args.metrics, tests)])

    if any(trains):
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for label, ts in zip(names, trains):
            ax.plot([t["step"] for t in ts], [t["loss"] for t in ts], label=label)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (mean since the last print)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        ax.set_title("Training loss")
        fig.tight_layout()
        save(fig, args.out, "train_loss.png", written)
        plt.close(fig)

    # Entities in first-seen order over all runs; one panel each.
    entities = []
    for ts in trains:
        for t in ts:
            entities += [k for k in t.get("traffic", {}) if k not in entities]
    if entities:
        cols = min(3, len(entities))
        rows = -(-len(entities) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
        for ax, entity in zip(axes.flat, entities):
            ys = []
            for label, ts in zip(names, trains):
                pts = [(t["step"], t["traffic"][entity]["bytes_per_step"]) for t in ts
                       if entity in t.get("traffic", {})]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=label)
                    ys += [p[1] for p in pts]
            if ys and min(ys) > 0 and max(ys) > 10 * min(ys):  # codecs apart by orders of magnitude
                ax.set_yscale("log")
            ax.set_title(entity)
            ax.set_xlabel("step")
            ax.grid(alpha=0.3, which="both")
        axes.flat[0].set_ylabel("bytes sent per step (rank 0)")
        axes.flat[0].legend(fontsize="small")
        for ax in list(axes.flat)[len(entities):]:
            ax.set_visible(False)
        fig.suptitle("Traffic per entity")
        fig.tight_layout()
        save(fig, args.out, "traffic.png", written)
        plt.close(fig)
    else:
        print("note: no run has traffic (one rank?): no traffic.png", file=sys.stderr)
    for w in written:
        print(f"wrote {w}")


if __name__ == "__main__":
    main()
