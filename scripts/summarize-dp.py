#!/usr/bin/env python3
"""Markdown tables from the --metrics files of scripts/reproduce-dp.

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
    bl = mean(base, lambda r: r["test"]["loss"])
    print(f"\n| dp-codec | seeds | test loss | vs baseline | accuracy % | AUC | W_grad ratio | W_grad kept % |")
    print("|---|---|---|---|---|---|---|---|")
    for key in ["t2_none"] + sorted(k for k in g if k.startswith("t2_dct")):
        rs = g[key]
        loss = mean(rs, lambda r: r["test"]["loss"])
        kept = mean(rs, lambda r: r["acct"]["W_grad"].get("kept_percent", 100))
        name = "none" if key == "t2_none" else f"dct:{key[6:]},1000"
        print(f"| {name} | {len(rs)} | {loss:.6f} | {100 * (loss / bl - 1):+.3f} % | "
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
    ba = mean(base, lambda r: r["test"]["accuracy"])
    print("\n| fwd/bwd | seeds | test loss | accuracy % | vs fp32 | AUC | emb_fwd ratio | emb_bwd ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for fb in ["fp32_fp32", "q8_q8", "q8_q4", "q4_q4", "q4_q2", "q2_q2"]:
        rs = g.get("eb_" + fb)
        if not rs:
            continue
        acc = mean(rs, lambda r: r["test"]["accuracy"])
        print(f"| {fb.replace('_', '/')} | {len(rs)} | {mean(rs, lambda r: r['test']['loss']):.6f} | {100 * acc:.3f} | "
              f"{100 * (acc / ba - 1):+.3f} % | {mean(rs, lambda r: r['test']['auc']):.4f} | "
              f"{ratio(rs, 'emb_fwd'):.2f}x | {ratio(rs, 'emb_bwd'):.2f}x |")


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/dp")
    g = runs(out)
    table2(g)
    lsweep(g)
    embbits(g)


if __name__ == "__main__":
    main()
