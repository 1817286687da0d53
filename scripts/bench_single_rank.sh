#!/usr/bin/env bash
# Training throughput of `sparq train` against the PyTorch DLRM of
# scripts/dlrm_torch_bench.py (same model, batch, threads; batches in memory;
# forward + loss + backward + SGD update), interleaved run by run so both see
# the same machine load. Prints one markdown row per configuration with the
# median of the repetitions.
#
#   scripts/bench_single_rank.sh [build/sparq] [repeats]
#
# Needs the project's .venv (scripts/setup: PyPI's torch) and libopenblas0-openmp (the reference runs on
# the OpenMP OpenBLAS via LD_LIBRARY_PATH; the pthread build fights OpenMP).
set -euo pipefail
SPARQ=${1:-build/sparq}
REPS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=.venv/bin/python   # the project's environment (scripts/setup), with PyPI's torch
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "| batch | threads | sparq samples/s | torch samples/s | speed-up | sparq MLP GFLOP/s | load avg |"
echo "|---|---|---|---|---|---|---|"
for B in 128 1024; do
  NB=$(( B == 128 ? 600 : 100 )); TNB=$(( B == 128 ? 200 : 40 ))
  for T in 1 2; do
    s=(); t=(); g=()
    for r in $(seq "$REPS"); do
      out=$("$SPARQ" train --data-generation random --mini-batch-size "$B" --num-batches "$NB" \
            --print-freq "$NB" --threads "$T" --learning-rate 0.1)
      s+=("$(sed -n 's/.*compute (fwd+loss+bwd+update) \([0-9]*\) samples.*/\1/p' <<<"$out")")
      g+=("$(sed -n 's/.*MLP \([0-9.]*\) GFLOP.*/\1/p' <<<"$out")")
      tout=$(OMP_NUM_THREADS=$T LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
             "$PY" "$HERE/dlrm_torch_bench.py" --mini-batch-size "$B" --threads "$T" \
             --num-batches "$TNB" --warmup 10 --repeats 1)
      t+=("$(sed -n 's/torch median: \([0-9]*\) samples.*/\1/p' <<<"$tout")")
    done
    ms=$(printf '%s\n' "${s[@]}" | median); mt=$(printf '%s\n' "${t[@]}" | median)
    mg=$(printf '%s\n' "${g[@]}" | median)
    echo "| $B | $T | $ms | $mt | $(awk -v a="$ms" -v b="$mt" 'BEGIN {printf "%.2fx", a / b}') | $mg | $(cut -d' ' -f1 /proc/loadavg) |"
  done
done
