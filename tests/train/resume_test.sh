#!/usr/bin/env bash
# A run resumed from a mid-epoch checkpoint (--save-every) equals the
# uninterrupted run bit for bit in every plan, codec state included (error
# feedback, DCT thresholds and their schedule, sparse allreduce plans,
# topk-grad residuals): the final checkpoints are compared byte for byte.
#   tests/train/resume_test.sh path/to/sparq [mpiexec]
# With mpiexec, the distributed plans also run one rank per process.
set -uo pipefail
SPARQ=$1
MPIEXEC=${2:-}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$@" > "$D/out" 2> "$D/err"; }

run "$SPARQ" gen-data --out "$D/data" --num-samples 2600 --num-test 500 --seed 3 || fail "gen-data: $(cat "$D/err")"
common=(--data-path "$D/data" --arch-embedding-size 500 --arch-sparse-feature-size 8 --arch-mlp-bot 13-16-8 --arch-mlp-top 16-1
        --mini-batch-size 64 --num-batches 20 --nepochs 2 --print-freq 20 --verify-freq 1)

# resume NAME LAUNCH... -- FLAGS...: the whole run saves every 13 steps (mid
# epoch: 20 batches each) and at step 40; a run resumed from step 13 must
# end with the same bytes.
resume() {
  local name=$1 launch=()
  shift
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  shift
  run "${launch[@]}" "$SPARQ" train "${common[@]}" "$@" --save "$D/$name.{step}" --save-every 13 ||
    fail "$name: $(cat "$D/err")"
  grep -q "^saved $D/$name.13 at step 13" "$D/out" && [ -s "$D/$name.39" ] && [ -s "$D/$name.40" ] ||
    fail "$name: checkpoints at steps 13, 26, 39 and 40: $(cat "$D/out")"
  run "${launch[@]}" "$SPARQ" train "${common[@]}" "$@" --load "$D/$name.13" --save "$D/$name.resumed" ||
    fail "$name resumed: $(cat "$D/err")"
  grep -q "^loaded $D/$name.13 at step 13 (epoch 0, it 13)" "$D/out" || fail "$name: loaded line: $(cat "$D/out")"
  grep -q "restart from zero" "$D/out" && fail "$name: the codec state must be restored: $(cat "$D/out")"
  cmp -s "$D/$name.40" "$D/$name.resumed" || fail "$name: the resumed run must equal the uninterrupted one bitwise"
  echo "ok: $name"
}

