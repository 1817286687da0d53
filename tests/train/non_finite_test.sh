#!/usr/bin/env bash
# `sparq train` on data with a NaN in one sample's dense feature, the sample
# of step 3 that rank 1 trains on (--no-shuffle, batch 64, sample 40):
#  - --non-finite fail (the default) stops on step 3 with one line naming
#    the rank, the step and the tensor, for a dense codec, for table-wise
#    tables and for DCT-MP's cut;
#  - --non-finite skip skips step 3 on both ranks and ends where the default
#    run on the data without that batch ends (its test line and last loss,
#    to the printed digits; tests/train/non_finite_test.cc checks it bit for
#    bit), data parallel and model parallel (DCT-MP).
#   tests/train/non_finite_test.sh path/to/sparq [mpiexec]
set -uo pipefail
SPARQ=$1
MPIEXEC=${2:-}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$@" > "$D/out" 2> "$D/err"; }

run "$SPARQ" gen-data --format bin --out "$D/data" --num-samples 1280 --num-test 256 --seed 5 ||
  fail "gen-data: $(cat "$D/err")"
# Record 3 * 64 + 40 gets dense[1] = NaN; a copy of the data leaves batch 3 out.
python3 - "$D" << 'PY'
import math, os, shutil, struct, sys
d = sys.argv[1]
head, rec = 64, 160
shutil.copytree(f"{d}/data", f"{d}/without")
with open(f"{d}/data/train.bin", "r+b") as f:
    f.seek(head + (3 * 64 + 40) * rec + 4 + 4)
    f.write(struct.pack("<f", math.nan))
with open(f"{d}/data/train.bin", "rb") as f:
    data = f.read()
count = struct.unpack_from("<Q", data, 24)[0]
cut = data[:head] + data[head:head + 3 * 64 * rec] + data[head + 4 * 64 * rec:]
cut = cut[:24] + struct.pack("<Q", count - 64) + cut[32:]
with open(f"{d}/without/train.bin", "wb") as f:
    f.write(cut)
PY
[ -s "$D/without/train.bin" ] || fail "could not write the data"
common=(--arch-embedding-size 300 --arch-sparse-feature-size 8 --arch-mlp-bot 13-16-8 --arch-mlp-top 16-1
        --mini-batch-size 64 --no-shuffle --print-freq 20 --test-freq 0)
launch=("$SPARQ" train --ranks 2)
[ -n "$MPIEXEC" ] && launch=("$MPIEXEC" -n 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$SPARQ" train)

# expect_error NAME PATTERN FLAGS...: exits non-zero, one stderr line matching PATTERN (extended regex).
expect_error() {
  local name=$1 pattern=$2
  shift 2
  run "${launch[@]}" --data-path "$D/data" "${common[@]}" "$@" && fail "$name: a NaN must stop the run"
  grep -qE -- "$pattern" "$D/err" || fail "$name: expected /$pattern/ in: $(cat "$D/err")"
  echo "ok: $name: $(grep -m1 -oE -- "$pattern" "$D/err")"
}
# Each tensor alone: the dense gradients' exchange meets the NaN first. Fused
# (the default with a codec: one 1 MiB group, sent after the last layer's
# backward), the tables' row-sparse exchange may meet it first.
expect_error "dct unfused" "rank 1, step 3: the gradient of '[a-z0-9.]+' \(bucket '[a-z0-9.+]+'\) holds nan at [0-9]+ of [0-9]+" \
  --dp-codec dct:0.9,100 --fuse-bytes 0
expect_error "dct" "rank 1, step 3: the gradient of ('[a-z0-9.]+' \(bucket '[a-z0-9.+]+'\)|table [0-9]+ \(emb_grad\)) holds nan at [0-9]+ of [0-9]+" \
  --dp-codec dct:0.9,100
expect_error "table-wise q4/q2" "rank 1, step 3: the gradient of ('[a-z0-9.]+' \(bucket|table [0-9]+'s lookups)" \
  --dp-codec q4+ec --emb-placement table-wise --emb-codec-fwd q4 --emb-codec-bwd q2
expect_error "dct-mp" "step 3, stage 0, micro-batch 0: the activation matrix for stage 1 \(X_act\) holds nan" \
  --mp-splits bot:1 --mp-codec dct:0.5

# Skipped: as if the batch were not there. outcome: the last training loss and the test line's figures.
outcome() {
  grep -oE "^Finished training it [0-9/]+ of epoch 0, [0-9.]+ ms/it, loss [0-9.]+, accuracy [0-9.]+" "$D/out" |
    tail -1 | sed -E 's/.*ms\/it, //'
  grep -oE "^Testing at .* loss [0-9.]+, accuracy [0-9.]+ %, auc [0-9.]+" "$D/out" | tail -1 | sed -E 's/.*epoch 0, //'
}
for flags in "--dp-codec dct:0.9,4" "--dp-codec q4+ec --emb-placement table-wise --emb-codec-fwd q4 --emb-codec-bwd q2" \
             "--mp-splits bot:1 --mp-codec dct:0.5"; do
  run "${launch[@]}" --data-path "$D/data" "${common[@]}" $flags --non-finite skip || fail "skip $flags: $(cat "$D/err")"
  grep -q "^step 3 skipped: a rank's gradients hold NaN or inf (1 skipped so far)" "$D/out" &&
    grep -q "^skipped 1 of 20 steps" "$D/out" || fail "skip $flags: the skipped step must be reported: $(cat "$D/out")"
  skipped=$(outcome)
  run "${launch[@]}" --data-path "$D/without" "${common[@]}" $flags || fail "without the batch, $flags: $(cat "$D/err")"
  [ "$skipped" = "$(outcome)" ] || fail "skip $flags: '$skipped' against '$(outcome)' without the batch"
  echo "ok: skip $flags: $skipped, with and without the batch"
done
expect_error "skip is not built for the parameter server" "--non-finite skip is built for data parallelism and --mp-splits" \
  --dp-mode ps --servers 1 --non-finite skip
echo "non_finite: all checks passed"
