#!/usr/bin/env bash
# `sparq plan --measure` under mpiexec: the hosts time sparq's collectives
# together, rank 0 fits the network to them (the times it prints, the fit's
# spec in --net's syntax) and plans for it; the plan file names that network
# and `sparq train --plan` trains with it. With --trial the hosts train the
# clock's leaders (then the fastest at its other fusion sizes) and the plan
# is the fastest they measured. A host count
# that is not mpiexec's, and --net alone under mpiexec, are one-line errors.
#   tests/tools/plan_measure_test.sh path/to/sparq mpiexec
set -uo pipefail
SPARQ=$1
MPIEXEC=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
MODEL=(--arch-embedding-size 2000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 256)
MPI=("$MPIEXEC" -n 2 --bind-to none)

"$SPARQ" gen-data --out "$D/data" --num-samples 20000 --num-test 2000 --cardinalities 2000 > /dev/null 2> "$D/err" ||
  fail "gen-data: $(cat "$D/err")"
"${MPI[@]}" "$SPARQ" plan --data-path "$D/data" "${MODEL[@]}" --hosts 2 --measure --steps 4 --threads-choices 1 \
  --out "$D/plan.json" > "$D/out" 2> "$D/err" || fail "plan --measure: $(cat "$D/err" "$D/out")"
# 16 KiB-2 MiB (2 ranks: ring steps of at most one 1 MiB segment), each collective.
[ "$(grep -c '^measured  *ring allreduce ' "$D/out")" -eq 4 ] || fail "ring rows: $(cat "$D/out")"
[ "$(grep -c '^measured pairwise alltoall ' "$D/out")" -eq 4 ] || fail "alltoall rows: $(cat "$D/out")"
net=$(sed -n 's/^measured network: \([0-9.]*MBps,[0-9]*us\) (.*/\1/p' "$D/out")
[ -n "$net" ] || fail "no fitted network: $(cat "$D/out")"
# The planner names a network in gigabits: the same bandwidth and latency.
desc=$(sed -n 's/^sparq plan: 2 ranks on \([^,]*,[^,]*\), global batch.*/\1/p' "$D/out")
python3 - "$net" "$desc" <<'PY' || fail "planned for $desc, not the measured $net: $(cat "$D/out")"
import re, sys
mbps, us = map(float, re.fullmatch(r"([\d.]+)MBps,(\d+)us", sys.argv[1]).groups())
gbit, us2 = map(float, re.fullmatch(r"([\d.e+-]+)gbit,([\d.e+-]+)us", sys.argv[2]).groups())
assert abs(8 * mbps / 1000 / gbit - 1) < 1e-3 and abs(us - us2) < 1e-6, (sys.argv[1], sys.argv[2])
PY
grep -q "\"net\": \"$desc\"" "$D/plan.json" || fail "plan file: $(cat "$D/plan.json")"
[ "$(grep -c '^chosen: ' "$D/out")" -eq 1 ] || fail "one rank plans: $(cat "$D/out")"
echo "ok: measured $net and planned for it"
"$SPARQ" train --data-path "$D/data" "${MODEL[@]}" --ranks 2 --net "$net" --num-batches 4 --print-freq 2 \
  --plan "$D/plan.json" > "$D/out" 2> "$D/err" || fail "train --plan: $(cat "$D/err")"
grep -q "^plan $D/plan.json: .*for 2 ranks on $desc" "$D/out" || fail "no plan line: $(head -3 "$D/out")"
echo "ok: train --plan with the measured plan"

# --trial: the hosts train the clock's leaders, then the fastest of them at
# its other fusion sizes; the plan is the fastest of that last stage, each
# plan's step the median of its rounds.
# (The network given: a fit of the measured times is the test above's.)
"${MPI[@]}" "$SPARQ" plan --data-path "$D/data" "${MODEL[@]}" --hosts 2 --net 10gbit,0us --steps 4 --threads-choices 1 \
  --trial 15 --trial-plans 3 --out "$D/trial.json" --metrics "$D/trial.jsonl" > "$D/out" 2> "$D/err" ||
  fail "plan --trial: $(cat "$D/err" "$D/out")"
