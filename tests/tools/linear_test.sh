#!/usr/bin/env bash
# `sparq linear` end to end on a small URL-like set: it learns (test accuracy
# near the teacher's), one rank per mpiexec process trains the same model bit
# for bit as in-process ranks, the sparse and dense exchanges give the same
# model on 2 ranks, --save/--load/predict round-trip, and bad input (files,
# flags) is a one-line error naming file:line.
#   tests/tools/linear_test.sh path/to/sparq [mpiexec]
set -uo pipefail
SPARQ=$1
MPIEXEC=${2:-}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$SPARQ" gen-data --format libsvm --like url --scale 0.002 --out "$D/u" > /dev/null || fail "gen-data"
train() { "$SPARQ" linear --data-path "$D/u/train.svm" --test-data-path "$D/u/test.svm" --bias --epochs 3 --tol 0 \
  --algo sgd --sgd-step "${STEP:-plain}" --mini-batch-size 50 --learning-rate 0.5 --l2 1e-5 "$@"; }

if [ -n "$MPIEXEC" ]; then
  # Open MPI's ranks read their shards and sum over the MPI transport: the
  # same model as the same ranks in-process.
  train --ranks 3 --save "$D/local.ck" > "$D/local.out" || fail "in-process: $(cat "$D/local.out")"
  "$MPIEXEC" -n 3 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$SPARQ" linear \
    --data-path "$D/u/train.svm" --test-data-path "$D/u/test.svm" --bias --epochs 3 --tol 0 --algo sgd \
    --sgd-step plain --mini-batch-size 50 --learning-rate 0.5 --l2 1e-5 --save "$D/mpi.ck" > "$D/mpi.out" 2>&1 ||
    fail "mpiexec: $(cat "$D/mpi.out")"
  grep -q "3 ranks (mpi)" "$D/mpi.out" || fail "runs on the MPI transport: $(head -3 "$D/mpi.out")"
  cmp -s "$D/local.ck" "$D/mpi.ck" || fail "mpiexec and in-process models differ"
  # Truncated Newton (the default) and coordinate descent under mpiexec: the
  # in-process models, bit for bit.
  for algo in newton scd; do
    "$SPARQ" linear --data-path "$D/u/train.svm" --algo $algo --epochs 2 --ranks 2 --save "$D/local_$algo.ck" \
      > /dev/null || fail "in-process $algo"
    "$MPIEXEC" -n 2 --oversubscribe --bind-to none "$SPARQ" linear --data-path "$D/u/train.svm" --algo $algo \
      --epochs 2 --save "$D/mpi_$algo.ck" > /dev/null 2>&1 || fail "mpiexec $algo"
    cmp -s "$D/mpi_$algo.ck" "$D/local_$algo.ck" || fail "$algo: mpiexec and in-process models differ"
  done
  echo "PASS (mpiexec)"
  exit 0
fi

train --save "$D/one.ck" > "$D/one.out" || fail "one rank: $(cat "$D/one.out")"
acc=$(grep "^epoch 3/3" "$D/one.out" | sed 's/.*test loss [0-9.]* accuracy \([0-9.]*\) %.*/\1/')
teacher=$(python3 -c "import json; print(100 * json.load(open('$D/u/teacher.json'))['teacher_test']['accuracy'])")
python3 -c "import sys; sys.exit(not (float('$acc') > float('$teacher') - 12))" || fail "learns: test accuracy $acc against the teacher's $teacher"

# 2 ranks: every sparse allreduce algorithm gives the dense exchange's model
# (one addition per sum), with either step.
for step in plain adagrad; do
  STEP=$step train --ranks 2 --exchange dense:ring --save "$D/dense.ck" > /dev/null || fail "dense"
  for x in ssar-recursive-double ssar-split-allgather dsar-split-allgather; do
    STEP=$step train --ranks 2 --exchange $x --save "$D/$x.ck" > "$D/$x.out" || fail "$x: $(cat "$D/$x.out")"
    grep -q "$x" "$D/$x.out" || fail "$x runs"
    cmp -s "$D/dense.ck" "$D/$x.ck" || fail "$step: $x and the dense exchange give different models"
  done
done
# The defaults: truncated Newton, l2 = 1/n, no bias, until converged; said
# at the start and the end. For it and coordinate descent, the sparse and
# dense sums give the same model on 2 ranks, and the objective never rises.
lin() { "$SPARQ" linear --data-path "$D/u/train.svm" --test-data-path "$D/u/test.svm" "$@"; }
lin --ranks 2 > "$D/default.out" || fail "defaults: $(cat "$D/default.out")"
grep -q "algo newton (truncated Newton" "$D/default.out" && grep -q "^newton: an epoch is one Newton step" "$D/default.out" ||
  fail "the default is truncated Newton: $(head -2 "$D/default.out")"
grep -q "(1/n, n = $(wc -l < "$D/u/train.svm"): liblinear's -c 1)" "$D/default.out" || fail "says its l2: $(head -1 "$D/default.out")"
grep -q "^converged after [0-9]* epochs" "$D/default.out" || fail "says it converged: $(tail -2 "$D/default.out")"
for algo in newton scd; do
  lin --algo $algo --ranks 2 --exchange dense --save "$D/$algo-dense.ck" > /dev/null || fail "$algo dense"
  lin --algo $algo --ranks 2 --save "$D/$algo.ck" > "$D/$algo.out" || fail "$algo: $(cat "$D/$algo.out")"
  cmp -s "$D/$algo.ck" "$D/$algo-dense.ck" || fail "$algo: sparse and dense sums give different models"
  python3 - "$D/$algo.out" <<'PY' || fail "$algo: the objective rose: $(cat "$D/$algo.out")"
