#!/usr/bin/env bash
# `sparq predict` runs a model trained with DCT-MP as the trainer's own test
# runs it (per-sample top-k at the cut): on the test set, predict's loss and
# accuracy equal the trainer's last test line, its AUC to the 4 digits shown; so does a model cut
# without a codec, and one trained with DCT-MP at two cuts. `sparq export`
# refuses a DCT-MP model in one line unless --dense-cuts says the export is
# meant to run without the top-k.
#   tests/train/mp_predict_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$SPARQ" gen-data --out "$D/data" --num-samples 6000 --num-test 1500 --cardinalities 300 --seed 5 > /dev/null ||
  fail "gen-data"
common=(--data-path "$D/data" --arch-sparse-feature-size 8 --arch-mlp-bot 13-32-16-8 --arch-mlp-top 64-16-1
        --mini-batch-size 64 --print-freq 1000 --micro-batches 2 --test-freq 0)

# check NAME FLAGS...: train and save, then predict; the metrics must agree.
check() {
  local name=$1
  shift
  "$SPARQ" train "${common[@]}" "$@" --save "$D/$name.ck" > "$D/$name.train" 2>&1 || fail "$name: $(tail -2 "$D/$name.train")"
  "$SPARQ" predict --load "$D/$name.ck" --data-path "$D/data/test.tsv" --out "$D/$name.scores" --test-batch 500 \
    > "$D/$name.predict" 2>&1 || fail "$name predict: $(cat "$D/$name.predict")"
  local trained predicted
  # "Testing at ... loss L, accuracy A %, auc U, ..." and "N samples of F: loss L, accuracy A %, auc U"
  trained=$(grep "^Testing" "$D/$name.train" | tail -1 | sed -E 's/.*loss ([0-9.]+), accuracy ([0-9.]+) %, auc ([0-9.]+).*/\1 \2 \3/')
  predicted=$(grep "samples of" "$D/$name.predict" | sed -E 's/.*loss ([0-9.]+), accuracy ([0-9.]+) %, auc ([0-9.]+).*/\1 \2 \3/')
  # Loss and accuracy as printed; AUC to the trainer's 4 digits (batches of
  # another size round the last bits of a few scores otherwise).
  [ -n "$trained" ] && awk -v t="$trained" -v p="$predicted" 'BEGIN {
    split(t, a, " "); split(p, b, " "); d = a[3] - b[3]
    exit !(a[1] == b[1] && a[2] == b[2] && d <= 0.00006 && d >= -0.00006) }' ||
    fail "$name: trainer's test '$trained' vs predict '$predicted'"
  echo "ok: $name ($trained)"
}

check dct --ranks 2 --mp-splits bot:1 --mp-codec dct:0.8
grep -q "run as trained: --mp-codec dct:0.8 at --mp-splits bot:1" "$D/dct.predict" || fail "predict must say: $(cat "$D/dct.predict")"
check dense --ranks 2 --mp-splits bot:1
grep -q "run as trained" "$D/dense.predict" && fail "a model cut without a codec runs whole"
check dct_two_cuts --ranks 3 --mp-splits bot:1,top:1 --mp-codec dct:0.75

"$SPARQ" export --load "$D/dct.ck" --out "$D/x.npz" 2> "$D/err" && fail "export must refuse"
[ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "trained with --mp-codec dct:0.8 at --mp-splits bot:1.*--dense-cuts" "$D/err" ||
  fail "export error: $(cat "$D/err")"
[ ! -e "$D/x.npz" ] || fail "a refused export leaves no file"
"$SPARQ" export --load "$D/dct.ck" --out "$D/x.npz" --dense-cuts > /dev/null || fail "export --dense-cuts"
"$SPARQ" export --load "$D/dense.ck" --out "$D/y.npz" > /dev/null || fail "a model cut without a codec exports as is"
echo "mp_predict_test: all passed"
