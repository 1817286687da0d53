#!/usr/bin/env bash
# Training throughput of `sparq train` against the PyTorch DLRM of
# scripts/dlrm_torch_bench.py (same model, batch, threads; batches in memory;
# forward + loss + backward + SGD update), interleaved run by run so both see
# the same machine load. One JSON line a run pair in OUT/runs.jsonl; beside
# them what each side computes with: OUT/machine.txt (the CPU and its flags),
# OUT/sparq-gemm.txt (sparq's `gemm:` line) and OUT/torch-config.txt
# (torch.__version__ and torch.__config__.show(): its BLAS and oneDNN).
# scripts/summarize-single-rank.py OUT makes the table (medians).
#
#   [OUT=dir] scripts/bench_single_rank.sh [build/sparq] [repeats]
#
# Needs the project's .venv (scripts/setup: PyPI's torch).
set -euo pipefail
SPARQ=${1:-build/sparq}
REPS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$HERE/../.venv/bin/python   # the project's environment (scripts/setup), with PyPI's torch
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
COMMIT=$(git -C "$HERE/.." rev-parse --short HEAD)$(git -C "$HERE/.." diff --quiet HEAD -- sparq tools || echo +)
{ grep -m1 "model name" /proc/cpuinfo; grep -m1 "^flags" /proc/cpuinfo; nproc; } > "$OUT/machine.txt"
"$PY" -c "import torch; print(torch.__version__); print(torch.__config__.show())" > "$OUT/torch-config.txt"
for B in 128 1024; do
  NB=$(( B == 128 ? 600 : 100 )); TNB=$(( B == 128 ? 200 : 40 ))
  for T in 1 2; do
    for r in $(seq "$REPS"); do
      out=$("$SPARQ" train --data-generation random --mini-batch-size "$B" --num-batches "$NB" \
            --print-freq "$NB" --threads "$T" --learning-rate 0.1)
      grep -m1 "^gemm:" <<<"$out" > "$OUT/sparq-gemm.txt"
      s=$(sed -n 's/.*compute (fwd+loss+bwd+update) \([0-9]*\) samples.*/\1/p' <<<"$out")
      g=$(sed -n 's/.*MLP \([0-9.]*\) GFLOP.*/\1/p' <<<"$out")
      tout=$(OMP_NUM_THREADS=$T "$PY" "$HERE/dlrm_torch_bench.py" --mini-batch-size "$B" --threads "$T" \
             --num-batches "$TNB" --warmup 10 --repeats 1)
      t=$(sed -n 's/torch median: \([0-9]*\) samples.*/\1/p' <<<"$tout")
      printf '{"commit":"%s","date":"%s","batch":%d,"threads":%d,"rep":%d,"sparq_samples_per_s":%s,"torch_samples_per_s":%s,"sparq_mlp_gflops":%s,"load":%s}\n' \
        "$COMMIT" "$(date -u +%F)" "$B" "$T" "$r" "$s" "$t" "$g" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/runs.jsonl"
    done
  done
done
