#!/usr/bin/env python3
"""Markdown tables from the --metrics files of scripts/reproduce-dp and
scripts/reproduce-mp.

Each run file NAME.jsonl holds the train/test/summary/accounting events of one
`sparq train`; runs named PREFIX_sSEED are averaged over seeds."""
import json
import pathlib
import re
import statistics
import sys


def load(path):
    ev = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    tests = [e for e in ev if e["event"] == "test"]
    trains = [e for e in ev if e["event"] == "train"]
    acct = {e["entity"]: e for e in ev if e["event"] == "accounting"}
    summary = next((e for e in ev if e["event"] == "summary"), {})
    if not tests or not acct:
        return None
    return {"test": tests[-1], "acct": acct, "summary": summary,
            "ms_per_it": statistics.median(e["ms_per_it"] for e in trains)}


def runs(out):
    groups = {}
    for p in sorted(out.glob("*.jsonl")):
        r = load(p)
        if r is None:
            continue
        m = re.match(r"(.*)_s(\d+)$", p.stem)
        r["seed"] = int(m.group(2)) if m else 0
        groups.setdefault(m.group(1) if m else p.stem, []).append(r)
    return groups


def mean(rs, f):
    return statistics.fmean(f(r) for r in rs)


def ratio(rs, entity):
    sent = sum(r["acct"][entity]["bytes_sent"] for r in rs)
    dense = sum(r["acct"][entity]["dense_bytes"] for r in rs)
    return dense / sent if sent else float("nan")


def table2(g):
    base = g.get("t2_none")
    if not base:
        return
    print("\n| dp-codec | seeds | test loss | vs baseline | accuracy % | AUC | W_grad ratio | W_grad kept % |")
    print("|---|---|---|---|---|---|---|---|")
    for key in ["t2_none"] + sorted(k for k in g if k.startswith("t2_dct")):
        rs = g[key]
        loss = mean(rs, lambda r: r["test"]["loss"])
        kept = mean(rs, lambda r: r["acct"]["W_grad"].get("kept_percent", 100))
        m = re.match(r"t2_dct([\d.]+)(\w*)$", key)  # t2_dct0.98bf16: dct:0.98,1000+bf16
        name = "none" if key == "t2_none" else f"dct:{m.group(1)},1000" + (f"+{m.group(2)}" if m.group(2) else "")
        n = min(len(rs), len(base))  # paired: the same seeds (files sort by seed)
        rel = mean(rs[:n], lambda r: r["test"]["loss"]) / mean(base[:n], lambda r: r["test"]["loss"]) - 1
        print(f"| {name} | {len(rs)} | {loss:.6f} | {100 * rel:+.3f} % | "
              f"{100 * mean(rs, lambda r: r['test']['accuracy']):.3f} | {mean(rs, lambda r: r['test']['auc']):.4f} | "
              f"{ratio(rs, 'W_grad'):.2f}x | {kept:.2f} |")


def lsweep(g):
    keys = [k for k in ["ls_none"] + [f"ls_L{l}" for l in (1, 10, 100, 1000, 10000)] if k in g]
    if not keys:
        return
    print("\n| run | ms/it (median of prints) | W_grad compress s | W_grad comm s | W_grad wait s | ratio | test loss |")
    print("|---|---|---|---|---|---|---|")
    for k in keys:
        r = g[k][0]
        a = r["acct"]["W_grad"]
        name = "none" if k == "ls_none" else f"dct:0.95,{k[4:]}"
        print(f"| {name} | {r['ms_per_it']:.2f} | {a['compress_s']:.2f} | {a['comm_s']:.2f} | {a['wait_s']:.2f} | "
              f"{ratio([r], 'W_grad'):.2f}x | {r['test']['loss']:.6f} |")


