#!/bin/bash
# DCT-MP at 95% on a data set of another seed and Zipf exponent: the test loss
# with the mask at test time (the trainer's own test, train_*.log) and without
# it (the model exported with --dense-cuts and scored by the PyTorch loader,
# scripts/load_sparq_export.py, which runs the whole model without a cut).
#   docs/data/mp/heldout/run.sh [OUT_DIR]        (from the repository root)
set -euo pipefail
S=${SPARQ:-build/sparq}
PY=${PYTHON:-.venv/bin/python}  # with torch: the project's environment (scripts/setup)
OUT=${1:-$(mktemp -d)}
mkdir -p "$OUT"
[[ -f $OUT/data/test.tsv ]] || "$S" gen-data --out "$OUT/data" --seed 7 --zipf 1.3 > /dev/null
for seed in 1 2; do
  for eta in 0 0.95; do
    codec=none; [[ $eta == 0 ]] || codec=dct:$eta
    "$S" train --data-path "$OUT/data" --arch-mlp-top 512-256-128-1 --mini-batch-size 256 --print-freq 4000 \
      --ranks 2 --mp-splits bot:2 --micro-batches 2 --mp-codec $codec --seed $seed --test-freq 0 \
      --save "$OUT/ck_${eta}_s$seed" > "$OUT/train_${eta}_s$seed.log" 2>&1
    "$S" export --load "$OUT/ck_${eta}_s$seed" --out "$OUT/m_${eta}_s$seed.npz" --dense-cuts > /dev/null
    "$PY" scripts/load_sparq_export.py "$OUT/m_${eta}_s$seed.npz" "$OUT/data/test.tsv" \
      --out "$OUT/pred_${eta}_s$seed.txt" > /dev/null
    echo "seed $seed eta $eta, mask at test: $(grep Testing "$OUT/train_${eta}_s$seed.log" | tail -1 | cut -d, -f2)"
  done
done
# Without the mask: log loss of the dense forward pass's scores against the test labels.
python3 - "$OUT" << 'PY'
import math, sys
out = sys.argv[1]
y = [float(l.split("\t", 1)[0]) for l in open(f"{out}/data/test.tsv")]
for seed in (1, 2):
    for eta in ("0", "0.95"):
        p = [min(max(float(x), 1e-12), 1 - 1e-12) for x in open(f"{out}/pred_{eta}_s{seed}.txt")]
        loss = -sum(t * math.log(q) + (1 - t) * math.log(1 - q) for q, t in zip(p, y)) / len(y)
        print(f"seed {seed} eta {eta}, no mask (dense export): loss {loss:.6f}")
PY
