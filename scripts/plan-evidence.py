#!/usr/bin/env python3
"""The accuracy evidence `sparq plan` admits codecs by: every codec the
project has trained against its fp32 baseline with paired seeds, and what it
did to the final test loss, computed from the stored runs under docs/data.

    scripts/plan-evidence.py [DOCS_DATA] > sparq/plan/evidence_table.inc

writes the C++ table sparq/plan/evidence.cc compiles in (the CTest
plan.evidence regenerates it and fails on any difference, so the table is
always what the stored runs say)."""
import json
import pathlib
import re
import statistics
import sys


def final_test_loss(path):
    tests = [json.loads(l) for l in path.read_text().splitlines() if '"event":"test"' in l]
    return tests[-1]["loss"] if tests else None


def seeds(folder, prefix):
    """{seed: final test loss} of the runs PREFIX_sSEED.jsonl."""
    out = {}
    for p in sorted(folder.glob(f"{prefix}_s*.jsonl")):
        m = re.fullmatch(re.escape(prefix) + r"_s(\d+)", p.stem)
        loss = final_test_loss(p) if m else None
        if loss is not None:
            out[int(m.group(1))] = loss
    return out


def changes(base, runs):
    """The relative change of the test loss, %, of each seed both ran."""
    return [100 * (runs[s] / base[s] - 1) for s in sorted(set(base) & set(runs))]


def summary(xs):
    """Mean and worst change and the number of pairs (None: no pair)."""
    return (statistics.fmean(xs), max(xs), len(xs)) if xs else None


def paired(base, runs):
    return summary(changes(base, runs))


def pooled(folder, base, run):
    """paired() over every data set of a map: runs SET_BASE_sSEED against SET_RUN_sSEED."""
    sets = sorted({p.name.split(f"_{base}_s")[0] for p in folder.glob(f"*_{base}_s*.jsonl")})
    return summary([x for d in sets for x in changes(seeds(folder, f"{d}_{base}"), seeds(folder, f"{d}_{run}"))])


# scripts/plan-accuracy's CODEC runs: their name, and the kind and codec they are evidence for, and the
# placement of their runs and of the fp32 runs they pair with.
MAP_CODECS = {"q4-rd": ("dp", "q4@recursive-doubling", "table-wise"), "q4-ring": ("dp", "q4@ring", "table-wise"),
              "dct98bf16": ("dp", "dct:0.98,1000+bf16", "table-wise"), "q4q2": ("emb", "q4/q2", "table-wise"),
              "embbf16": ("emb", "fp32/bf16", "replicated"), "mlpbf16": ("mlp", "bf16", "table-wise")}


