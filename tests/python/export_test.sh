#!/usr/bin/env bash
# `sparq export` loads into the DLRM reference's PyTorch DLRM_Net
# (scripts/load_sparq_export.py) and computes what `sparq predict` computes:
# on 1000 test samples, read as TSV and as sparq binary, the click
# probabilities agree within 1e-5. Failures leave no scores or export file.
#   export_test.sh SPARQ PYTHON
set -euo pipefail
sparq=$1 py=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$sparq" gen-data --format tsv --num-samples 4000 --num-test 1000 --cardinalities 500 --seed 11 --out "$tmp" > /dev/null
"$sparq" convert "$tmp/test.tsv" -o "$tmp/test.bin" > /dev/null
# Table sizes differ per table, the bottom and top MLPs have 2 layers each.
rows=$(seq -s- 100 37 1025)
"$sparq" train --data-path "$tmp" --arch-embedding-size "$rows" --arch-sparse-feature-size 8 --arch-mlp-bot 13-16-8 \
  --arch-mlp-top 32-1 --mini-batch-size 64 --nepochs 3 --learning-rate 0.2 --print-freq 1000 --save "$tmp/m.ck" \
  > /dev/null
"$sparq" predict --load "$tmp/m.ck" --data-path "$tmp/test.tsv" --out "$tmp/sparq.tsv" --test-batch 300
[ "$(wc -l < "$tmp/sparq.tsv")" -eq 1000 ] || fail "one score per sample"
"$sparq" export --load "$tmp/m.ck" --out "$tmp/m.npz"
for data in test.tsv test.bin; do
  "$py" "$root/scripts/load_sparq_export.py" "$tmp/m.npz" "$tmp/$data" --out "$tmp/torch.tsv" --batch 256
  "$py" - "$tmp/sparq.tsv" "$tmp/torch.tsv" "$data" <<'PY'
import sys, numpy as np
a, b = np.loadtxt(sys.argv[1]), np.loadtxt(sys.argv[2])
assert a.shape == b.shape == (1000,), (a.shape, b.shape)
d = np.abs(a - b).max()
print(f"{sys.argv[3]}: max |sparq predict - PyTorch DLRM_Net| = {d:.3g} over {len(a)} samples (scores {a.min():.3f}..{a.max():.3f})")
sys.exit(0 if d <= 1e-5 else 1)
PY
done

# Failures leave nothing under the final names.
if "$sparq" predict --load "$tmp/m.ck" --data-path "$tmp/nope.tsv" --out "$tmp/p.tsv" 2> "$tmp/err"; then
  fail "predict on a missing file must fail"
fi
[ ! -e "$tmp/p.tsv" ] && [ ! -e "$tmp/p.tsv.tmp" ] || fail "predict left a file behind"
printf 'garbage' > "$tmp/bad.ck"
if "$sparq" export --load "$tmp/bad.ck" --out "$tmp/e.npz" 2> "$tmp/err"; then fail "export of a bad checkpoint"; fi
[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "one-line error: $(cat "$tmp/err")"
[ ! -e "$tmp/e.npz" ] && [ ! -e "$tmp/e.npz.tmp" ] || fail "export left a file behind"
echo "ok"
