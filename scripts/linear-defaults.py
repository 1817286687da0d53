#!/usr/bin/env python3
"""`sparq linear` with its default flags against liblinear with its own
(-s 0 -c 1: logistic regression, C = 1, no bias), wall to wall: each run
timed from the process's start, each epoch's line stamped as it is printed,
data loading included for both. Appends one JSON line per run to OUT.

    linear-defaults.py --sparq build/sparq --data DIR --out OUT.jsonl
                       [--ranks 1 2 4 8] [--reps 3] [--launch "scripts/cluster run --"] [--no-liblinear]
    linear-defaults.py --sparq build/sparq --data DIR --out OUT.jsonl --vw PASSES [--reps 3]

--vw: one rank's SGD against Vowpal Wabbit's (vowpalwabbit, in this
Python), the same passes, wall to wall: sparq from its process's start to
its model written (--save), VW from its workspace's creation (arguments
parsed, the text read and cached in the first pass) to its model written
(-f; the interpreter's own start is not counted). sparq's AdaGrad against
VW's default (adaptive, normalised, invariant updates), sparq's plain step
against VW's --sgd. VW reads its own text format, converted from the
libsvm file beforehand (not timed).

DIR holds train.svm and test.svm. The repetitions are interleaved: rep 1 of
every configuration, then rep 2, ... --launch runs sparq under a launcher
(one rank per process, --ranks ignored: the launcher's world); without it,
--ranks P in-process ranks (P > 1: one core each, as the machine allows).
scripts/summarize-linear.py turns OUT into results.md's tables.
"""
import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

EPOCH = re.compile(r"^epoch (\d+)/\d+: objective ([0-9.]+).*test loss [0-9.]+ accuracy ([0-9.]+) %")


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    return {"commit": commit, "date": time.strftime("%Y-%m-%d"), "cpu": model, "cores": os.cpu_count(),
            "kernel": platform.release()}


