#!/usr/bin/python3
"""Tables of scripts/reproduce-linear's runs.

    summarize-linear.py DATA_DIR RESULTS_MD

Reads DATA_DIR/cluster-<rate>/<config>_r<k>.jsonl and virtual-p<P>/*.jsonl
(sparq linear --metrics), reference/{accuracy,speed}.jsonl
(scripts/linear-reference.py) and memory/webspam-p8.log, and replaces the
block between '<!-- linear:begin -->' and '<!-- linear:end -->' in RESULTS_MD.

A run's epoch time is its measured time over the steps it ran, times the
steps of a whole pass (runs with --num-batches time part of a pass); a
configuration's figure is the median over its repetitions. Speed-ups are
against the fastest dense exchange of the same model and data (sparq's ring,
Open MPI's default allreduce, Open MPI's ring), end to end and for the
communication alone.
"""
import glob
import json
import os
import re
import statistics
import sys

GROUPS = [  # (prefix, what)
    ("url-lr", "logistic regression, SGD, URL-like"),
    ("url-svm", "linear SVM (hinge), SGD, URL-like"),
    ("webspam-lr", "logistic regression, SGD, Webspam-like"),
    ("webspam-svm", "linear SVM (hinge), SGD, Webspam-like"),
    ("url-scd", "logistic regression, SCD, URL-like"),
    ("webspam-scd", "logistic regression, SCD, Webspam-like"),
]
EXCHANGE = {
    "dense-ring": "dense: sparq ring allreduce", "dense-ompi": "dense: Open MPI allreduce (its default)",
    "dense-ompi-ring": "dense: Open MPI ring allreduce", "split": "SSAR_Split_allgather",
    "rd": "SSAR_Recursive_double", "auto": "auto", "dense": "dense: allgatherv of every range",
    "sparse": "sparse allgather",
}


def events(path, kind="epoch"):
    with open(path) as f:
        return [e for e in map(json.loads, filter(str.strip, f)) if e.get("event") == kind]


def per_pass(e):
    """Times of one epoch event scaled to a whole pass."""
    k = e["pass_steps"] / e["steps"]
    return {"ms": e["ms"] * k, "comm": e["comm_ms"] * k, "compute": e["compute_ms"] * k, "wait": e["wait_ms"] * k,
            "mb_step": e["bytes_sent"] / e["steps"] / 1e6, "density": e["sum_density"],
            "acc": e.get("test_accuracy"), "exchange": e["exchange"], "steps": e["steps"],
            "pass_steps": e["pass_steps"]}


def median_runs(paths):
    runs = [per_pass(e[-1]) for e in map(events, paths) if e]  # finished runs only
    out = {k: statistics.median(r[k] for r in runs) for k in ("ms", "comm", "compute", "wait", "mb_step", "density")}
    out.update(n=len(runs), exchange=runs[0]["exchange"], steps=runs[0]["steps"], pass_steps=runs[0]["pass_steps"],
               acc=statistics.median(r["acc"] for r in runs) if runs[0]["acc"] is not None else None)
    return out


def command_of(dirpath, name):
    path = os.path.join(dirpath, "runs.tsv")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            n, cmd = fields[0], fields[-1]
            if n == name:
                return re.sub(r" --(metrics|save) \S+", "", cmd)
    return ""


