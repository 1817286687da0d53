#!/usr/bin/env bash
# End-to-end checks of `sparq gen-data --format libsvm` (small scale): the
# files, their line counts and format, the same bytes for any thread count,
# --gzip, and one-line errors for bad flag combinations.
#   tests/data/libsvm_gen_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$SPARQ" "$@" > "$D/out" 2> "$D/err"; }

# URL at scale 0.001: 2396 train samples, a tenth of that as test samples.
run gen-data --format libsvm --like url --scale 0.001 --out "$D/u" || fail "gen-data: $(cat "$D/err")"
for f in train.svm test.svm teacher.json; do [ -s "$D/u/$f" ] || fail "$f written"; done
[ "$(wc -l < "$D/u/train.svm")" -eq 2396 ] || fail "train lines: $(wc -l < "$D/u/train.svm")"
[ "$(wc -l < "$D/u/test.svm")" -eq 239 ] || fail "test lines: $(wc -l < "$D/u/test.svm")"
grep -q "teacher test loss" "$D/out" || fail "prints the teacher's score"
grep -q '"like": "url"' "$D/u/teacher.json" || fail "teacher.json names the shape"
grep -q '"teacher_test"' "$D/u/teacher.json" || fail "teacher.json has the teacher's test scores"
# Every line: a label +1/-1, then id:value pairs with 1-based ids.
grep -qvE '^[+-]1( [1-9][0-9]*:[0-9.e-]+)+$' "$D/u/train.svm" && fail "malformed line: $(grep -vE '^[+-]1( [1-9][0-9]*:[0-9.e-]+)+$' "$D/u/train.svm" | head -c 200)"
awk '{ for (i = 3; i <= NF; ++i) { split($(i-1), a, ":"); split($i, b, ":"); if (a[1] + 0 >= b[1] + 0) exit 1 } }' \
  "$D/u/train.svm" || fail "ids strictly increasing"

# Explicit counts, one thread, gzip: the same rows as above.
run gen-data --format libsvm --like url --scale 0.001 --num-samples 500 --num-test 50 --threads 1 --gzip \
  --out "$D/g" || fail "gzip: $(cat "$D/err")"
[ "$(zcat "$D/g/train.svm.gz" | wc -l)" -eq 500 ] || fail "500 gzipped lines"
cmp -s <(zcat "$D/g/train.svm.gz") <(head -n 500 "$D/u/train.svm") || fail "any thread count, same rows"
cmp -s <(zcat "$D/g/test.svm.gz") <(head -n 50 "$D/u/test.svm") || fail "test rows do not depend on the counts"

run gen-data --format libsvm --like webspam --scale 0.0001 --out "$D/w" || fail "webspam: $(cat "$D/err")"
[ "$(wc -l < "$D/w/train.svm")" -eq 35 ] || fail "webspam train lines"

# Bad combinations: a one-line error and a non-zero exit.
bad() {
  run "$@" --out "$D/bad" && fail "must fail: $*"
  [ "$(wc -l < "$D/err")" -eq 1 ] || fail "one-line error for $*: $(cat "$D/err")"
  grep -q -- "$EXPECT" "$D/err" || fail "error for $* names '$EXPECT': $(cat "$D/err")"
}
EXPECT="--like" bad gen-data --format libsvm
EXPECT="rcv1" bad gen-data --format libsvm --like rcv1
EXPECT="scale" bad gen-data --format libsvm --like url --scale 2
EXPECT="--days" bad gen-data --format libsvm --like url --days 3
EXPECT="--cardinalities" bad gen-data --format libsvm --like url --cardinalities 10
EXPECT="--like" bad gen-data --format tsv --like url
EXPECT="--scale" bad gen-data --scale 0.5
echo OK