def embbits(g):
    base = g.get("eb_fp32_fp32")
    if not base:
        return
    print("\n| fwd/bwd | seeds | test loss | accuracy % | vs fp32 | AUC | emb_fwd ratio | emb_bwd ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for fb in ["fp32_fp32", "q8_q8", "q8_q4", "q4_q4", "q4_q2", "q2_q2"]:
        rs = g.get("eb_" + fb)
        if not rs:
            continue
        acc = mean(rs, lambda r: r["test"]["accuracy"])
        n = min(len(rs), len(base))  # paired: the same seeds
        rel = mean(rs[:n], lambda r: r["test"]["accuracy"]) / mean(base[:n], lambda r: r["test"]["accuracy"]) - 1
        print(f"| {fb.replace('_', '/')} | {len(rs)} | {mean(rs, lambda r: r['test']['loss']):.6f} | {100 * acc:.3f} | "
              f"{100 * rel:+.3f} % | {mean(rs, lambda r: r['test']['auc']):.4f} | "
              f"{ratio(rs, 'emb_fwd'):.2f}x | {ratio(rs, 'emb_bwd'):.2f}x |")


def mp_table1(g):
    rows = sorted(k for k in g if k.startswith("mp1_"))
    if not rows:
        return
    print("\n| workers (--mp-splits) | eta | seeds | test loss | vs eta 0 | accuracy % | AUC | X_act ratio | X_grad ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in rows:
        _, tag, eta = key.split("_")
        rs = g[key]
        base = g.get(f"mp1_{tag}_0")
        seeds = [len(rs)]
        loss = mean(rs, lambda r: r["test"]["loss"])
        rel = ""
        if base:
            # compare on the seeds both have
            n = min(len(base), len(rs))
            rel = f"{100 * (mean(rs[:n], lambda r: r['test']['loss']) / mean(base[:n], lambda r: r['test']['loss']) - 1):+.3f} %"
        split = {"bot2": "2 (bot:2)", "bot2top2": "3 (bot:2,top:2)"}[tag]
        print(f"| {split} | {eta} | {seeds[0]} | {loss:.6f} | {rel} | {100 * mean(rs, lambda r: r['test']['accuracy']):.3f} | "
              f"{mean(rs, lambda r: r['test']['auc']):.4f} | {ratio(rs, 'X_act'):.2f}x | {ratio(rs, 'X_grad'):.2f}x |")


# Student's t, two-sided 95 %, by degrees of freedom.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101,
        19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052,
        28: 2.048, 29: 2.045, 39: 2.023}


def mp_table1_seeds(g):
    """Table 1 over paired seeds: per data set and worker count, each eta's
    test loss change against eta 0 with the same model seed."""
    keys = sorted(k for k in g if k.startswith("t1"))
    if not keys:
        return
    sets = {"t1a": "data/synth (seed 1, Zipf 1.1)", "t1b": "data/synth-z13 (seed 7, Zipf 1.3)"}
    paired_header("data set | workers (--mp-splits)")
    for key in keys:
        dset, tag, eta = key.split("_")
        if eta != "0":
            split = {"bot2": "2 (bot:2)", "bot2top2": "3 (bot:2,top:2)"}[tag]
            paired_row(f"{sets[dset]} | {split}", eta, paired(g[key], g.get(f"{dset}_{tag}_0", [])))


def mp_map(g):
    """scripts/reproduce-mp map and mechanism: per generated set (zZIPF_aAUC),
    2 workers, each run's paired test loss change against eta 0 of the same
    seed; a run is named by its eta, and a variant after it (mechanism:
    0.95_l1=0.001, 0.95_grad=dense, bot13: a dense cut 13 wide)."""
    keys = [k.split("_", 2) for k in sorted(g) if re.match(r"z[0-9.]+_a[0-9.]+_", k)]
    if not keys:
        return
    paired_header("Zipf | teacher AUC")
    pooled, changes = {}, {}  # by eta: every set's pairs; their changes by (set, seed)
    for z, a, eta in keys:
        if eta != "0":
            pairs = paired(g[f"{z}_{a}_{eta}"], g.get(f"{z}_{a}_0", []))
            paired_row(f"{z[1:]} | {a[1:]}", eta.replace("_", ", "), pairs)
            pooled.setdefault(eta, []).extend(pairs)
            changes.setdefault(eta, {}).update({(z, a, r["seed"]): change(r, b) for r, b in pairs})
    # Every set's seed pairs together: one mean per eta over the whole map.
    if len({(z, a) for z, a, _ in keys}) > 1:
        for eta, pairs in sorted(pooled.items()):
            paired_row("all sets | all", eta, pairs)
    same_bytes(changes, "0.90+bf16", "0.95")


def change(run, base):
    """Test loss change of a run against its base, in %."""
    return 100 * (run["test"]["loss"] / base["test"]["loss"] - 1)


def same_bytes(changes, a, b):
    """a's change minus b's, paired by data set and seed (two codecs of the
    same bytes: which costs less)."""
    if a not in changes or b not in changes:
        return
    d = [changes[a][k] - changes[b][k] for k in sorted(changes[a].keys() & changes[b].keys())]
    if len(d) < 2:
        return
    m = statistics.fmean(d)
    half = T975[len(d) - 1] * statistics.stdev(d) / len(d) ** 0.5
    print(f"\n{a} against {b} (the same bytes), paired by set and seed: {m:+.2f} points of test loss change "
          f"[{m - half:+.2f}, {m + half:+.2f}], {sum(x < 0 for x in d)} of {len(d)} pairs lower")


def paired_header(first):
    print(f"\n| {first} | eta | seeds | test loss change vs eta 0: mean [95 % interval] | "
          "per seed | AUC change | X_act ratio | X_grad ratio |")
    print("|---|---|---|---|---|---|---|---|---|")


def paired(runs_at_eta, runs_at_0):
    """(run, its seed's run at eta 0) for every seed that has both."""
    base = {r["seed"]: r for r in runs_at_0}
    return [(r, base[r["seed"]]) for r in sorted(runs_at_eta, key=lambda r: r["seed"]) if r["seed"] in base]


def paired_row(label, eta, pairs):
    if not pairs:
        return
    rel = [change(r, b) for r, b in pairs]
    dauc = statistics.fmean(r["test"]["auc"] - b["test"]["auc"] for r, b in pairs)
    m = statistics.fmean(rel)
    half = T975[len(rel) - 1] * statistics.stdev(rel) / len(rel) ** 0.5 if len(rel) > 1 else None
    ci = f"[{m - half:+.2f}, {m + half:+.2f}]" if half is not None else ""
    rs = [r for r, _ in pairs]
    print(f"| {label} | {eta} | {len(rel)} | **{m:+.2f} %** {ci} | " + ", ".join(f"{x:+.2f}" for x in rel)
          + f" | {dauc:+.4f} | {ratio(rs, 'X_act'):.2f}x | {ratio(rs, 'X_grad'):.2f}x |")


def others(g, prefix, title, base, also=()):
    """The runs whose key starts with prefix (and the keys in also), each
    against the run of base with its seed."""
    rows = sorted(k for k in g if k.startswith(prefix)) + [k for k in also if k in g]
    if not rows:
        return
    by_seed = {r["seed"]: r for r in g.get(base, [])}
    print(f"\n| {title} | test loss | vs {base} | accuracy % | AUC | " + " | ".join(
        f"{e} ratio" for e in ["X_act", "X_grad", "W_grad", "emb_grad"]) + " |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in rows:
        rs = g[key]
        cells = []
        for e in ["X_act", "X_grad", "W_grad", "emb_grad"]:
            cells.append(f"{ratio(rs, e):.2f}x" if all(e in r["acct"] for r in rs) else "-")
        pairs = [change(r, by_seed[r["seed"]]) for r in rs if r["seed"] in by_seed]
        vs = f"{statistics.fmean(pairs):+.2f} %" if pairs else "-"
        print(f"| {key} | {mean(rs, lambda r: r['test']['loss']):.6f} | {vs} | "
              f"{100 * mean(rs, lambda r: r['test']['accuracy']):.3f} | "
              f"{mean(rs, lambda r: r['test']['auc']):.4f} | " + " | ".join(cells) + " |")


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/dp")
    g = runs(out)
    table2(g)
    lsweep(g)
    embbits(g)
    mp_table1(g)
    mp_table1_seeds(g)
    mp_map(g)
    others(g, "neg_", "negative baseline (2 workers)", "mp1_bot2_0", also=["mp1_bot2_0.90"])
    others(g, "hy_", "hybrid run", "hy_none")
    others(g, "ps_", "run", "ps_sync")


if __name__ == "__main__":
    main()
