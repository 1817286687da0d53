#!/usr/bin/env bash
# The DLRM reference's pre-processed .npz as training data: sparq's TSV
# turned into that layout by numpy (scripts/tsv_to_npz.py: per-feature
# dictionaries, np.savez_compressed) trains to the same test AUC (within
# 0.002) as the TSV itself with the same flags; bad arrays are one-line
# errors naming the file and the array.
#   npz_train_test.sh SPARQ PYTHON
set -euo pipefail
sparq=$1 py=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$sparq" gen-data --format tsv --num-samples 40000 --num-test 10000 --cardinalities 2000 --seed 3 --out "$tmp/tsv" > /dev/null
"$py" "$root/scripts/tsv_to_npz.py" --out "$tmp/npz" "$tmp/tsv/train.tsv" "$tmp/tsv/test.tsv"

flags=(--arch-embedding-size 20000 --arch-mlp-bot 13-32-16 --arch-mlp-top 64-1 --mini-batch-size 128
       --learning-rate 0.1 --nepochs 2 --print-freq 1000 --seed 5)
auc_of() {  # the last test's AUC, from the metrics lines
  "$sparq" train --data-path "$1" "${flags[@]}" --metrics "$tmp/m.jsonl" > "$tmp/out" || fail "train $1: $(cat "$tmp/out")"
  grep '"event":"test"' "$tmp/m.jsonl" | tail -1 | grep -o '"auc":[0-9.e+-]*' | cut -d: -f2
  rm "$tmp/m.jsonl"
}
a_tsv=$(auc_of "$tmp/tsv")
a_npz=$(auc_of "$tmp/npz")  # a directory with train.npz and test.npz
echo "test AUC: TSV $a_tsv, npz $a_npz"
"$py" -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 0.002 or a < 0.6)' "$a_tsv" "$a_npz" ||
  fail "AUC of the npz ($a_npz) and the TSV ($a_tsv) more than 0.002 apart"
# A file as --data-path, with --test-data-path.
"$sparq" train --data-path "$tmp/npz/train.npz" --test-data-path "$tmp/npz/test.npz" "${flags[@]}" --num-batches 5 \
  > "$tmp/out" || fail "train on files: $(cat "$tmp/out")"

# Bad arrays: one line naming the file and the array.
"$py" - "$tmp" <<'PY'
import sys, numpy as np
d = sys.argv[1]
n = 4
ok = dict(X_int=np.zeros((n, 13), np.int32), X_cat=np.zeros((n, 26), np.int32), y=np.zeros(n, np.int32))
np.savez(d + "/no_cat.npz", X_int=ok["X_int"], y=ok["y"])
np.savez(d + "/neg.npz", **{**ok, "X_cat": np.full((n, 26), -2, np.int32)})
np.savez(d + "/shape.npz", **{**ok, "X_int": np.zeros((n, 12), np.int32)})
np.savez(d + "/len.npz", **{**ok, "y": np.zeros(n + 1, np.int32)})
np.savez(d + "/float.npz", **{**ok, "X_cat": np.zeros((n, 26), np.float32)})
with open(d + "/trunc.npz", "wb") as f:
    f.write(open(d + "/neg.npz", "rb").read()[:300])
PY
expect_error() {  # file, text the one-line error must hold
  if "$sparq" train --data-path "$tmp/$1" --num-batches 1 > /dev/null 2> "$tmp/err"; then fail "$1 must fail"; fi
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "$1: one-line error: $(cat "$tmp/err")"
  grep -qF "$2" "$tmp/err" || fail "$1: error must say '$2': $(cat "$tmp/err")"
  echo "ok   $1: $(cat "$tmp/err")"
}
expect_error no_cat.npz "no_cat.npz': no array 'X_cat'"
expect_error neg.npz "neg.npz', array 'X_cat': value -2 at row 0, feature 0"
expect_error shape.npz "shape.npz', array 'X_int': shape (4, 12), expected (N, 13)"
expect_error len.npz "len.npz': arrays of different lengths (X_int 4, X_cat 4, y 5)"
expect_error float.npz "float.npz', array 'X_cat': <f4 values, integers expected"
expect_error trunc.npz "trunc.npz"
