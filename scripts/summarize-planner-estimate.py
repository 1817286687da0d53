#!/usr/bin/env python3
"""Each planner's own estimate of its plan's step beside the step measured on
the 4-host 1 Gbit/s cluster: TorchRec's EmbeddingShardingPlanner
(scripts/torchrec-planner-estimate, docs/data/torchrec/planner-estimate)
against TorchRec fp32's measured step in the interleaved TorchRec rounds
(docs/data/torchrec/interleaved-1gbit), and `sparq plan --measure`'s
modelled step against its plan's measured rounds (docs/data/plan/cluster4-measure).

    python3 scripts/summarize-planner-estimate.py
"""
import importlib.util
import json
import pathlib
import statistics

ROOT = pathlib.Path(__file__).resolve().parent.parent


def script(name):
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    torchrec_rows = script("summarize-torchrec").summarize(str(ROOT / "docs/data/torchrec/interleaved-1gbit"))
    torchrec_ms = next(r["ms_per_step"] for r in torchrec_rows if r["config"] == "torchrec-fp32" and r["prec"] == "fp32")
    estimates = [json.loads(l) for l in open(ROOT / "docs/data/torchrec/planner-estimate/estimate.jsonl")]
    plan_dir = ROOT / "docs/data/plan/cluster4-measure"
    plan = json.loads((plan_dir / "plan.json").read_text())
    summarize_plan = script("summarize-plan")
    sparq_ms = statistics.median(summarize_plan.measured_ms(f) for f in sorted(plan_dir.glob("measured_r*.jsonl")))
    print("| planner | its plan | the planner's estimate, ms/step | measured ms/step | estimate / measured | "
          "what the estimate covers |")
    print("|---|---|---|---|---|---|")
    for e in estimates:
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in e["parts_ms"].items())
        print(f"| TorchRec {e['torchrec']}, {e['topology']} | table-wise fp32, "
              f"{'/'.join(map(str, e['tables_per_rank']))} tables a rank | {e['estimate_ms']:.2f} | {torchrec_ms:.1f} | "
              f"{e['estimate_ms'] / torchrec_ms:.3f} | the tables' lookups and alltoall only ({parts}) |")
    flags = summarize_plan.flag_text(plan["flags"])
    print(f"| `sparq plan --measure` (its fitted {plan['net']}) | `{flags}` | {plan['modelled_ms_per_step']:.2f} | "
          f"{sparq_ms:.2f} | {plan['modelled_ms_per_step'] / sparq_ms:.3f} | the whole step on the virtual clock |")


if __name__ == "__main__":
    main()