import re, sys
f = [float(m) for m in re.findall(r"^epoch \d+/\d+: objective ([0-9.]+)", open(sys.argv[1]).read(), re.M)]
sys.exit(not (len(f) >= 2 and all(b <= a for a, b in zip(f, f[1:]))))
PY
done
grep -q "^scd: blocks of [0-9]* of the" "$D/scd.out" || fail "scd says its block: $(head -2 "$D/scd.out")"
# A tolerance the epochs cannot meet is said so, not claimed.
lin --epochs 1 --tol 1e-9 > "$D/short.out" || fail "short"
grep -q "^not converged: after 1 epochs" "$D/short.out" || fail "says it did not converge: $(tail -2 "$D/short.out")"

# predict scores the saved model as the last epoch's test did; --load resumes from it.
"$SPARQ" predict --load "$D/one.ck" --data-path "$D/u/test.svm" --out "$D/p.txt" > "$D/p.out" || fail "predict: $(cat "$D/p.out")"
[ "$(wc -l < "$D/p.txt")" -eq "$(wc -l < "$D/u/test.svm")" ] || fail "a score a test row"
grep -q "accuracy $acc %" "$D/p.out" || fail "predict's accuracy equals training's last test: $(cat "$D/p.out") vs $acc"
"$SPARQ" linear --data-path "$D/u/train.svm" --test-data-path "$D/u/test.svm" --bias --load "$D/one.ck" --algo sgd --epochs 1 \
  --learning-rate 1e-9 > "$D/load.out" || fail "--load: $(cat "$D/load.out")"
grep -q "accuracy $acc %" "$D/load.out" || fail "--load starts from the saved model: $(cat "$D/load.out")"

# Bad input: one line naming the file and line, non-zero exit.
bad() {  # EXPECT: text the error must contain
  "$SPARQ" linear "$@" > "$D/out" 2> "$D/err" && fail "must fail: $*"
  [ "$(wc -l < "$D/err")" -eq 1 ] || fail "one-line error for $*: $(cat "$D/err")"
  grep -q -- "$EXPECT" "$D/err" || fail "error for $* names '$EXPECT': $(cat "$D/err")"
}
printf '+1 1:1 3:2\n-1 2:1\n+1 3:1 2:1\n' > "$D/unsorted.svm"
EXPECT="unsorted.svm:3:" bad --data-path "$D/unsorted.svm"
printf '+1 1:1\n-1 0:1\n' > "$D/zero.svm"
EXPECT="zero.svm:2:" bad --data-path "$D/zero.svm"
printf '+1 1:1\n2 2:1\n' > "$D/label.svm"
EXPECT="label.svm:2:" bad --data-path "$D/label.svm"
printf '+1 1:1\n-1 9:1\n' > "$D/beyond.svm"
EXPECT="beyond.svm:2:" bad --data-path "$D/beyond.svm" --num-features 5
printf '+1 1:1\n-1 2:x\n' > "$D/value.svm"
EXPECT="value.svm:2:" bad --data-path "$D/value.svm"
printf '1 1:1\n0 2:1\n-1 3:1\n' > "$D/mixed.svm"
EXPECT="mixed.svm" bad --data-path "$D/mixed.svm"
"$SPARQ" linear --data-path "$D/zero.svm" --skip-bad-lines > "$D/skip.out" 2>&1 ||
  fail "--skip-bad-lines trains: $(cat "$D/skip.out")"
grep -q "skipped 1 bad lines" "$D/skip.out" || fail "counts skipped lines: $(cat "$D/skip.out")"
EXPECT="cannot open" bad --data-path "$D/missing.svm"
EXPECT="--loss" bad --data-path "$D/u/train.svm" --loss squared
EXPECT="--algo scd" bad --data-path "$D/u/train.svm" --algo scd --loss hinge
EXPECT="--exchange" bad --data-path "$D/u/train.svm" --exchange sparse
EXPECT="--learning-rate is sgd's" bad --data-path "$D/u/train.svm" --learning-rate 0.1
EXPECT="--mini-batch-size is sgd's" bad --data-path "$D/u/train.svm" --algo scd --mini-batch-size 10
EXPECT="--coords is scd's" bad --data-path "$D/u/train.svm" --coords 10
EXPECT="--threads is sgd's" bad --data-path "$D/u/train.svm" --threads 2
EXPECT="--num-batches" bad --data-path "$D/u/train.svm" --num-batches 3
EXPECT="--algo newton minimises the logistic loss" bad --data-path "$D/u/train.svm" --algo newton --loss hinge
EXPECT="--exchange owner-alltoall is newton's" bad --data-path "$D/u/train.svm" --algo scd --exchange owner-alltoall
EXPECT="--coords is scd's" bad --data-path "$D/u/train.svm" --algo sgd --coords 10
EXPECT="--learning-rate" bad --data-path "$D/u/train.svm" --algo sgd --learning-rate 0
EXPECT="--sgd-step" bad --data-path "$D/u/train.svm" --algo sgd --sgd-step adam
EXPECT="--tol" bad --data-path "$D/u/train.svm" --tol -1
EXPECT="--data-path" bad --epochs 1
EXPECT="not a sparq checkpoint" bad --data-path "$D/u/train.svm" --load "$D/u/teacher.json"
EXPECT="weights" bad --data-path "$D/u/train.svm" --load "$D/one.ck"  # no --bias: one weight fewer
echo PASS
