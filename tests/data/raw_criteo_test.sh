#!/usr/bin/env bash
# Raw Criteo data with the reference's split, end to end: Terabyte-style day
# files (gzip) streamed by 2 ranks reach the AUC of the same samples read as
# plain TSV; the split sizes are the closed form; Kaggle's one file is cut
# into 7 days; --data-sub-sample-rate drops only negatives; bad input is a
# one-line error naming the file.
#   tests/data/raw_criteo_test.sh path/to/sparq [mpiexec]
set -uo pipefail
SPARQ=$1
MPIEXEC=${2:-}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$@" > "$D/out" 2> "$D/err"; }
auc() { grep "^Testing at" "$D/out" | tail -1 | sed "s/.*, auc \([0-9.]*\),.*/\1/"; }

gen=(gen-data --format terabyte --days 3 --num-samples 150000 --seed 5 --cardinalities 1000)
run "$SPARQ" "${gen[@]}" --gzip --out "$D/gz" || fail "gen-data --gzip: $(cat "$D/err")"
for d in 0 1 2; do gzip -t "$D/gz/day_$d.gz" || fail "day_$d.gz is not valid gzip"; done
run "$SPARQ" "${gen[@]}" --out "$D/plain" || fail "gen-data: $(cat "$D/err")"
for d in 0 1 2; do zcat "$D/gz/day_$d.gz" | cmp -s - "$D/plain/day_$d" || fail "day_$d: gzip and plain differ"; done
[ "$(wc -l < "$D/plain/day_2")" -eq 50000 ] || fail "150000 samples over 3 days: 50000 a day"

# The independent reference: days 0-1 as the training file, the first half
# of day 2 as the test file (the reference's split, by hand).
cat "$D/plain/day_0" "$D/plain/day_1" > "$D/train.tsv"
head -n 25000 "$D/plain/day_2" > "$D/test.tsv"
model=(--arch-embedding-size 2000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 128
       --learning-rate 0.1 --print-freq 100000)
run "$SPARQ" train "${model[@]}" --nepochs 3 --data-path "$D/train.tsv" --test-data-path "$D/test.tsv" || fail "tsv: $(cat "$D/err")"
tsv_auc=$(auc)
raw=(--data-set terabyte --raw-data-file "$D/gz/day" --data-days 3)
run "$SPARQ" train "${model[@]}" --nepochs 3 "${raw[@]}" --stream --ranks 2 || fail "gz stream: $(cat "$D/err")"
grep -q "^data: terabyte split of $D/gz/day: days 0-1 train (100000 lines), day 2 halved: test 25000 samples, validation 25000 samples" \
  "$D/out" || fail "split line: $(cat "$D/out")"
grep -q "^data: streaming $D/gz/day_0.gz .. $D/gz/day_1.gz (100000 lines, .*each rank its own shard)" "$D/out" ||
  fail "streaming line: $(cat "$D/out")"
grep -q "^ *data " "$D/out" || fail "the allgather of streamed records is accounted: $(cat "$D/out")"
gz_auc=$(auc)
echo "auc: plain TSV, 1 rank in memory $tsv_auc; gzip day files, 2 ranks streaming $gz_auc"
awk -v a="$tsv_auc" -v b="$gz_auc" 'BEGIN { d = a - b; exit !(d < 0.002 && d > -0.002) }' ||
  fail "streamed gzip AUC $gz_auc not within 0.002 of the TSV's $tsv_auc"
if [ -n "$MPIEXEC" ]; then  # one rank per process: the same run, bit for bit
  run "$MPIEXEC" -n 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    "$SPARQ" train "${model[@]}" --nepochs 3 "${raw[@]}" --stream || fail "mpiexec stream: $(cat "$D/err")"
  [ "$(auc)" = "$gz_auc" ] || fail "under mpiexec auc $(auc), in-process $gz_auc"
fi
# Read into memory instead of streamed: the same split.
run "$SPARQ" train "${model[@]}" "${raw[@]}" --num-batches 2 || fail "gz in memory: $(cat "$D/err")"
grep -q "^data: 100000 train, 25000 test samples" "$D/out" || fail "in memory: $(cat "$D/out")"

# Kaggle: one file, 7 days by line count (100000 = 7 x 14285 + 5: days 0-4
# hold 14286 lines, 5-6 14285), day 6 halved.
run "$SPARQ" train "${model[@]}" --data-set kaggle --raw-data-file "$D/train.tsv" --num-batches 2 ||
  fail "kaggle: $(cat "$D/err")"
grep -q "^data: kaggle split of $D/train.tsv: days 0-5 train (85715 lines), day 6 halved: test 7143 samples, validation 7142 samples" \
  "$D/out" || fail "kaggle split: $(cat "$D/out")"

# Sub-sampling drops about that fraction of the negatives and no positive.
pos=$(cat "$D/plain/day_0" "$D/plain/day_1" | grep -c "^1")
neg=$((100000 - pos))
run "$SPARQ" train "${model[@]}" "${raw[@]}" --data-sub-sample-rate 0.5 --num-batches 2 ||
  fail "sub-sample: $(cat "$D/err")"
n=$(grep -o "^data: [0-9]* train" "$D/out" | grep -o "[0-9]*")
awk -v n="$n" -v p="$pos" -v q="$neg" 'BEGIN { k = n - p; exit !(k > 0.48 * q && k < 0.52 * q) }' ||
  fail "sub-sampling kept $n of $pos positives + $neg negatives"
grep -q "negatives kept with probability 0.5" "$D/out" || fail "sub-sampling said: $(cat "$D/out")"

# Bad input: one line naming the file.
one_line() { [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "$1" "$D/err" || fail "$2: $(cat "$D/err")"; }
mkdir "$D/cut" && cp "$D/gz/day_0.gz" "$D/gz/day_2.gz" "$D/cut/"
head -c 300000 "$D/gz/day_1.gz" > "$D/cut/day_1.gz"
run "$SPARQ" train "${model[@]}" --data-set terabyte --raw-data-file "$D/cut/day" --data-days 3 --stream --ranks 2 &&
  fail "a truncated .gz must fail"
one_line "cut/day_1.gz': .*truncated or corrupt gzip" "truncated gzip"
run "$SPARQ" train "${model[@]}" --data-set terabyte --raw-data-file "$D/gz/day" --data-days 4 && fail "missing day"
one_line "day 3: neither '$D/gz/day_3' nor '$D/gz/day_3.gz' exists" "missing day"
for bad in "--data-sub-sample-rate 0.5 --data-path $D/train.tsv" "--raw-data-file $D/train.tsv --data-set criteo" \
           "--raw-data-file $D/train.tsv --data-path $D/train.tsv" "--raw-data-file $D/gz/day --data-set terabyte --data-days 1"; do
  # shellcheck disable=SC2086
  run "$SPARQ" train "${model[@]}" $bad && fail "'$bad' must fail"
  one_line "error" "'$bad'"
done
run "$SPARQ" gen-data --out "$D/x" --days 3 && fail "--days without --format terabyte must fail"
one_line "shape --format terabyte" "gen-data --days"
echo "raw_criteo_test: all passed"