def cluster_table(dirpath, rate):
    rows = [f"#### 8 hosts, {'1 Gbit/s' if rate == '1gbit' else 'links not limited'}", "",
            "| model | exchange | epoch ms | compute | communication | waiting | MB sent a step | sum density "
            "| test acc. | speed-up (comm.) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for prefix, what in GROUPS:
        found = {}
        for p in sorted(glob.glob(os.path.join(dirpath, prefix + "-*_r*.jsonl"))):
            key = re.sub(r"_r\d+\.jsonl$", "", os.path.basename(p))[len(prefix) + 1:]
            found.setdefault(key, []).append(p)
        if not found:
            continue
        stats = {k: median_runs(v) for k, v in found.items()}
        dense = [s for k, s in stats.items() if k.startswith("dense")]
        best_ms, best_comm = min(s["ms"] for s in dense), min(s["comm"] for s in dense)
        for k in sorted(stats, key=lambda k: list(EXCHANGE).index(k) if k in EXCHANGE else len(EXCHANGE)):
            s = stats[k]
            acc = f"{100 * s['acc']:.2f} %" if s["acc"] is not None else "-"
            sent = f"{s['mb_step']:.3f}" if "ompi" not in k else "(MPI's own)"
            part = f" ({s['steps']} of {s['pass_steps']} steps)" if s["steps"] != s["pass_steps"] else ""
            rows.append(f"| {what}{part} | {EXCHANGE.get(k, k)} ({s['exchange']}) | {s['ms']:.0f} | {s['compute']:.0f} "
                        f"| {s['comm']:.0f} | {s['wait']:.0f} | {sent} | {100 * s['density']:.3f} % | {acc} "
                        f"| **{best_ms / s['ms']:.2f}x** ({best_comm / s['comm']:.2f}x) |")
    example = command_of(dirpath, "url-lr-split")
    rows += ["", f"Medians of the repetitions; raw runs in `{dirpath}`, every command in its runs.tsv, e.g. `{example}`."]
    return rows


def virtual_table(data):
    rows = ["| network | ranks | data | exchange | modelled epoch ms | communication | speed-up vs the fastest dense "
            "(comm.) | auto vs the fastest other |", "|---|---|---|---|---|---|---|---|"]
    order = ("dense-ring", "dense-rabenseifner", "ssar-split-allgather", "ssar-recursive-double",
             "dsar-split-allgather", "auto")
    for pdir in sorted(glob.glob(os.path.join(data, "virtual-*-p*")), reverse=True):
        net, p = re.match(r"virtual-(.*)-p(\d+)$", os.path.basename(pdir)).groups()
        for setname in ("url", "url-z1.4", "webspam"):
            stats = {k: median_runs([os.path.join(pdir, f"{setname}-lr-{k}.jsonl")]) for k in order
                     if os.path.exists(os.path.join(pdir, f"{setname}-lr-{k}.jsonl"))}
            dense = [s for k, s in stats.items() if k.startswith("dense")]
            if not dense:
                continue
            fast_ms, fast_comm = min(s["ms"] for s in dense), min(s["comm"] for s in dense)
            best = min(s["ms"] for k, s in stats.items() if k != "auto")
            for k, s in stats.items():
                name = f"auto ({s['exchange']})" if k == "auto" else k
                versus = f"{100 * (s['ms'] / best - 1):+.1f} %" if k == "auto" else ""
                rows.append(f"| {net} | {p} | {setname} | {name} | {s['ms']:.0f} | {s['comm']:.0f} | "
                            f"{fast_ms / s['ms']:.2f}x ({fast_comm / s['comm']:.2f}x) | {versus} |")
    cmd = command_of(os.path.join(data, "virtual-10gbit-p32"), "url-lr-auto")
    return rows + ["", f"{'6 steps a run' if cmd else ''}, scaled to the whole pass (Webspam-like at 32 ranks: its 2 steps). "
                   f"Command (one per cell; --exchange, --ranks, --net and the data vary): `{cmd}`."]


def reference_tables(data):
    rows = []
    acc = os.path.join(data, "reference", "accuracy.jsonl")
    if os.path.exists(acc):
        rows += ["| data | loss | C (l2 = 1/(C n)) | liblinear | sparq | difference | sparq's command |",
                 "|---|---|---|---|---|---|---|"]
        for r in map(json.loads, open(acc)):
            d = r["sparq"]["accuracy"] - r["liblinear"]["accuracy"]
            rows.append(f"| {r['data']} ({r['train_rows']} rows) | {r['loss']} | {r['C']} | "
                        f"{r['liblinear']['accuracy']:.2f} % | {r['sparq']['accuracy']:.2f} % | {d:+.2f} | "
                        f"`{r['sparq']['command']}` |")
        rows.append("")
    spd = os.path.join(data, "reference", "speed.jsonl")
    if os.path.exists(spd):
        runs = list(map(json.loads, open(spd)))
        tools = list(dict.fromkeys(r["tool"] for r in runs))
        med = {t: statistics.median(r["train_seconds"] for r in runs if r["tool"] == t) for t in tools}
        fastest_vw = min(v for t, v in med.items() if t.startswith("vw"))
        rows += ["| tool | seconds for the passes (median) | per pass | against the faster VW | final train loss |",
                 "|---|---|---|---|---|"]
        for t in tools:
            last = [r for r in runs if r["tool"] == t][-1]
            rows.append(f"| {t} | {med[t]:.2f} | {med[t] / last['passes']:.3f} | {fastest_vw / med[t]:.2f}x "
                        f"| {last['train_loss']:.4f} |")
        rows += ["", "Commands: " + "; ".join(f"`{[r for r in runs if r['tool'] == t][-1]['command']}`"
                                              for t in tools) + "."]
    return rows


def exact_table(data):
    path = os.path.join(data, "exact", "compare.json")
    if not os.path.exists(path):
        return []
    cmp = json.load(open(path))
    rows = ["| ranks | exchange | weights against the dense ring's | test accuracy (dense ring's) |", "|---|---|---|---|"]
    for name, c in cmp.items():
        p, exchange = name.split("-", 1)
        acc = events(os.path.join(data, "exact", name + ".jsonl"))[-1]["test_accuracy"]
        base = events(os.path.join(data, "exact", p + "-dense-ring.jsonl"))[-1]["test_accuracy"]
        same = "identical bits" if c["identical_bits"] else f"within {c['max_rel_difference']:.1e} (relative)"
        rows.append(f"| {p[1:]} | {exchange} | {same} | {100 * acc:.3f} % ({100 * base:.3f} %) |")
    cmd = command_of(os.path.join(data, "exact"), "p8-ssar-split-allgather")
    return rows + ["", f"3 epochs of url-0.1 each: `{cmd}` (raw: `{data}/exact`)."]


def sweep_table(data):
    d = os.path.join(data, "zipf-1gbit")
    if not os.path.isdir(d):
        return []
    rows = ["| Zipf exponent | sum density | bytes, dense ring / sparse | epoch speed-up | communication speed-up |",
            "|---|---|---|---|---|"]
    main = os.path.join(data, "cluster-1gbit")
    sets = [("1.0 (the rows above)", main, "url-lr-dense-ompi-ring", "url-lr-split")]
    sets += [(z, d, f"z{z}-dense-native", f"z{z}-ssar-split-allgather") for z in ("1.2", "1.4")]
    for z, where, dense_key, sparse_key in sets:
        dense = median_runs(glob.glob(os.path.join(where, dense_key + "_r*.jsonl")))
        sparse = median_runs(glob.glob(os.path.join(where, sparse_key + "_r*.jsonl")))
        ring_mb = 2 * 7 / 8 * 3231962 * 4 / 1e6  # what the dense ring sends a step (Open MPI's bypasses our counters)
        rows.append(f"| {z} | {100 * sparse['density']:.2f} % | {ring_mb / sparse['mb_step']:.1f}x | "
                    f"{dense['ms'] / sparse['ms']:.2f}x | {dense['comm'] / sparse['comm']:.2f}x |")
    cmd = command_of(d, "z1.4-ssar-split-allgather")
    return rows + ["", f"8 hosts at 1 Gbit/s, Open MPI's ring against the split allgather, medians of 3 (`{cmd}`)."]


def memory_line(data):
    log = os.path.join(data, "memory", "webspam-p8.log")
    if not os.path.exists(log):
        return []
    text = open(log).read()
    m = re.search(r"peak memory ([0-9.]+) MiB \(one process, (\d+) ranks\)", text)
    feats = re.search(r"(\d+) features", text)
    cmd = open(os.path.join(data, "memory", "command.txt")).read().strip()
    return [f"A Webspam-sized model ({feats.group(1)} weights with the bias) on {m.group(2)} in-process ranks: peak "
            f"resident memory {float(m.group(1)):.0f} MiB for the whole process, {float(m.group(1)) / int(m.group(2)):.0f} "
            f"MiB a rank, the data's shards included (`{cmd}`)."] if m and feats else []


def jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def first_within(run, target):
    """Seconds from the process's start to the first epoch at or above target test accuracy (None: never)."""
    return next((e["t"] for e in run["epochs"] if e["test_accuracy"] >= target), None)


def defaults_tables(data):
    """Today's defaults against liblinear's, per data set (defaults/<set>.jsonl)."""
    d = os.path.join(data, "defaults")
    if not os.path.isdir(d):
        return []
    rows = ["| data (train rows) | solver | ranks | epochs | objective | test accuracy | vs liblinear | "
            "objective never rose | seconds to within 0.5 points | to converge | liblinear's time / sparq's to "
            "within 0.5 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    cmds, reps = [], {}
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        if os.path.basename(path).startswith("vw-"):
            continue
        runs = jsonl(path)
        ll = [r for r in runs if r["tool"] == "liblinear"]
        if not ll:
            continue
        ll_acc = statistics.median(r["test_accuracy"] for r in ll)
        ll_s = statistics.median(r["wall_s"] for r in ll)
        name = f"{runs[0]['data']} ({runs[0]['train_rows']})"
        rows.append(f"| {name} | liblinear -s 0 -c 1 | 1 | - | {statistics.median(r['objective'] for r in ll):.6f} | "
                    f"{ll_acc:.3f} % | - | - | - | {ll_s:.2f} | - |")
        reps[runs[0]["data"]] = len(ll)
        for p in sorted({r["ranks"] for r in runs if r["tool"] == "sparq"}):
            mine = [r for r in runs if r["tool"] == "sparq" and r["ranks"] == p]
            acc = statistics.median(r["epochs"][-1]["test_accuracy"] for r in mine)
            within = [first_within(r, ll_acc - 0.5) for r in mine]
            reached = [t for t in within if t is not None]
            t05 = statistics.median(reached) if len(reached) == len(within) else None
            mono = all(all(b["objective"] <= a["objective"] for a, b in zip(r["epochs"], r["epochs"][1:])) for r in mine)
            conv = all(r["converged"] for r in mine)
            rows.append(f"| | sparq (defaults) | {p} | {statistics.median(len(r['epochs']) for r in mine):.0f} | "
                        f"{statistics.median(r['epochs'][-1]['objective'] for r in mine):.6f} | {acc:.3f} % | "
                        f"{acc - ll_acc:+.2f} | {'yes' if mono else 'NO'} | "
                        f"{f'{t05:.2f}' if t05 is not None else 'not reached'} | "
                        f"{statistics.median(r['wall_s'] for r in mine):.2f}{'' if conv else ' (not converged)'} | "
                        f"{f'{ll_s / t05:.2f}x' if t05 else '-'} |")
        cmds.append(f"`{[r for r in runs if r['tool'] == 'sparq'][-1]['command']}`")
        cmds.append(f"`{ll[-1]['command']}`")
    n = ", ".join(f"{k} {v}" for k, v in reps.items())
    return rows + ["", f"Medians of the runs of each configuration ({n}), interleaved; seconds from the process's start (data "
                       "loading included), each epoch's line stamped as printed (`scripts/linear-defaults.py`). "
                       "Commands (--ranks P varies): " + "; ".join(cmds) + f". Raw: `{d}`."]


def defaults_cluster_table(data):
    path = os.path.join(data, "defaults-cluster", "man.jsonl")
    if not os.path.exists(path):
        return []
    runs = jsonl(path)
    ll = [r for r in runs if r["tool"] == "liblinear"]
    target = statistics.median(r["test_accuracy"] for r in ll) - 0.5
    rows = ["| run | seconds to within 0.5 points of liblinear | to converge | test accuracy | against one rank |",
            "|---|---|---|---|---|"]
    groups = [("liblinear -s 0 -c 1 (one process)", ll, None),
              ("sparq, one rank", [r for r in runs if r["tool"] == "sparq" and r["launch"] == "in-process"], None),
              ("sparq, 8 hosts at 1 Gbit/s", [r for r in runs if r["tool"] == "sparq" and r["launch"] != "in-process"],
               None)]
    one = None
    for name, rs, _ in groups:
        if not rs:
            continue
        if rs[0]["tool"] == "liblinear":
            rows.append(f"| {name} | - | {statistics.median(r['wall_s'] for r in rs):.2f} | "
                        f"{statistics.median(r['test_accuracy'] for r in rs):.3f} % | - |")
            continue
        t = statistics.median(first_within(r, target) for r in rs)
        one = one or t
        rows.append(f"| {name} | {t:.2f} | {statistics.median(r['wall_s'] for r in rs):.2f} | "
                    f"{statistics.median(r['epochs'][-1]['test_accuracy'] for r in rs):.3f} % | {one / t:.2f}x |")
    cmd = [r for r in runs if r["tool"] == "sparq"][-1]["command"]
    return rows + ["", f"The manual pages, medians of {len(ll)} interleaved rounds (`{cmd}`; raw: "
                       f"`{os.path.dirname(path)}`)."]


def virtual_run(path, target):
    """Training seconds to the target accuracy and to the end, compute and communication seconds, MB sent a rank."""
    ev = events(path)
    t, reached = 0.0, None
    for e in ev:
        t += e["ms"] / 1e3
        if reached is None and 100 * e["test_accuracy"] >= target:
            reached = t
    return {"reached": reached, "end": t, "compute": sum(e["compute_ms"] for e in ev) / 1e3,
            "comm": sum(e["comm_ms"] + e["wait_ms"] for e in ev) / 1e3, "mb": sum(e["bytes_sent"] for e in ev) / 1e6,
            "acc": 100 * ev[-1]["test_accuracy"]}


def virtual_defaults_table(data):
    d = os.path.join(data, "defaults-virtual")
    if not os.path.isdir(d):
        return []
    rows = ["| data | ranks | exchange | clock | training seconds to within 0.5 points of liblinear | to converge | "
            "compute / communication | MB sent a rank | test accuracy | against one rank |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    with open(os.path.join(d, "runs.tsv")) as f:
        runs = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    groups = {}  # (set, ranks, exchange) -> runs, in the order first run
    for name, p, x, stem, cmd in runs:
        groups.setdefault((name, p, x), []).append(os.path.join(d, stem + ".jsonl"))
    one, reps = {}, {}
    for (name, p, x), paths in groups.items():
        ll = [r for r in jsonl(os.path.join(data, "defaults", f"{name}.jsonl")) if r["tool"] == "liblinear"]
        target = statistics.median(r["test_accuracy"] for r in ll) - 0.5
        rs = [virtual_run(path, target) for path in paths]
        med = {k: statistics.median(r[k] for r in rs) for k in ("end", "compute", "comm", "mb", "acc")}
        reached = statistics.median(r["reached"] for r in rs) if all(r["reached"] for r in rs) else None
        if p == "1":
            one[name] = reached
        reps[name] = len(paths)
        exchange = "owner-alltoall (default)" if x == "auto" else f"{x} (sparse allreduce)"
        ratio = f"**{one[name] / reached:.2f}x**" if x == "auto" and p != "1" and reached else (
            f"{one[name] / reached:.2f}x" if reached and one.get(name) else "-")
        rows.append(f"| {name} | {p} | {exchange if p != '1' else '-'} | "
                    f"{'modelled, 1 Gbit/s, 50 us' if p != '1' else 'modelled (its CPU time)'} | "
                    f"{f'{reached:.2f}' if reached else 'not reached'} | {med['end']:.2f} | "
                    f"{med['compute']:.2f} / {med['comm']:.2f} | {med['mb']:.1f} | {med['acc']:.3f} % | {ratio} |")
    n = ", ".join(f"{k} {v}" for k, v in reps.items())
    return rows + ["", f"Medians of interleaved rounds ({n}); epoch times summed (data loading not included: the "
                       f"virtual clock does not model it); communication includes waiting for the slowest rank. "
                       f"`{runs[-2][4]}` (one rank: `--ranks 1`; raw: `{d}`, machine.txt)."]


def blocks_table(data):
    d = os.path.join(data, "block-size")
    if not os.path.isdir(d):
        return []
    rows = ["| data | features of a block a row holds | block | epochs to --tol 0.001 | objective | test accuracy |",
            "|---|---|---|---|---|---|"]
    with open(os.path.join(d, "runs.tsv")) as f:
        runs = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    for name, c, cmd in runs:
        ev = events(os.path.join(d, f"{name}-x{c}.jsonl"))
        block = re.search(r"--coords (\d+)", cmd).group(1)
        rows.append(f"| {name} | {c}{' (auto)' if c == '2' else ''} | {block} | {len(ev)} | "
                    f"{ev[-1]['objective']:.6f} | {100 * ev[-1]['test_accuracy']:.3f} % |")
    return rows + ["", f"One rank, `--algo scd --coords B` (`{runs[-1][2]}`; raw: `{d}`)."]


def vw_table(data):
    rows = ["| data | pair | sparq, s (median) | VW, s (median) | VW / sparq |", "|---|---|---|---|---|"]
    cmds = []
    for path in sorted(glob.glob(os.path.join(data, "defaults", "vw-*.jsonl"))):
        runs = jsonl(path)
        for pair in dict.fromkeys(r["pair"] for r in runs):
            sp = statistics.median(r["wall_s"] for r in runs if r["pair"] == pair and r["tool"] == "sparq")
            vw = statistics.median(r["wall_s"] for r in runs if r["pair"] == pair and r["tool"] == "vw")
            rows.append(f"| {runs[0]['data']} | {pair} | {sp:.2f} | {vw:.2f} | {vw / sp:.2f}x |")
            cmds += [f"`{r['command']}`" for r in runs if r["pair"] == pair][:2]
    if len(rows) == 2:
        return []
    return rows + ["", "5 passes each, wall to wall (sparq: process start to model written; VW: workspace created to "
                       "model written, its text read and cached in the first pass). Commands: " + "; ".join(cmds) + "."]


def write_block(md, name, body):
    text = open(md).read()
    begin, end = text.find(f"<!-- {name}:begin -->"), text.find(f"<!-- {name}:end -->")
    if begin < 0 or end < 0:
        sys.exit(f"summarize-linear: no {name}:begin/end block in " + md)
    text = text[:begin] + "\n".join(body) + text[end + len(f"<!-- {name}:end -->"):]
    with open(md, "w") as f:
        f.write(text)


def defaults_block(data):
    body = ["<!-- linear-defaults:begin -->",
            "<!-- written by scripts/summarize-linear.py from docs/data/linear; re-run scripts/reproduce-linear to refresh -->",
            ""]
    body += defaults_tables(data) + [""]
    body += ["#### 8 hosts at 1 Gbit/s against one rank", ""] + defaults_cluster_table(data) + [""]
    body += ["#### 8 ranks on the virtual clock, a core each", ""] + virtual_defaults_table(data) + [""]
    body += ["#### Coordinate descent's block size", ""] + blocks_table(data) + [""]
    body += ["#### Against Vowpal Wabbit, wall to wall", ""] + vw_table(data) + [""]
    return body + ["<!-- linear-defaults:end -->"]


def main():
    data, md = sys.argv[1], sys.argv[2]
    write_block(md, "linear-defaults", defaults_block(data))
    body = ["<!-- linear:begin -->",
            "<!-- written by scripts/summarize-linear.py from docs/data/linear; re-run scripts/reproduce-linear to refresh -->",
            ""]
    for rate in ("1gbit", "none"):
        d = os.path.join(data, f"cluster-{rate}")
        if os.path.isdir(d):
            body += cluster_table(d, rate) + [""]
    body += ["#### Virtual clock: a core per rank (10 Gbit/s: SparCML's Piz Daint rows)", ""] + virtual_table(data) + [""]
    body += ["#### The speed-up against the data's fill-in", ""] + sweep_table(data) + [""]
    body += ["#### The sparse exchange gives the dense exchange's model", ""] + exact_table(data) + [""]
    body += ["#### Against liblinear and Vowpal Wabbit", ""] + reference_tables(data) + [""] + memory_line(data)
    body += ["", "<!-- linear:end -->"]
    write_block(md, "linear", body)


if __name__ == "__main__":
    main()