python3 - "$D/out" "$D/trial.json" "$D/trial.jsonl" <<'PY' || fail "--trial: $(cat "$D/out")"
import json, re, statistics, sys
out = open(sys.argv[1]).read().splitlines()
stages = []  # each: {plan: (median ms, its step against its round's median plan, rounds)}
for i, l in enumerate(out):
    if not l.startswith("on the hosts: "):
        continue
    rows = {}
    for row in out[i + 2:]:
        m = re.fullmatch(r"  (.+?) +(\d+\.\d\d) +(\d+\.\d\d) +(\d+\.\d\d\d)  (\d+\.\d\d(?:, \d+\.\d\d)*)", row)
        if not m:
            break
        rounds = [float(x) for x in m[5].split(", ")]
        assert len(rounds) == 3 and abs(float(m[3]) - statistics.median(rounds)) < 0.006, row
        rows[m[1]] = (float(m[3]), float(m[4]), rounds)
    # vs round, from the printed rounds: each round's step over that round's median plan, the median of those
    for plan, (_, rel, rounds) in rows.items():
        mids = [statistics.median(r[2][k] for r in rows.values()) for k in range(3)]
        want = statistics.median(x / mid for x, mid in zip(rounds, mids))
        # The rounds are printed to 0.01 ms: each step and each round's median
        # off by up to 0.005 ms, which on steps of a millisecond or less moves
        # a ratio by more than a percent; "vs round" itself to 0.001.
        tol = want * (0.005 / min(rounds) + 0.005 / min(mids)) + 0.0006
        assert abs(rel - want) <= tol, (plan, rel, want, tol)
    stages.append(rows)
assert 1 <= len(stages) <= 2, stages
assert 2 <= len(stages[0]) <= 4, stages  # 3 leaders and the fastest fp32 plan, where it is not one of them
if len(stages) == 2:  # the first stage's fastest at each fusion size it has
    first = min(stages[0], key=lambda p: stages[0][p][1])
    fusion = lambda label: re.sub(r"fuse [^,]*", "fuse X", label)
    assert first in stages[1] and all(fusion(l) == fusion(first) for l in stages[1]), stages
best = min(stages[-1], key=lambda p: stages[-1][p][1])
ms = stages[-1][best][0]
chosen = next(l for l in out if l.startswith("chosen: "))
assert chosen.startswith(f"chosen: {best} — measured {ms:.2f} ms/step on the hosts"), (chosen, stages)
assert abs(json.load(open(sys.argv[2]))["measured_ms_per_step"] - ms) < 0.006
measured = {j["label"] for j in map(json.loads, open(sys.argv[3])) if "measured_ms_per_step" in j}
assert measured == set().union(*stages), (measured, stages)
PY
echo "ok: --trial chose the fastest plan the hosts measured"
"$SPARQ" train --data-path "$D/data" "${MODEL[@]}" --ranks 2 --net 10gbit,0us --num-batches 4 --print-freq 2 \
  --plan "$D/trial.json" > "$D/out" 2> "$D/err" || fail "train --plan (trial): $(cat "$D/err")"
grep -q "^plan $D/trial.json: .*; measured [0-9.]* ms/step on the hosts it was planned on)" "$D/out" ||
  fail "no measured step in the plan line: $(head -3 "$D/out")"
echo "ok: train --plan names the step the hosts measured"

"${MPI[@]}" "$SPARQ" plan --data-path "$D/data" "${MODEL[@]}" --hosts 3 --measure > "$D/out" 2> "$D/err" &&
  fail "--hosts 3 under 2 processes must fail"
grep -q -- "--hosts 3 but mpiexec started 2 processes" "$D/err" || fail "hosts mismatch: $(cat "$D/err")"
echo "ok: $(grep -m1 -- '--hosts 3' "$D/err")"

"${MPI[@]}" "$SPARQ" plan --data-path "$D/data" "${MODEL[@]}" --hosts 2 --net 10gbit,0us --out "$D/twice.json" \
  > "$D/out" 2> "$D/err" && fail "--net under mpiexec must fail (every process would write the plan)"
grep -q "plans on the virtual clock in one process" "$D/err" || fail "--net under mpiexec: $(cat "$D/err")"
[ ! -e "$D/twice.json" ] || fail "--net under mpiexec wrote a plan"
echo "ok: $(grep -m1 -- 'one process' "$D/err")"
