#!/usr/bin/env python3
"""Before/after of the SIMD kernels in one run: two builds (e.g. the base
commit in build-base/ and this tree in build/), runs interleaved, each
configuration with OPENBLAS_CORETYPE as the environment has it and unset.

  bench/compress/simd_before_after.py BEFORE_DIR AFTER_DIR [rounds]

Each DIR is a build tree (sparq, bench/compress/bench_compress). Prints the medians over rounds of
GB/s of input bytes (CPU time, as bench_compress reports it), the ratio to
memcpy of the same buffer measured in the same process, and the q4 / q4+ec
ring allreduce times (2 in-process ranks, 16 MiB, rows of 512) with their
ratio."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

M16 = 16777216
KERNELS = [f"BM_Memcpy/{M16}", f"BM_ThresholdMaskPack/{M16}", f"BM_RowwiseQuantize/{M16}/4",
           f"BM_RowwiseDequantize/{M16}/4"]


def env_for(coretype):
    e = dict(os.environ)
    e.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        e["OPENBLAS_CORETYPE"] = coretype
    return e


def kernels(d, env):
    filt = "^(" + "|".join(k.replace("/", "/") for k in KERNELS) + ")$"
    out = subprocess.run([os.path.join(d, "bench", "compress", "bench_compress"), f"--benchmark_filter={filt}", "--benchmark_format=json",
                          "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"],
                         env=env, check=True, capture_output=True, text=True).stdout
    runs = {b["run_name"]: b["bytes_per_second"] for b in json.loads(out)["benchmarks"]
            if b.get("aggregate_name") == "median"}
    return {k: runs[k] for k in KERNELS}


def ring(d, env):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([os.path.join(d, "sparq"), "bench", "quantized-allreduce", "--ranks", "2", "--sizes", "16MiB",
                        "--codec", "q4,q4+ec", "--iters", "20", "--warmup", "3", "--json", f.name],
                       env=env, check=True, capture_output=True)
        return {r["codec"]: r["time_us"] / 1000 for r in json.load(open(f.name))}


def main():
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    coretype = os.environ.get("OPENBLAS_CORETYPE", "Haswell")
    res = {}
    for _ in range(rounds):
        for ct in (coretype, None):
            for name, d in (("before", before), ("after", after)):
                k = kernels(d, env_for(ct))
                r = ring(d, env_for(ct))
                cell = res.setdefault((ct, name), {})
                for b, v in k.items():
                    cell.setdefault(b, []).append(v)
                    cell.setdefault(b + " ratio", []).append(v / k[KERNELS[0]])
                for c, t in r.items():
                    cell.setdefault(c, []).append(t)
                cell.setdefault("ec/q4", []).append(r["q4+ec"] / r["q4"])
    med = lambda v: statistics.median(v)
    for ct in (coretype, None):
        print(f"\nOPENBLAS_CORETYPE={ct or '(unset)'}, medians of {rounds} interleaved rounds")
        print(f"{'':34} {'before GB/s':>11} {'x memcpy':>8} {'after GB/s':>10} {'x memcpy':>8} {'speedup':>7}")
        b, a = res[(ct, "before")], res[(ct, "after")]
        for k in KERNELS:
            print(f"{k:34} {med(b[k]) / 1e9:11.2f} {med(b[k + ' ratio']):8.2f} {med(a[k]) / 1e9:10.2f}"
                  f" {med(a[k + ' ratio']):8.2f} {med(a[k]) / med(b[k]):7.2f}")
        for c in ("q4", "q4+ec"):
            print(f"{'ring 2 ranks 16MiB ' + c + ' ms':34} {med(b[c]):11.2f} {'':8} {med(a[c]):10.2f} {'':8}"
                  f" {med(b[c]) / med(a[c]):7.2f}")
        print(f"{'ring q4+ec / q4 (per round)':34} {med(b['ec/q4']):11.2f} {'':8} {med(a['ec/q4']):10.2f}")


if __name__ == "__main__":
    main()