def entries(data):
    dp, emu = data / "dp", data / "emulation/10gbit"
    synth = "data/synth (gen-data's default: 1M teacher-labelled samples), one epoch"
    base = seeds(dp, "t2_none")
    for run in sorted({p.stem.rsplit("_s", 1)[0] for p in dp.glob("t2_dct*.jsonl")}):
        m = re.fullmatch(r"t2_dct([\d.]+)(\w*)", run)
        codec = f"dct:{m.group(1)},1000" + (f"+{m.group(2)}" if m.group(2) else "")
        yield "dp", codec, "replicated", 4, paired(base, seeds(dp, run)), synth + ", global batch 128", f"docs/data/dp/{run}_s*.jsonl"
    base = seeds(dp, "eb_fp32_fp32")
    for run in sorted({p.stem.rsplit("_s", 1)[0] for p in dp.glob("eb_q*.jsonl")}):
        _, fwd, bwd = run.split("_")
        yield "emb", f"{fwd}/{bwd}", "table-wise", 4, paired(base, seeds(dp, run)), synth + ", global batch 128", f"docs/data/dp/{run}_s*.jsonl"
    codecs = {"q4-ring": ("q4", "ring"), "q4-ring-ec": ("q4+ec", "ring"), "q4-rd": ("q4", "recursive-doubling")}
    for name, (codec, coll) in codecs.items():
        for p in (8, 32, 128):
            got = paired(seeds(emu, f"fp32_p{p}"), seeds(emu, f"{name}_p{p}"))
            yield ("dp", f"{codec}@{coll}", "table-wise", p, got, synth + ", global batch 64P",
                   f"docs/data/emulation/10gbit/{name}_p{p}_s*.jsonl")
    # Codecs alone on each of the DP/MP maps' four sets (scripts/plan-accuracy with CODEC), against its
    # fp32 runs of the same placement: a row a set, so that the judge sees the set where the codec costs most.
    acc = data / "plan" / "accuracy-codecs"
    for name, (kind, codec, placement) in MAP_CODECS.items():
        base = "fp32" if placement == "table-wise" else f"fp32-{placement}"
        for d in sorted({p.name.split(f"_{name}_s")[0] for p in acc.glob(f"*_{name}_s*.jsonl")}):
            z, auc = re.fullmatch(r"z([\d.]+)_a([\d.]+)", d).groups()
            yield (kind, codec, placement, 4, paired(seeds(acc, f"{d}_{base}"), seeds(acc, f"{d}_{name}")),
                   f"the DP/MP maps' set Zipf {z}, teacher AUC {auc}, 3 epochs (rate decayed), global batch 2048",
                   f"docs/data/plan/accuracy-codecs/{d}_{name}_s*.jsonl")
    # bf16 MLPs: the 4-host cluster's fp32 table-wise runs, once with each precision (seeds 1-3), and the
    # same runs on in-process ranks (seeds 4-5; seed 1 again there, the same bits, is not counted twice).
    time, more = data / "time", data / "plan" / "accuracy-mlp-bf16"
    base = {**seeds(more, "synth_fp32-mlps"), **seeds(time / "1gbit", "fp32-tablewise")}
    runs = {**seeds(more, "synth_bf16-mlps"), **seeds(time / "1gbit-bf16", "fp32-tablewise")}
    yield ("mlp", "bf16", "table-wise", 4, paired(base, runs), synth + ", global batch 2048",
           "docs/data/time/1gbit-bf16/fp32-tablewise_s*.jsonl, docs/data/plan/accuracy-mlp-bf16/synth_*_s*.jsonl")
    # DCT-MP at a hybrid plan's cut: the maps' four data sets, 2 stages (bot:2), 2 micro-batches.
    maps = "the DP/MP maps' four sets (Zipf 1.0/1.3 x teacher AUC 0.75/0.85), one epoch, global batch 256"
    for folder, eta in (("map", "0.90"), ("map", "0.95"), ("map-bf16", "0.90+bf16")):
        yield ("mp", f"dct:{eta}", "replicated", 2, pooled(data / "mp" / folder, "0", eta), maps,
               f"docs/data/mp/{folder}/*_{eta}_s*.jsonl")
    # The parameter server (1 server, asynchronous workers) against synchronous data parallelism.
    mp = data / "mp"
    for run, codec in (("ps_ps", "none"), ("ps_dct", "dct:0.98,1000"), ("ps_dctbf16", "dct:0.98,1000+bf16")):
        yield ("ps", codec, "replicated", 3, paired(seeds(mp, "ps_sync"), seeds(mp, run)), synth + ", global batch 128",
               f"docs/data/mp/{run}_s*.jsonl")


def main():
    data = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data")
    print("// Generated by scripts/plan-evidence.py from the stored runs; do not edit.")
    print("// kind, codec, placement, ranks, mean and worst paired change of the final test loss (%), seeds, data, runs")
    for kind, codec, placement, ranks, got, what, source in entries(data):
        if got is None:
            continue
        mean, worst, n = got
        print(f'{{"{kind}", "{codec}", "{placement}", {ranks}, {mean:.3f}, {worst:.3f}, {n}, "{what}", "{source}"}},')


if __name__ == "__main__":
    main()
