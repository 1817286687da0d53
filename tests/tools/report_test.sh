#!/usr/bin/env bash
# `sparq train --metrics` config lines and `sparq report`.
#   tests/tools/report_test.sh path/to/sparq input   config line; bad report input (no matplotlib needed)
#   tests/tools/report_test.sh path/to/sparq plots   two runs with different codecs -> valid PNGs
set -uo pipefail
SPARQ=$1
MODE=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$SPARQ" "$@" > "$D/out" 2> "$D/err"; }
tiny=(--data-generation synthetic --data-size 2000 --num-test 500 --arch-embedding-size 100 --arch-mlp-bot 13-16
      --arch-mlp-top 8-1 --mini-batch-size 64 --print-freq 5 --test-freq 10 --num-batches 30 --ranks 2)

# A bad input fails with exit code 1 and one line naming it ($2: what the line says).
bad() {
  local what=$1 want=$2; shift 2
  run report --out "$D/png" "$@"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$what: exit code $rc, not 1: $(cat "$D/err")"
  [ "$(wc -l < "$D/err")" -eq 1 ] || fail "$what: not one line: $(cat "$D/err")"
  grep -qF -- "$want" "$D/err" || fail "$what: '$want' not in: $(cat "$D/err")"
}

if [ "$MODE" = input ]; then
  run train "${tiny[@]}" --dp-codec q4+ec --metrics "$D/m.jsonl" || fail "train: $(cat "$D/err")"
  grep -q "^Testing at - 10/30 of epoch 0, .*, best auc .*, ne [0-9.]*$" "$D/out" || fail "NE on the testing line"
  /usr/bin/python3 - "$D/m.jsonl" "$SPARQ" <<'PY' || fail "config line"
import json, re, subprocess, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
c = lines[0]
assert c["event"] == "config", c
assert c["ranks"] == 2 and c["transport"] == "local", c
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", c["start_time"]), c["start_time"]
# What made the run: the build's commit ('+': with changes), the GEMM and
# MPI libraries, the CPU.
assert re.fullmatch(r"[0-9a-f]{7,}\+?|unknown", c["build"]["commit"]), c["build"]
assert c["build"]["gemm"].startswith("gemm: ") and c["build"]["mpi"] not in ("", "unknown"), c["build"]
cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
assert c["machine"]["cpu"] == cpu and c["machine"]["cores"] >= 1, c["machine"]
assert c["flags"]["dp-codec"] == "q4+ec" and c["flags"]["num-batches"] == 30, c["flags"]
# Every flag of `sparq train` is in the config line, and nothing else.
help_text = subprocess.run([sys.argv[2], "train", "--help"], capture_output=True, text=True).stdout
flags = set(re.findall(r"^\s+(?:-\w, )?--([a-z][a-z-]*)", help_text, re.M)) - {"help"}
assert flags == set(c["flags"]), (flags ^ set(c["flags"]))
assert all(t["event"] != "config" for t in lines[1:])
tests = [t for t in lines if t["event"] == "test"]
assert tests and all(0 < t["positive_rate"] < 1 and t["ne"] > 0 for t in tests), tests
PY
  bad "missing file" "$D/nope.jsonl" "$D/m.jsonl" "$D/nope.jsonl"
  tail -n +2 "$D/m.jsonl" > "$D/noconfig.jsonl"
  bad "no config line" "$D/noconfig.jsonl:1:" "$D/noconfig.jsonl"
  { head -3 "$D/m.jsonl"; echo '{"event":"train","step":'; tail -n +4 "$D/m.jsonl"; } > "$D/broken.jsonl"
  bad "malformed line" "$D/broken.jsonl:4: malformed JSON line" "$D/m.jsonl" "$D/broken.jsonl"
  : > "$D/empty.jsonl"
  bad "empty file" "$D/empty.jsonl:1:" "$D/empty.jsonl"
  [ -e "$D/png" ] && fail "bad input must write nothing"
  exit 0
fi

for codec in none q4+ec; do
  run train "${tiny[@]}" --dp-codec "$codec" --metrics "$D/$codec.jsonl" || fail "train $codec: $(cat "$D/err")"
done
run report --out "$D/png" "$D/none.jsonl" "$D/q4+ec.jsonl" || fail "report: $(cat "$D/err")"
for f in test_loss auc ne train_loss traffic; do
  p="$D/png/$f.png"
  [ -s "$p" ] || fail "$f.png missing or empty: $(cat "$D/out" "$D/err")"
  [ "$(head -c 8 "$p" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$f.png is not a PNG"
  grep -q "^wrote $p$" "$D/out" || fail "report names $p"
done
[ -z "$(ls -A "$D/png" | grep -v '\.png$')" ] || fail "temporary files left: $(ls -A "$D/png")"
exit 0
