#!/usr/bin/env bash
# The emulation's own cost does not grow with the rank count: on an
# effectively infinite network with 256 samples a rank, the modelled step of
# 16 in-process ranks stays near that of 2 (each of the 16 threads' messages
# used to be charged the thread switches of 32 threads on this machine's
# cores). A real 16-host run does more work a rank than a 2-host one (its
# ring reduces 15/16 of the gradients, not 1/2; its table owners look up
# 8192 rows a step, not 6656; 15/16 of the lookups leave the rank, not 1/2),
# hence the loose bound, 2.0x: measured 1.17-1.41x on a quiet machine, and
# 1.54-1.85x (this build and the one before, interleaved) while the
# machine's host was loaded (load average near 6 with nothing else of ours
# running, 2026-11-29): a step ends with the slowest of 16 ranks' CPU
# times, which the host's load inflates more than 2 ranks'. 1.55x before the
# virtual clock stopped charging the emulation's own work (quiet;
# docs/results.md, "The emulation's own cost") and 2.1x when the issue was
# filed, so the bound guards against that charging coming back, not
# against a few %; the mechanism itself is tested exactly in
# tests/transport/sim_transport_test.cc.
# The runs alternate, two of each P, and each P takes the lower of its two
# runs' medians:
# other work on the machine only adds CPU time (CTest runs this test alone).
# Also: the modelled phases add up to the modelled step.
#   tests/train/emulation_flat_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for r in 1 2; do
  for p in 2 16; do
    "$SPARQ" train --ranks $p --net 100000gbit,0us --data-generation random --num-batches 30 \
      --print-freq 1 --test-freq -1 --mini-batch-size $((256 * p)) --emb-placement table-wise --fuse-bytes 4MiB \
      --metrics "$D/p${p}_r$r.jsonl" > "$D/p$p.out" 2>&1 || fail "P=$p: $(tail -3 "$D/p$p.out")"
  done
done
/usr/bin/python3 - "$D" << 'EOF' || fail "modelled steps"
import json, statistics, sys
def steps(path):
    ev = [json.loads(l) for l in open(path)]
    return [e for e in ev if e["event"] == "train" and e["step"] > 10]
med = {}
for p in (2, 16):
    for r in (1, 2):
        path = f"{sys.argv[1]}/p{p}_r{r}.jsonl"
        s = steps(path)
        med[p] = min(med.get(p, float("inf")), statistics.median(e["modeled_ms_per_it"] for e in s))
        for e in s:  # data assembly is the only part of a step outside the phases
            ph = sum(e["modeled_phase_ms"].values())
            assert 0.9 * e["modeled_ms_per_it"] <= ph <= e["modeled_ms_per_it"] * 1.0001, (path, ph, e)
            assert set(e["traffic"]) == {"W_grad", "emb_fwd", "emb_bwd"}, e["traffic"]
            assert all(x["modeled_ms_per_step"] > 0 for x in e["traffic"].values()), e["traffic"]
p2, p16 = med[2], med[16]
print(f"modelled ms/step: P=2 {p2:.2f}, P=16 {p16:.2f} ({p16 / p2:.2f}x)")
assert p16 < 2.0 * p2, f"the modelled step grows from {p2:.2f} ms at P=2 to {p16:.2f} ms at P=16"
EOF
echo "PASS"