in_process() {
  resume single -- --dp-codec none
  resume dp_dct -- --ranks 2 --dp-codec dct:0.9,7
  resume dp_q4ec -- --ranks 3 --dp-codec q4+ec
  resume dp_topk -- --ranks 2 --dp-codec topk:8/64 --fuse-bytes 1KiB
  resume tablewise -- --ranks 2 --emb-placement table-wise --emb-codec-fwd q4 --emb-codec-bwd q2 --dp-codec dct:0.9,7
  resume stream -- --ranks 2 --stream --shuffle-buffer 300 --dp-codec dct:0.9,7
  resume adagrad -- --ranks 2 --embedding-optimizer rowwise-adagrad --dp-codec dct:0.9,7
  resume mp -- --ranks 2 --mp-splits bot:1 --micro-batches 2 --mp-codec topk-grad:0.8
  resume hybrid -- --ranks 4 --mp-splits bot:1 --micro-batches 2 --mp-codec dct:0.9 --dp-codec dct:0.9,7
  # Replicas 1 and 2 hold only the tables they own.
  resume hybrid_tablewise -- --ranks 6 --mp-splits bot:1 --micro-batches 2 --emb-placement table-wise --dp-codec dct:0.9,7
  # One worker and one server: the server applies pushes in step order, so
  # the run is deterministic (with more workers, arrival order decides the
  # order of the server's updates).
  resume ps -- --ranks 2 --dp-mode ps --dp-codec dct:0.9,7

  incremental

  # The checkpoint holds each rank's residuals: a DCT run's is larger than
  # a plain one's by at least the dense gradient of both ranks.
  local dense
  dense=$(grep -o "([0-9]* dense parameters" "$D/out" | grep -o "[0-9]*")
  [ "$(stat -c %s "$D/dp_dct.40")" -gt $(( $(stat -c %s "$D/single.40") + 2 * 4 * dense )) ] ||
    fail "the DCT checkpoint must hold both ranks' residuals"
  # Two workers resume with their codec state (not bitwise: arrival order).
  local ps2=("${common[@]}" --ranks 3 --dp-mode ps --max-staleness 1 --dp-codec dct:0.9,7)
  run "$SPARQ" train "${ps2[@]}" --save-every 10 --save "$D/ps2.{step}" || fail "ps2: $(cat "$D/err")"
  run "$SPARQ" train "${ps2[@]}" --load "$D/ps2.10" || fail "ps2 resumed: $(cat "$D/err")"
  grep -q "^Finished training it 20/20 of epoch 1" "$D/out" && ! grep -q "restart from zero" "$D/out" ||
    fail "ps2 resumed to the end: $(cat "$D/out")"
  # Another number of ranks cannot continue per-rank residuals: said, not silent.
  run "$SPARQ" train "${common[@]}" --ranks 3 --dp-codec dct:0.9,7 --load "$D/dp_dct.13" || fail "3 ranks from 2"
  grep -q "^note: '$D/dp_dct.13' holds the codec state of 2 ranks, this run has 3: error feedback and thresholds restart from zero" \
    "$D/out" || fail "rank-count note: $(cat "$D/out")"
  # On fewer ranks the data-parallel codec state folds (error feedback is a sum).
  run "$SPARQ" train "${common[@]}" --ranks 2 --dp-codec q4+ec --load "$D/dp_q4ec.13" || fail "2 ranks from 3"
  grep -q "^note: '$D/dp_q4ec.13' holds the codec state of 3 ranks, this run has 2: rank r's error feedback is the sum of saved ranks r, r + 2, \.\.\.$" \
    "$D/out" || fail "fold note: $(cat "$D/out")"
  # So does a hybrid run's on fewer replicas of as many stages (3 x 2 onto 2 x 2).
  run "$SPARQ" train "${common[@]}" --ranks 4 --mp-splits bot:1 --micro-batches 2 --emb-placement table-wise \
    --dp-codec dct:0.9,7 --load "$D/hybrid_tablewise.13" || fail "4 ranks from 6: $(cat "$D/err")"
  grep -q "^note: '$D/hybrid_tablewise.13' holds the codec state of 6 ranks, this run has 4: replica r's error feedback is the sum of saved replicas r, r + 2, \.\.\. of its stage; its thresholds, saved replica r's$" \
    "$D/out" || fail "hybrid fold note: $(cat "$D/out")"
  # State saved by another plan or codec is refused in one line.
  run "$SPARQ" train "${common[@]}" --ranks 2 --dp-codec q4+ec --load "$D/dp_dct.13" && fail "codec mismatch must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "codec 'dct:0.9,7' loaded into codec 'q4+ec'" "$D/err" ||
    fail "codec mismatch error: $(cat "$D/err")"
  run "$SPARQ" train "${common[@]}" --ranks 2 --mp-splits bot:1 --load "$D/dp_dct.13" && fail "plan mismatch must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "not a model-parallel state" "$D/err" || fail "plan mismatch: $(cat "$D/err")"
  run "$SPARQ" train "${common[@]}" --save-every 5 && fail "--save-every without --save must fail"
  grep -q "needs --save" "$D/err" || fail "save-every error: $(cat "$D/err")"
  # A truncated checkpoint is an error naming it, and no checkpoint is left half-written.
  head -c 3000 "$D/dp_dct.13" > "$D/cut.ck"
  run "$SPARQ" train "${common[@]}" --ranks 2 --dp-codec dct:0.9,7 --load "$D/cut.ck" && fail "truncated must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "cut.ck': checksum mismatch" "$D/err" || fail "truncated: $(cat "$D/err")"
  ls "$D"/*.tmp 2> /dev/null && fail "temporary checkpoint files left behind"
}

# Incremental checkpoints (the flags of the adagrad run): whole at 13 (the
# first) and 26, deltas at 39 and 40. Resumed from the delta at 39, the run
# ends with the bytes of the uninterrupted one; a gap in the chain and the
# plans it is not built for are one-line errors.
incremental() {
  local inc=("${common[@]}" --ranks 2 --embedding-optimizer rowwise-adagrad --dp-codec dct:0.9,7)
  run "$SPARQ" train "${inc[@]}" --save "$D/inc.{step}" --save-every 13 --save-whole-every 26 ||
    fail "incremental: $(cat "$D/err")"
  grep -q "^saving $D/inc.39 at step 39: a delta of $D/inc.26 (" "$D/out" &&
    grep -q "^saving $D/inc.26 at step 26 (" "$D/out" || fail "incremental saves: $(cat "$D/out")"
  [ "$(stat -c %s "$D/inc.39")" -lt "$(stat -c %s "$D/inc.26")" ] || fail "a delta must be smaller than a whole checkpoint"
  run "$SPARQ" train "${inc[@]}" --load "$D/inc.39" --save "$D/inc.resumed" || fail "from a delta: $(cat "$D/err")"
  grep -q "restart from zero" "$D/out" && fail "incremental: the codec state must be restored: $(cat "$D/out")"
  cmp -s "$D/adagrad.40" "$D/inc.resumed" || fail "resumed from a delta, the run must equal the uninterrupted one bitwise"
  mv "$D/inc.26" "$D/inc.moved"
  run "$SPARQ" train "${inc[@]}" --load "$D/inc.39" && fail "a broken chain must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "'$D/inc.39' follows '$D/inc.26', which is missing" "$D/err" ||
    fail "broken chain: $(cat "$D/err")"
  run "$SPARQ" train "${inc[@]}" --save "$D/i.{step}" --save-every 13 --save-whole-every 20 && fail "20 is not 13k"
  grep -q "needs --save-every K dividing N" "$D/err" || fail "--save-whole-every 20: $(cat "$D/err")"
  run "$SPARQ" train "${common[@]}" --ranks 2 --emb-placement table-wise --save "$D/i.{step}" --save-every 13 \
    --save-whole-every 26 && fail "table-wise deltas are not built"
  grep -q "built for data-parallel runs with replicated tables" "$D/err" || fail "table-wise: $(cat "$D/err")"
  echo "ok: incremental"
}

under_mpiexec() {
  local mpi=("$MPIEXEC" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
  resume mpi_dp "${mpi[@]}" -n 2 -- --dp-codec dct:0.9,7
  resume mpi_hybrid "${mpi[@]}" -n 4 -- --mp-splits bot:1 --micro-batches 2 --dp-codec q4+ec
  resume mpi_hybrid_tablewise "${mpi[@]}" -n 4 -- --mp-splits bot:1 --micro-batches 2 --emb-placement table-wise \
    --emb-codec-fwd q4 --dp-codec q4+ec
  resume mpi_ps "${mpi[@]}" -n 2 -- --dp-mode ps --dp-codec dct:0.9,7
}

if [ -n "$MPIEXEC" ]; then under_mpiexec; else in_process; fi
echo "resume_test: all passed"
