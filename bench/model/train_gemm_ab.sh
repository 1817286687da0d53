#!/usr/bin/env bash
# One rank, 2 threads: samples a second of the compute phase (`summary:`
# line) of a base build against this build on oneDNN (fp32, and bf16 with
# --mlp-precision bf16 where the CPU has AVX512_BF16) and on OpenBLAS, with
# OPENBLAS_CORETYPE unset and set to Haswell, interleaved round by round.
#   bench/model/train_gemm_ab.sh BASE_SPARQ [ROUNDS]
# Prints "round batch build env samples/s" lines and, at the end, medians of
# each configuration's ratio to the base without OPENBLAS_CORETYPE.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=$1 rounds=${2:-6}
[ -x "$base" ] || { echo "usage: $0 BASE_SPARQ [ROUNDS]" >&2; exit 2; }
out=$(mktemp)
bf16=$(grep -qw avx512_bf16 /proc/cpuinfo && echo yes || true)
rate() {  # BATCH SPARQ [ENV=VALUE ...]; $prec: the MLPs' precision
  local b=$1 bin=$2; shift 2
  env -u OPENBLAS_CORETYPE "$@" "$bin" train --data-generation random --mini-batch-size "$b" \
      --num-batches $((b == 128 ? 2000 : 200)) --print-freq 100000 --threads 2 ${prec:+--mlp-precision $prec} 2>&1 |
    sed -n 's/^summary: .*compute (fwd+loss+bwd+update) \([0-9]*\) samples.*/\1/p'
}
for r in $(seq "$rounds"); do
  for b in 128 1024; do
    echo "$r $b base unset $(rate "$b" "$base")"
    echo "$r $b base haswell $(rate "$b" "$base" OPENBLAS_CORETYPE=Haswell)"
    echo "$r $b onednn unset $(rate "$b" build/sparq)"
    echo "$r $b onednn haswell $(rate "$b" build/sparq OPENBLAS_CORETYPE=Haswell)"
    echo "$r $b openblas unset $(rate "$b" build/sparq SPARQ_GEMM=openblas)"
    if [ -n "$bf16" ]; then
      echo "$r $b onednn-bf16 unset $(prec=bf16 rate "$b" build/sparq)"
      echo "$r $b onednn-bf16 haswell $(prec=bf16 rate "$b" build/sparq OPENBLAS_CORETYPE=Haswell)"
    fi
  done
done | tee "$out"
python3 - "$out" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, b, build, env, v = line.split()
    runs[(b, build, env)].append(float(v))
for (b, build, env), v in runs.items():
    base = runs[(b, "base", "unset")]
    ratio = statistics.median(x / y for x, y in zip(v, base))
    print(f"batch {b} {build} {env}: median {statistics.median(v):.0f} samples/s, {ratio:.2f}x base")
PY
rm -f "$out"
