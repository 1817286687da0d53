#!/usr/bin/env bash
# `sparq plan` end to end on a small model: it runs the plans on the virtual
# clock, prints them fastest first with their evidence, writes the fastest
# admitted one, and `sparq train --plan` trains with it and compares its
# step with the modelled one; every plan it printed as run was run (its
# --metrics lines hold a modelled step); bad input gets one-line errors.
#   tests/tools/plan_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
MODEL=(--arch-embedding-size 2000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 256)

"$SPARQ" gen-data --out "$D/data" --num-samples 20000 --num-test 2000 --cardinalities 2000 > /dev/null 2> "$D/err" ||
  fail "gen-data: $(cat "$D/err")"
"$SPARQ" plan --data-path "$D/data" "${MODEL[@]}" --hosts 4 --net 1gbit,50us --steps 5 --out "$D/plan.json" \
  --metrics "$D/plans.jsonl" > "$D/out" 2> "$D/err" || fail "plan: $(cat "$D/err")"
grep -q "^chosen: .*x the fastest fp32 plan" "$D/out" || fail "no choice: $(cat "$D/out")"
grep -q '"format": "sparq-plan"' "$D/plan.json" || fail "plan file: $(cat "$D/plan.json")"
python3 - "$D/plans.jsonl" "$D/plan.json" <<'PY' || fail "plans: $(cat "$D/out")"
import json, sys
plans = [json.loads(l) for l in open(sys.argv[1])]
chosen = json.load(open(sys.argv[2]))
run = [p for p in plans if "modelled_ms_per_step" in p]
assert run and all(p["skipped"] == "" for p in run), "a plan run and skipped"
assert all(p["skipped"] for p in plans if "modelled_ms_per_step" not in p), "a plan neither run nor skipped"
refined = [p for p in run if p["refined"]]  # the leaders' longer runs, at 1 and 2 threads
assert {p["flags"]["threads"] for p in refined} == {"1", "2"}, refined
best = min((p for p in refined if p["admitted"]), key=lambda p: p["modelled_ms_per_step"])
assert best["flags"] == chosen["flags"], (best["flags"], chosen["flags"])
assert chosen["modelled_ms_per_step"] == best["modelled_ms_per_step"]
fp32 = min(p["modelled_ms_per_step"] for p in refined if p["flags"]["dp-codec"] == "none"
           and p["flags"]["emb-codec-fwd"] == "fp32" and p["flags"]["emb-codec-bwd"] == "fp32"
           and p["flags"]["mlp-precision"] == "fp32")
assert chosen["fp32_ms_per_step"] == fp32
assert all(p["accuracy"] for p in plans), "a plan without its evidence"
# bf16 MLPs: over the default budget by the stored runs (or not on this CPU).
# Each admitted plan's bf16 twin is left out for what bf16 does.
space = {p["label"]: p for p in plans if not p["refined"]}
bf16 = [p for p in space.values() if p["flags"]["mlp-precision"] == "bf16"]
assert len(bf16) == len(space) // 2 and not any(p["admitted"] for p in bf16)
for p in bf16:
    twin = space[p["label"].replace(", bf16 MLPs", "")]
    assert not twin["admitted"] or "bf16" in p["accuracy"], p
print(f"ok: {len(run)} of {len(plans)} plans run ({len(refined)} longer runs of the leaders), chosen {chosen['flags']}")
PY

# Accuracy by pilots on this data: every plan run is tested against fp32's start.
# A smaller data set for the pilots and the short epoch below (each plan's
# pilot tests on the whole test set; under the sanitizers this test was the
# suite's longest).
"$SPARQ" gen-data --out "$D/small" --num-samples 5000 --num-test 500 --cardinalities 2000 > /dev/null 2> "$D/err" ||
  fail "gen-data: $(cat "$D/err")"
