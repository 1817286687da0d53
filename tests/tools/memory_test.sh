#!/usr/bin/env bash
# Sizes that cannot fit fail before anything is allocated, with one line that
# says how much is needed and how much is available: tables too large, the
# tables of 64 in-process replicas, a huge mini-batch.
#   tests/tools/memory_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$SPARQ" gen-data --out "$D/data" --num-samples 200 --num-test 10 > /dev/null 2> "$D/err" || fail "gen-data: $(cat "$D/err")"
too_big() {  # WHAT FLAGS...: must fail at once, naming WHAT
  local what=$1
  shift
  timeout 20 "$SPARQ" train --data-path "$D/data" "$@" > /dev/null 2> "$D/err" && fail "$*: must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -Eq "needs [0-9.]+ GiB for $what, [0-9.]+ GiB available" "$D/err" ||
    fail "$*: $(cat "$D/err")"
  echo "ok: $(cat "$D/err")"
}
too_big "the embedding tables" --arch-embedding-size 4000000000
too_big "the embedding tables" --arch-embedding-size 4000000 --ranks 64
too_big "the embedding tables and a mini-batch of 1000000000" --mini-batch-size 1000000000
