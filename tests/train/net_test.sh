#!/usr/bin/env bash
# `train --net`: in-process ranks on a virtual clock. The numerics are those
# of the plain run (and of mpiexec -n P): the final checkpoints are compared
# byte for byte; the modelled step is never shorter than rank 0's bytes on
# the modelled link; modelled times appear in the progress lines, metrics
# and summary; misuse gives one-line errors.
#   tests/train/net_test.sh path/to/sparq [mpiexec]
set -uo pipefail
SPARQ=$1
MPIEXEC=${2:-}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$@" > "$D/out" 2> "$D/err"; }

run "$SPARQ" gen-data --out "$D/data" --num-samples 2600 --num-test 500 --seed 3 || fail "gen-data: $(cat "$D/err")"
common=(--data-path "$D/data" --arch-embedding-size 500 --arch-sparse-feature-size 8 --arch-mlp-bot 13-16-8 --arch-mlp-top 16-1
        --mini-batch-size 64 --num-batches 20 --nepochs 2 --print-freq 10 --verify-freq 1)

# same NAME P FLAGS...: the plain run, the run on a modelled network and (with
# mpiexec) the run of P processes end with the same bytes.
same() {
  local name=$1 p=$2
  shift 2
  run "$SPARQ" train "${common[@]}" --ranks "$p" "$@" --save "$D/$name.plain" || fail "$name: $(cat "$D/err")"
  run "$SPARQ" train "${common[@]}" --ranks "$p" "$@" --net 1gbit,20us --save "$D/$name.net" \
    --metrics "$D/$name.jsonl" || fail "$name --net: $(cat "$D/err")"
  cmp -s "$D/$name.plain" "$D/$name.net" || fail "$name: --net must not change the numerics"
  grep -q "^Finished training it 10/20 of epoch 0, .*, modeled [0-9.]* ms/it$" "$D/out" ||
    fail "$name: progress line without the modelled step: $(cat "$D/out")"
  grep -Eq "^modeled on 1gbit,20us: [0-9.]+ ms/it, [0-9.]+ s of training \([0-9.]+ s with tests; real: [0-9.]+ ms/it\)$" \
    "$D/out" || fail "$name: summary line: $(cat "$D/out")"
  /usr/bin/python3 - "$D/$name.jsonl" << 'EOF' || fail "$name: metrics"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
train = [e for e in ev if e["event"] == "train"]
tests = [e for e in ev if e["event"] == "test"]
assert train and tests, "train and test events"
assert all(e["modeled_ms_per_it"] > 0 and e["modeled_wall_s"] > 0 for e in train), "modeled fields of train events"
assert all(0 < e["modeled_train_s"] <= e["modeled_wall_s"] for e in tests), "modeled fields of test events"
EOF
  if [ -n "$MPIEXEC" ]; then
    run "$MPIEXEC" -n "$p" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$SPARQ" train "${common[@]}" \
      "$@" --save "$D/$name.mpi" || fail "$name under mpiexec: $(cat "$D/err")"
    cmp -s "$D/$name.plain" "$D/$name.mpi" || fail "$name: the emulated run must equal mpiexec -n $p bitwise"
  fi
  echo "ok: $name"
}

same dp-dct-tablewise 4 --emb-placement table-wise --emb-codec-fwd q4 --emb-codec-bwd q2 --dp-codec dct:0.9,7
same dp-q4ec 3 --dp-codec q4+ec --dp-allreduce ring
same hybrid 4 --mp-splits bot:1 --micro-batches 2 --mp-codec dct:0.5 --dp-codec dct:0.9,7
same ps 2 --dp-mode ps --servers 1
# The replicated tables' gradients in bf16: 3 ranks (one folded), and the replicas of a hybrid.
same emb-bf16 3 --emb-codec-bwd bf16 --dp-codec q4 --dp-allreduce ring
same hybrid-emb-bf16 4 --mp-splits bot:1 --micro-batches 2 --emb-codec-bwd bf16
# Cores that all ranks share change the clock, not the numerics.
run "$SPARQ" train "${common[@]}" --ranks 4 --mp-splits bot:1 --micro-batches 2 --mp-codec dct:0.5 \
  --dp-codec dct:0.9,7 --net 1gbit,20us --shared-cores 2 --save "$D/hybrid.shared" || fail "shared: $(cat "$D/err")"
cmp -s "$D/hybrid.plain" "$D/hybrid.shared" || fail "--shared-cores must not change the numerics"
echo "ok: hybrid on 2 shared cores"