"$SPARQ" plan --data-path "$D/small" "${MODEL[@]}" --hosts 2 --net 1gbit,50us --pilot 6 --out "$D/pilot.json" \
  --metrics "$D/pilots.jsonl" > "$D/out" 2> "$D/err" || fail "plan --pilot: $(cat "$D/err")"
python3 - "$D/pilots.jsonl" "$D/pilot.json" <<'PY' || fail "pilots: $(cat "$D/out")"
import json, sys
plans = [json.loads(l) for l in open(sys.argv[1])]
run = [p for p in plans if "modelled_ms_per_step" in p and not p["refined"]]  # refined: timing only
fp32 = [p for p in run if p["accuracy"] == "fp32: no codec"]
assert fp32 and all("test_loss" in p for p in run)
# The pilots' reference: the first plan run, the replicated fp32 one without fusion.
ref = next(p for p in run if p["label"] == "replicated, none, fuse 0")
for p in run:
    change = 100 * (p["test_loss"] / ref["test_loss"] - 1)
    assert abs(change - p["expected_change"]) < 1e-9, (p["label"], change, p["expected_change"])
    assert p in fp32 or p["admitted"] == (change <= 0.1), p
assert json.load(open(sys.argv[2]))["evidence"].startswith(("pilot: ", "fp32"))
print(f"ok: {len(run)} pilots")
PY

# Training with the plan: the plan's flags, and its modelled step against the run's.
"$SPARQ" train --data-path "$D/data" "${MODEL[@]}" --ranks 4 --net 1gbit,50us --num-batches 8 --print-freq 4 \
  --plan "$D/plan.json" --metrics "$D/train.jsonl" > "$D/out" 2> "$D/err" || fail "train --plan: $(cat "$D/err")"
grep -q "^plan $D/plan.json: " "$D/out" || fail "no plan line: $(head -3 "$D/out")"
grep -q "^plan: modelled .* ms/it against the .* ms/it sparq plan modelled" "$D/out" || fail "no comparison: $(cat "$D/out")"
python3 - "$D/train.jsonl" "$D/plan.json" <<'PY' || fail "train ran another plan"
import json, sys
config = json.loads(open(sys.argv[1]).readline())["flags"]
for name, value in json.load(open(sys.argv[2]))["flags"].items():
    assert str(config[name]) == value, (name, config[name], value)
PY
echo "ok: train --plan"

# An epoch of 2 whole batches (5000 samples at 2048): every plan still runs
# its 5 steps, into the next epochs, and is timed on them. Hosts of one
# core: the leaders run again at one thread only, not at the 2 asked too.
"$SPARQ" plan --data-path "$D/small" --arch-embedding-size 2000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 \
  --mini-batch-size 2048 --hosts 2 --net 1gbit,50us --steps 5 --threads-choices 1,2 --host-cores 1 \
  --out "$D/short.json" --metrics "$D/short.jsonl" > "$D/out" 2> "$D/err" ||
  fail "plan on 2 batches an epoch: $(cat "$D/err")"
python3 - "$D/short.jsonl" <<'PY' || fail "plan on 2 batches an epoch: $(cat "$D/out")"
import json, math, sys
plans = [p for p in map(json.loads, open(sys.argv[1])) if "modelled_ms_per_step" in p]
run = [p["modelled_ms_per_step"] for p in plans]
assert run and all(math.isfinite(ms) and ms > 0 for ms in run), run
assert any(p["refined"] for p in plans) and not any("threads" in p["label"] for p in plans), [p["label"] for p in plans]
PY
grep -q "the leaders again at 1 thread(s) a rank (of --threads-choices 1,2: a host has no cores for more)" "$D/out" ||
  fail "hosts of one core, threads 1,2: $(head -3 "$D/out")"
echo "ok: plans on an epoch shorter than their steps; a host's one core runs one thread a rank"