def timed_lines(cmd):
    """Runs cmd; returns [(seconds since start, line)], the total and the exit code."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = [(time.monotonic() - t0, line.rstrip("\n")) for line in p.stdout]
    p.wait()
    return out, time.monotonic() - t0, p.returncode


def run_sparq(a, data, ranks):
    cmd = shlex.split(a.launch) if a.launch else []
    cmd += [a.sparq, "linear", "--data-path", f"{data}/train.svm", "--test-data-path", f"{data}/test.svm"]
    if not a.launch:
        cmd += ["--ranks", str(ranks)]
    lines, total, rc = timed_lines(cmd)
    if rc != 0:
        sys.exit(f"linear-defaults: {' '.join(cmd)} failed: " + "\n".join(l for _, l in lines[-5:]))
    epochs = [{"epoch": int(m[1]), "t": round(t, 3), "objective": float(m[2]), "test_accuracy": float(m[3])}
              for t, l in lines for m in [EPOCH.match(l)] if m]
    text = "\n".join(l for _, l in lines)
    return {"tool": "sparq", "ranks": ranks if not a.launch else None, "launch": a.launch or "in-process",
            "command": " ".join(cmd), "wall_s": round(total, 3), "epochs": epochs,
            "converged": "\nconverged after" in "\n" + text, "first_line": lines[0][1] if lines else ""}


def run_liblinear(data, n):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["liblinear-train", "-s", "0", "-c", "1", f"{data}/train.svm", f"{tmp}/model"]
        lines, total, rc = timed_lines(cmd)
        if rc != 0:
            sys.exit(f"linear-defaults: {' '.join(cmd)} failed")
        f = [float(m[1]) for _, l in lines for m in [re.search(r" f ([0-9.e+-]+)", l)] if m]
        p = subprocess.run(["liblinear-predict", f"{data}/test.svm", f"{tmp}/model", f"{tmp}/pred"],
                           capture_output=True, text=True, check=True)
        acc = float(re.search(r"Accuracy = ([0-9.]+)%", p.stdout).group(1))
    # liblinear minimises |w|^2/2 + C sum loss = n F for C = 1.
    return {"tool": "liblinear", "command": " ".join(cmd[:-1]), "wall_s": round(total, 3), "test_accuracy": acc,
            "objective": f[-1] / n if f else None}


def vw_text(data, tmp):
    path = os.path.join(tmp, "train.vw")
    with open(f"{data}/train.svm") as src, open(path, "w") as dst:
        for line in src:
            label, _, feats = line.partition(" ")
            dst.write(f"{1 if float(label) > 0 else -1} | {feats}")
    return path


VW_CODE = """import sys, time, vowpalwabbit
t0 = time.perf_counter()
ws = vowpalwabbit.Workspace(sys.argv[1])
ws.run_parser()
loss = ws.get_sum_loss() / ws.get_weighted_examples()
ws.finish()
print(time.perf_counter() - t0, loss)
"""


def run_vw_pair(a, data, passes, tmp, text):
    out = []
    for sparq_flags, vw_flags, what in ((["--algo", "sgd"], "", "adagrad / VW default"),
                                        (["--algo", "sgd", "--sgd-step", "plain"], "--sgd", "plain / vw --sgd")):
        cmd = [a.sparq, "linear", "--data-path", f"{data}/train.svm", "--epochs", str(passes), "--tol", "0",
               *sparq_flags, "--save", f"{tmp}/sparq.model"]
        lines, total, rc = timed_lines(cmd)
        if rc != 0:
            sys.exit(f"linear-defaults: {' '.join(cmd)} failed")
        out.append({"tool": "sparq", "pair": what, "passes": passes, "command": " ".join(cmd[:-2]),
                    "wall_s": round(total, 3)})
        args = (f"-d {text} --loss_function logistic -b 22 --holdout_off -k -c --cache_file {tmp}/cache "
                f"--passes {passes} -f {tmp}/vw.model --quiet {vw_flags}")
        p = subprocess.run([sys.executable, "-c", VW_CODE, args], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"linear-defaults: vw {args} failed: {p.stderr[-300:]}")
        secs, loss = map(float, p.stdout.split())
        out.append({"tool": "vw", "pair": what, "passes": passes, "wall_s": round(secs, 3), "train_loss": loss,
                    "command": "vw " + args.replace(f"{tmp}/", "").replace(" --quiet", "")})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparq", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--launch", default="")
    ap.add_argument("--no-liblinear", action="store_true")
    ap.add_argument("--vw", type=int, default=0, metavar="PASSES")
    a = ap.parse_args()
    with open(f"{a.data}/train.svm", "rb") as f:
        n = sum(1 for _ in f)
    base = {"data": os.path.basename(os.path.normpath(a.data)), "train_rows": n, **machine()}
    with open(a.out, "a") as out, tempfile.TemporaryDirectory() as tmp:
        text = vw_text(a.data, tmp) if a.vw else None
        for rep in range(1, a.reps + 1):
            if a.vw:
                for r in run_vw_pair(a, a.data, a.vw, tmp, text):
                    out.write(json.dumps({**base, "rep": rep, **r}) + "\n")
                    print(f"{base['data']} rep {rep} {r['tool']} ({r['pair']}): {r['wall_s']:.2f} s")
                continue
            runs = [] if a.no_liblinear else [run_liblinear(a.data, n)]
            runs += [run_sparq(a, a.data, p) for p in ([0] if a.launch else a.ranks)]
            for r in runs:
                out.write(json.dumps({**base, "rep": rep, **r}) + "\n")
                out.flush()
                acc = r["test_accuracy"] if r["tool"] == "liblinear" else r["epochs"][-1]["test_accuracy"]
                print(f"{base['data']} rep {rep} {r['tool']} {r.get('ranks') or r.get('launch', '')}: "
                      f"{r['wall_s']:.2f} s, test accuracy {acc:.3f} %")


if __name__ == "__main__":
    main()