# Kernel costs by shape change the clock, not the numerics; their file is
# written at the end and read by the next run.
for round in write read; do
  run "$SPARQ" train "${common[@]}" --ranks 4 --mp-splits bot:1 --micro-batches 2 --mp-codec dct:0.5 \
    --dp-codec dct:0.9,7 --net 1gbit,20us --kernel-costs "$D/costs.txt" --save "$D/hybrid.costs" ||
    fail "--kernel-costs ($round): $(cat "$D/err")"
  cmp -s "$D/hybrid.plain" "$D/hybrid.costs" || fail "--kernel-costs must not change the numerics"
done
for kernel in onednn_sgemm dct_dp_step_per_value dct_mp_encode_per_value dct_mp_decode_per_value \
  dct_mp_grad_encode_per_value; do
  grep -Eq "^$kernel( [0-9]+){5} [0-9.e-]+$" "$D/costs.txt" || fail "no $kernel cost in the file: $(cat "$D/costs.txt")"
done
echo "ok: kernel costs"

# The modelled step carries at least rank 0's bytes over its 100 Mbit/s link
# (fp32 table-wise: the alltoalls and the dense allreduce are most of it).
run "$SPARQ" train "${common[@]}" --ranks 4 --emb-placement table-wise --net 100mbit,20us --metrics "$D/slow.jsonl" ||
  fail "100mbit: $(cat "$D/err")"
/usr/bin/python3 - "$D/slow.jsonl" << 'EOF' || fail "the modelled step is shorter than its bytes on the wire"
import json, sys
for e in (json.loads(l) for l in open(sys.argv[1])):
    if e["event"] != "train" or e["it"] == 10 and e["epoch"] == 0:  # the first interval warms up
        continue
    wire_ms = sum(x["bytes_per_step"] for x in e["traffic"].values()) * 8 / 100e6 * 1e3
    assert wire_ms > 0.5, wire_ms
    assert e["modeled_ms_per_it"] >= wire_ms, (e["modeled_ms_per_it"], wire_ms)
EOF
echo "ok: modelled step >= bytes / bandwidth"

# Misuse: one line each.
expect_error() {
  local want=$1
  shift
  run "$@" && fail "accepted: $*"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q -- "$want" "$D/err" || fail "error for '$*': $(cat "$D/err")"
}
expect_error "give --ranks P" "$SPARQ" train "${common[@]}" --net 1gbit,20us
expect_error "10gb,20us" "$SPARQ" train "${common[@]}" --ranks 2 --net 10gb,20us
expect_error "--shared-cores shapes the modelled computation: it needs --net" "$SPARQ" train "${common[@]}" --ranks 2 \
  --shared-cores 2
expect_error "--kernel-costs says how the clock charges computation: it needs --net" "$SPARQ" train "${common[@]}" \
  --ranks 2 --kernel-costs run
printf '# sparq kernel costs: CPU seconds of one call, by kernel and shape\n%s\ncolsum 1 2\n' "$(sed -n 2p "$D/costs.txt")" \
  > "$D/bad-costs.txt"
expect_error "$D/bad-costs.txt:3: expected" "$SPARQ" train "${common[@]}" --ranks 2 --net 1gbit,20us \
  --kernel-costs "$D/bad-costs.txt"
expect_error "with replicated tables is their gradients' exchange: fp32 or bf16, got 'q4'" "$SPARQ" train \
  "${common[@]}" --ranks 2 --emb-codec-bwd q4
expect_error "bf16 is the replicated tables' gradient exchange; the table-wise alltoall takes" "$SPARQ" train \
  "${common[@]}" --ranks 2 --emb-placement table-wise --emb-codec-bwd bf16
expect_error "--dp-mode ps pushes fp32" "$SPARQ" train "${common[@]}" --ranks 3 --dp-mode ps --emb-codec-bwd bf16
expect_error "give one" "$SPARQ" train "${common[@]}" --ranks 2 --net 1gbit,20us --shared-cores 2 --host-cores 1
if [ -n "$MPIEXEC" ]; then  # mpiexec adds its own banner
  run "$MPIEXEC" -n 1 "$SPARQ" train "${common[@]}" --net 1gbit,20us && fail "--net accepted under mpiexec"
  grep -q "^sparq: error: --net .*under mpiexec the network is real" "$D/err" || fail "--net under mpiexec: $(cat "$D/err")"
fi
echo "ok: errors"