one_line() {  # WHAT ARGS...: must fail with one line matching WHAT
  local what=$1
  shift
  timeout 120 "$SPARQ" "$@" > /dev/null 2> "$D/err" && fail "$*: must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q -- "$what" "$D/err" || fail "$*: $(cat "$D/err")"
  echo "ok: $(cat "$D/err")"
}
TRAIN=(train --data-path "$D/data" --ranks 4 --num-batches 2)
one_line "a plan for another model" "${TRAIN[@]}" --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 256 \
  --plan "$D/plan.json"
one_line "a plan for 4 ranks, this run has 2" train --data-path "$D/data" "${MODEL[@]}" --ranks 2 --plan "$D/plan.json"
one_line "a plan for a global batch of 256, this run has 512" train --data-path "$D/data" \
  --arch-embedding-size 2000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 512 --ranks 4 --plan "$D/plan.json"
one_line "\-\-dp-codec is set by the plan" "${TRAIN[@]}" "${MODEL[@]}" --dp-codec q8 --plan "$D/plan.json"
echo '{"format": "sparq-plan", "format_version": 1}' > "$D/bad.json"
one_line "bad.json: not a plan of sparq plan: no" "${TRAIN[@]}" "${MODEL[@]}" --plan "$D/bad.json"
one_line "plan auto plans for --ranks P in-process ranks on the --net network" "${TRAIN[@]}" "${MODEL[@]}" --plan auto
one_line "max-loss-change must be >= 0" plan --data-path "$D/data" "${MODEL[@]}" --hosts 4 --net 1gbit,50us \
  --max-loss-change -1
one_line "threads 'x': expected 1 to 1024" plan --data-path "$D/data" "${MODEL[@]}" --hosts 4 --net 1gbit,50us \
  --threads-choices 1,x
one_line "\-\-threads-choices 2: a host has cores for 1 thread(s) a rank (--host-cores 0, --shared-cores 2 over 4 hosts)" \
  plan --data-path "$D/data" "${MODEL[@]}" --hosts 4 --net 1gbit,50us --shared-cores 2 --threads-choices 2
one_line "no plan fits: memory" plan --data-path "$D/data" "${MODEL[@]}" --hosts 4 --net 1gbit,50us --host-memory 1KiB
# Hosts with the memory, but the clock runs their ranks here: 26 tables of 10^8 rows do not fit this machine.
one_line "no plan fits: memory: running 4 ranks on the clock here needs about" plan --data-path "$D/data" \
  --arch-embedding-size 100000000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 256 --hosts 4 \
  --net 1gbit,50us --host-memory 1024GiB
one_line "the training data has 20000 samples, fewer than one batch of 32768: no step of the plans to time" plan \
  --data-path "$D/data" --arch-embedding-size 2000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 32768 \
  --hosts 4 --net 1gbit,50us
one_line "\-\-mini-batch-size must be >= 1" plan --data-path "$D/data" --mini-batch-size 0 --hosts 4 --net 1gbit,50us
one_line "give the network to plan for: --net BW,LAT, or --measure" plan --data-path "$D/data" "${MODEL[@]}" --hosts 4
one_line "give the network to plan for: --net BW,LAT, or --measure" plan --data-path "$D/data" "${MODEL[@]}" --hosts 4 \
  --net 1gbit,50us --measure
one_line "measure times the network between the hosts: start sparq plan --measure under mpiexec" plan \
  --data-path "$D/data" "${MODEL[@]}" --hosts 4 --measure
one_line "trial trains the leading plans on the hosts themselves: start sparq plan under mpiexec" plan \
  --data-path "$D/data" "${MODEL[@]}" --hosts 4 --net 1gbit,50us --trial 20
one_line "trial must be 0 or at least 15 steps" plan --data-path "$D/data" "${MODEL[@]}" --hosts 4 --measure --trial 5
one_line "trial-plans and --trial-rounds shape a trial on the hosts: give --trial N" plan --data-path "$D/data" \
  "${MODEL[@]}" --hosts 4 --net 1gbit,50us --trial-rounds 5
