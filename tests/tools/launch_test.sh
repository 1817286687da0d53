#!/usr/bin/env bash
# `sparq launch` against a stand-in for mpiexec: a job that loses a host
# restarts on the hosts that answer, from the newest checkpoint, and ends
# with exactly the model of a run on those hosts resumed from that
# checkpoint; a failure with every host answering is not restarted; bad
# input gets one-line errors. (On real hosts: scripts/restart-trials.)
#   tests/tools/launch_test.sh path/to/sparq
set -uo pipefail
SPARQ=$(realpath "$1")
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The stand-in: `--host H -np 1 true` probes host H (one listed in $D/dead
# never answers); `--hostfile F -np N BIN ARGS` runs BIN ARGS as N in-process
# ranks. With LOSE_AT=S the first launch loses host h3 once the checkpoint of
# step S is written: the job is killed, h3 stops answering, the launch fails.
cat > "$D/mpiexec" <<'SH'
#!/usr/bin/env bash
D=$(dirname "$0")
if [[ $1 == --host ]]; then
  grep -qx "$2" "$D/dead" 2> /dev/null && exec sleep 600
  exit 0
fi
[[ $1 == --hostfile && $3 == -np ]] || { echo "mpiexec stand-in: unexpected $*" >&2; exit 2; }
np=$4
shift 4
echo "$np" >> "$D/launches"
if [[ -n ${LOSE_AT:-} && ! -e $D/lost ]]; then
  touch "$D/lost"
  "$@" --ranks "$np" > /dev/null &
  job=$!
  until [[ -e $D/ck_$LOSE_AT ]] || ! kill -0 $job 2> /dev/null; do sleep 0.005; done
  kill -9 $job
  [[ -n ${BREAK:-} ]] && rm -f "$BREAK"  # a link of the newest delta's chain lost with the host
  echo h3 >> "$D/dead"
  exit 1
fi
exec "$@" --ranks "$np"
SH
chmod +x "$D/mpiexec"
printf 'h0 slots=1\nh1 slots=1  # a comment\n\nh2\nh3 slots=1\n' > "$D/hosts"

"$SPARQ" gen-data --out "$D/data" --num-samples 100000 --num-test 2000 --cardinalities 2000 > /dev/null 2> "$D/err" ||
  fail "gen-data: $(cat "$D/err")"
# Steps of a few ms, so that the loss lands mid-run.
BASE=(train --data-path "$D/data" --arch-embedding-size 2000 --arch-mlp-bot 13-256-64-16 --arch-mlp-top 256-64-1
      --mini-batch-size 1000 --num-batches 100 --print-freq 20 --test-freq -1 --threads 1)
TRAIN=("${BASE[@]}" --dp-codec dct:0.9,7)
LAUNCH=(launch --hosts "$D/hosts" --mpiexec "$D/mpiexec" --probe-timeout 2)

# A host lost after step 40's checkpoint: restarted on 3 hosts from the newest checkpoint.
LOSE_AT=40 "$SPARQ" "${LAUNCH[@]}" --restarts 2 -- "${TRAIN[@]}" --save-every 20 --save "$D/ck_{step}" \
  > "$D/out" 2> "$D/err" || fail "launch with a lost host: $(cat "$D/err")"
[[ $(tr '\n' ' ' < "$D/launches") == "4 3 " ]] || fail "launches on $(cat "$D/launches") hosts, not 4 then 3"
line=$(grep "launch 1 failed" "$D/err") || fail "no restart said: $(cat "$D/err")"
[[ $line =~ lost\ h3\;\ restarting\ on\ h0\ h1\ h2\ \(3\ host\(s\),\ 3\ ranks\)\ from\ \'([^\']+)\'\ \(step\ ([0-9]+)\) ]] ||
  fail "restart line: $line"
from=${BASH_REMATCH[1]} step=${BASH_REMATCH[2]}
((step >= 40 && step < 100)) || fail "restarted from step $step: not between the loss's checkpoint and the end"
grep -q "finished on 3 host(s) after 1 restart(s)" "$D/err" || fail "end: $(cat "$D/err")"
[[ -f $D/ck_100 ]] || fail "no final checkpoint: $(ls "$D")"
# The same 3 hosts resuming from the same checkpoint, uninterrupted: the same model, bit for bit.
"$SPARQ" "${TRAIN[@]}" --ranks 3 --load "$from" --save "$D/ref" > /dev/null 2> "$D/err" || fail "reference: $(cat "$D/err")"
cmp -s "$D/ck_100" "$D/ref" || fail "the restarted job's model differs from a 3-host run resumed from step $step"
echo "ok: lost h3 after step 40, restarted on 3 hosts from step $step, the same model as a 3-host resume"

# Incremental checkpoints (whole at 20, then deltas of it) and a host lost after step 40 with the
# whole point: every delta's chain is broken, so the restart skips them, saying so, and starts where
# the job began; it ends with the model of a 3-host run from the start.
rm -f "$D/launches" "$D/lost" "$D/dead" "$D"/ck_*
LOSE_AT=40 BREAK=$D/ck_20 "$SPARQ" "${LAUNCH[@]}" --restarts 2 -- "${TRAIN[@]}" --save-every 20 \
  --save-whole-every 200 --save "$D/ck_{step}" > "$D/out" 2> "$D/err" || fail "incremental launch: $(cat "$D/err")"
grep -q "sparq launch: skipping '$D/ck_40': '$D/ck_40' follows '$D/ck_20', which is missing" "$D/err" &&
  grep -q "from where it began (no checkpoint yet)" "$D/err" || fail "broken chain at restart: $(cat "$D/err")"
"$SPARQ" "${TRAIN[@]}" --ranks 3 --save "$D/ref" > /dev/null 2> "$D/err" || fail "incremental reference: $(cat "$D/err")"
"$SPARQ" export --load "$D/ck_100" --out "$D/got.npz" > /dev/null && "$SPARQ" export --load "$D/ref" --out "$D/want.npz" \
  > /dev/null && cmp -s "$D/got.npz" "$D/want.npz" || fail "incremental: the restarted job's model differs"
echo "ok: broken delta chains skipped at the restart, restarted from the start, the same model as a 3-host run"

# Two model-parallel stages: 3 hosts left run 2 ranks, the most that are a multiple of the stages
# (one replica: no --dp-codec, which acts between replicas).
rm -f "$D/launches" "$D/lost" "$D/dead" "$D"/ck_*
MP=(--mp-splits bot:1 --micro-batches 2)
LOSE_AT=40 "$SPARQ" "${LAUNCH[@]}" --restarts 2 -- "${BASE[@]}" "${MP[@]}" --save-every 20 --save "$D/ck_{step}" \
  > "$D/out" 2> "$D/err" || fail "launch of 2 stages with a lost host: $(cat "$D/err")"
[[ $(tr '\n' ' ' < "$D/launches") == "4 2 " ]] || fail "2 stages: launches on $(cat "$D/launches") ranks, not 4 then 2"
from=$(sed -n "s/.*(3 host(s), 2 ranks) from '\([^']*\)'.*/\1/p" "$D/err")
[[ -n $from ]] || fail "2 stages: restart line: $(cat "$D/err")"
"$SPARQ" "${BASE[@]}" "${MP[@]}" --ranks 2 --load "$from" --save "$D/ref" > /dev/null 2> "$D/err" ||
  fail "2-stage reference: $(cat "$D/err")"
cmp -s "$D/ck_100" "$D/ref" || fail "2 stages: the restarted job's model differs from a 2-rank resume"
echo "ok: 2 stages, 3 hosts left: restarted on 2 ranks, the same model as a 2-rank resume"

# A restart the job refuses (one replica left, and --dp-codec acts between replicas) fails once, not
# again and again: no further host was lost.
rm -f "$D/launches" "$D/lost" "$D/dead" "$D"/ck_*
LOSE_AT=40 "$SPARQ" "${LAUNCH[@]}" --restarts 3 -- "${TRAIN[@]}" "${MP[@]}" --save-every 20 --save "$D/ck_{step}" \
  > /dev/null 2> "$D/err" && fail "a refused restart was not an error"
grep -q "launch 2 failed (exit 1) after .* s with no host lost since launch 1: not restarted" "$D/err" ||
  fail "refused restart: $(cat "$D/err")"
[[ $(tr '\n' ' ' < "$D/launches") == "4 2 " ]] || fail "refused restart: launches $(cat "$D/launches")"

# A failure with every host answering (a bad flag fails the same way again): not restarted.
rm -f "$D/launches" "$D/lost" "$D/dead"
"$SPARQ" "${LAUNCH[@]}" --restarts 2 -- "${TRAIN[@]}" --save-every 20 --save "$D/x" --optimizer nope > /dev/null \
  2> "$D/err" && fail "a bad flag was not an error"
grep -q "every host answering: not a lost host, not restarted" "$D/err" || fail "bad flag: $(cat "$D/err")"
[[ $(wc -l < "$D/launches") == 1 ]] || fail "a failure with every host answering was launched again"

# Bad input: one line each, nothing launched.
# bad EXPECTED ARGS...: fails with EXPECTED in its one line of error, launching nothing
bad() {
  local want=$1
  shift
  rm -f "$D/launches"
  "$SPARQ" "$@" > /dev/null 2> "$D/err" && fail "$* was accepted"
  [[ $(wc -l < "$D/err") == 1 ]] || fail "$*: more than one line: $(cat "$D/err")"
  grep -qF -- "$want" "$D/err" || fail "$*: said $(cat "$D/err"), not '$want'"
  [[ ! -e $D/launches ]] || fail "$*: launched anyway"
}
: > "$D/empty"
printf 'h0 slots=two\n' > "$D/badslots"
bad "cannot open" launch --hosts "$D/none" -- "${TRAIN[@]}"
bad "no host in it" launch --hosts "$D/empty" -- "${TRAIN[@]}"
bad "badslots:1: 'slots=two' is not slots=N" launch --hosts "$D/badslots" -- "${TRAIN[@]}"
bad "--restarts needs train's --save PATH and --save-every N" "${LAUNCH[@]}" --restarts 1 -- "${TRAIN[@]}"
bad "launch supervises \`train\`" "${LAUNCH[@]}" -- predict --load x
bad "--restarts must be >= 0" "${LAUNCH[@]}" --restarts -1 -- "${TRAIN[@]}"
# Every host gone: said, not retried forever.
printf 'h0\nh1\nh2\nh3\n' > "$D/dead"
rm -f "$D/lost"
"$SPARQ" "${LAUNCH[@]}" --restarts 2 -- "${TRAIN[@]}" --save-every 20 --save "$D/y" --optimizer nope > /dev/null \
  2> "$D/err" && fail "no host answering was not an error"
grep -q "none of the hosts of '$D/hosts' answer" "$D/err" || fail "no host: $(cat "$D/err")"
echo "ok: bad input refused"
