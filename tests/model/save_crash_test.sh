#!/usr/bin/env bash
# Checkpoints survive a failing save:
#  - SIGKILL at 10 random moments of `train --save-every 1` (a save is under
#    way most of the time): the checkpoint under --save loads every time;
#  - the same with incremental checkpoints: the newest point loads;
#  - a full disk (a tmpfs with room for one checkpoint, not two; needs root
#    to mount, skipped otherwise): train fails with a one-line error, the
#    previous checkpoint loads and no temporary file is left.
#   tests/model/save_crash_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
D=$(mktemp -d)
cleanup() { mountpoint -q "$D/full" && umount "$D/full"; rm -rf "$D"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$SPARQ" gen-data --out "$D/data" --num-samples 2000 --num-test 100 --seed 1 > /dev/null 2> "$D/err" ||
  fail "gen-data: $(cat "$D/err")"
# 26 tables of 5000 x 8 floats: about 4 MB a checkpoint, saved every step.
train=(train --data-path "$D/data" --arch-embedding-size 5000 --arch-sparse-feature-size 8 --arch-mlp-bot 13-8
       --arch-mlp-top 8-1 --mini-batch-size 32 --print-freq 1000000)
loads() { "$SPARQ" export --load "$1" --out "$D/x.npz" > /dev/null 2> "$D/err"; }

# kills DIR READY FLAGS...: 10 runs of train with FLAGS, each SIGKILLed at a
# random moment (0-1 s) once DIR/READY is written; after each the newest
# point in DIR must load. Counts in `torn` the kills that left a .tmp.
kills() {
  local dir=$1 ready=$2 trial pid newest
  shift 2
  torn=0
  for trial in $(seq 10); do
    rm -rf "$dir" && mkdir "$dir"
    "$SPARQ" "${train[@]}" --nepochs 1000 "$@" > /dev/null 2>&1 &
    pid=$!
    for _ in $(seq 600); do [ -s "$dir/$ready" ] && break; sleep 0.05; done
    [ -s "$dir/$ready" ] || { kill -9 $pid; fail "trial $trial: no $dir/$ready after 30 s"; }
    sleep "0.$((RANDOM % 1000))"
    kill -9 $pid
    wait $pid 2> /dev/null
    compgen -G "$dir/*.tmp" > /dev/null && torn=$((torn + 1))
    newest=$(find "$dir" -type f ! -name '*.tmp' -printf '%f\n' | sort -n | tail -1)
    loads "$dir/$newest" || fail "trial $trial: $dir/$newest does not load after a kill: $(cat "$D/err")"
  done
}

kills "$D/whole" ck --save "$D/whole/ck" --save-every 1
echo "ok: 10 kills, the checkpoint loaded every time ($torn killed with a save under way)"
# Incremental checkpoints, a point every step (a whole one every 20): the
# newest point on disk loads, through its chain of deltas.
kills "$D/inc" 2 --save "$D/inc/{step}" --save-every 1 --save-whole-every 20
echo "ok: 10 kills of incremental checkpoints, the newest point loaded every time ($torn killed with a write under way)"

mkdir "$D/full"
"$SPARQ" "${train[@]}" --num-batches 1 --nepochs 1 --save "$D/one" > /dev/null 2> "$D/err" || fail "save: $(cat "$D/err")"
size=$(stat -c %s "$D/one")
if ! mount -t tmpfs -o size=$((size * 3 / 2)) tmpfs "$D/full" 2> /dev/null; then
  echo "skip: full disk (cannot mount a tmpfs here: needs root)"
  exit 0
fi
"$SPARQ" "${train[@]}" --num-batches 5 --nepochs 1 --save "$D/full/ck" --save-every 1 > "$D/out" 2> "$D/full.err" &&
  fail "a save to a full disk must fail"
[ "$(wc -l < "$D/full.err")" -eq 1 ] && grep -q "No space left" "$D/full.err" ||
  fail "one line naming the cause: $(cat "$D/full.err")"
[ -e "$D/full/ck.tmp" ] && fail "the temporary file must be removed"
loads "$D/full/ck" || fail "the previous checkpoint must load after a full disk: $(cat "$D/err")"
echo "ok: full disk: $(cat "$D/full.err")"
