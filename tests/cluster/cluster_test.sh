#!/usr/bin/env bash
# scripts/cluster end to end: its one-line errors, cleanup after a failed
# `up`, faults, 2 unshaped hosts training 20 steps on 2 ranks through `run`,
# and an allreduce over torch's gloo through `torchrun` (where TORCHRUN exists).
# Needs root, ip and tc; otherwise it says why and is skipped (exit 77).
#   tests/cluster/cluster_test.sh path/to/scripts/cluster path/to/sparq [path/to/torchrun]
set -uo pipefail
CLUSTER=$1
SPARQ=$2
TORCHRUN=${3:-}
export CLUSTER_PREFIX=sqct  # its own objects: a cluster of the user's stays untouched
D=$(mktemp -d)
trap '"$CLUSTER" down > /dev/null 2>&1; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
leftovers() { ip netns list | grep -E "^${CLUSTER_PREFIX}_" || true; }

[ "$(id -u)" -eq 0 ] || { echo "skipped: not root (network namespaces need it)"; exit 77; }
command -v ip > /dev/null && command -v tc > /dev/null || { echo "skipped: ip or tc not installed"; exit 77; }
ip netns add "${CLUSTER_PREFIX}_probe" 2> /dev/null || { echo "skipped: cannot create network namespaces here"; exit 77; }
ip netns del "${CLUSTER_PREFIX}_probe"

expect_error() {  # expect_error "message part" args...: exit 1, one line naming the problem, nothing left behind
  local want=$1
  shift
  "$CLUSTER" "$@" > "$D/out" 2> "$D/err" && fail "'cluster $*' must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] || fail "'cluster $*' must say one line, said: $(cat "$D/err")"
  grep -q -- "$want" "$D/err" || fail "'cluster $*' must say '$want', said: $(cat "$D/err")"
}
expect_error "N must be 2..64" up 1 1gbit
expect_error "bad RATE '1gbt'" up 2 1gbt
expect_error "RATE missing" up 2
expect_error "no cluster is up" run -- true
expect_error "no cluster is up" torchrun -- x.py
expect_error "no cluster is up" cut 0
[ -z "$(leftovers)" ] || fail "refused commands left namespaces: $(leftovers)"

# An `up` that fails half-way (an address ip refuses) removes what it made.
CLUSTER_NET=10.250.300 "$CLUSTER" up 2 none > "$D/out" 2> "$D/err" && fail "up with a bad address must fail"
[ -z "$(leftovers)" ] || fail "a failed up left: $(leftovers)"

"$CLUSTER" up 2 none 2> "$D/err" || fail "up 2 none: $(cat "$D/err")"
expect_error "already up" up 2 1gbit
[ "$(leftovers | wc -l)" -eq 3 ] || fail "a refused second up must keep the first cluster: $(leftovers)"
"$CLUSTER" exec 1 -- ip -br addr > "$D/out" || fail "exec"
grep -q "10.250.77.2/24" "$D/out" || fail "host 1 has 10.250.77.2: $(cat "$D/out")"

# Faults: a host cut off and healed, a link reshaped and restored.
expect_error "I must be a host 0..1, got '2'" cut 2
expect_error "I must be a host 0..1, got 'x'" heal x
expect_error "bad RATE '1gbt'" rate 0 1gbt
expect_error "RATE missing" rate 0
reach() {  # host 1 answers a connection from host 0 (nothing listens: it refuses)
  "$CLUSTER" exec 0 -- timeout 2 bash -c "echo > /dev/tcp/10.250.77.2/9" > "$D/reach" 2>&1
  grep -q "refused" "$D/reach"
}
reach || fail "host 1 must answer host 0 (a refused connection) before the cut"
"$CLUSTER" cut 1 2> /dev/null || fail "cut 1"
reach && fail "a cut host must not answer"
"$CLUSTER" heal 1 2> /dev/null || fail "heal 1"
reach || fail "a healed host must answer again"
"$CLUSTER" rate 1 100mbit 2> /dev/null || fail "rate 1 100mbit"
"$CLUSTER" exec 1 -- tc qdisc show | grep -q "rate 100Mbit" || fail "host 1's link must be at 100 Mbit/s"
"$CLUSTER" rate 1 up 2> /dev/null || fail "rate 1 up"
"$CLUSTER" exec 1 -- tc qdisc show | grep -q tbf && fail "rate up restores an unshaped host: no tbf"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CLUSTER_TIMEOUT=300 "$CLUSTER" run -- "$SPARQ" train --data-generation random \
  --mini-batch-size 256 --num-batches 20 --print-freq 20 --threads 1 --dp-codec dct:0.9,10 \
  --emb-placement table-wise --emb-codec-fwd q4 > "$D/out" 2> "$D/err" || fail "2-host training: $(tail -5 "$D/err")"
grep -q "data parallel: 2 ranks" "$D/out" || fail "two ranks, one per host: $(cat "$D/out")"
grep -q "Finished training it 20/20" "$D/out" || fail "20 steps: $(cat "$D/out")"

expect_error "the script to run is missing" torchrun --
TORCHRUN=/nonexistent/torchrun expect_error "'/nonexistent/torchrun' not found" torchrun -- x.py
if [ -x "$TORCHRUN" ]; then
  cat > "$D/sum.py" << 'EOF'
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: {t.item():g}")
dist.destroy_process_group()
EOF
  # The last line matters: without it a rank aborted at its exit in a few runs in a hundred under
  # load (torch's gloo worker thread frees a tensor while the interpreter finalizes;
  # docs/reliability.md, "A rank's exit"). No retry: a failure here is a failure.
  TORCHRUN=$TORCHRUN "$CLUSTER" torchrun -- "$D/sum.py" > "$D/out" 2> "$D/err" || fail "torchrun: $(tail -5 "$D/err")"
  [ "$(grep -oE "rank [01] of 2: 3" "$D/out" | sort -u | wc -l)" -eq 2 ] || fail "torchrun: both ranks sum 1 + 2: $(cat "$D/out")"
  # Host 1's agent gone: host 0's, its worker done, would wait 300 s in torchrun's exit barrier;
  # it gets CLUSTER_GRACE seconds.
  printf 'import os, signal\nif os.environ["RANK"] == "1":\n    os.kill(os.getppid(), signal.SIGKILL)\n' > "$D/lost.py"
  SECONDS=0
  CLUSTER_GRACE=2 TORCHRUN=$TORCHRUN "$CLUSTER" torchrun -- "$D/lost.py" > "$D/out" 2> "$D/err" &&
    fail "torchrun: a lost agent must fail the job"
  ((SECONDS < 60)) || fail "torchrun: host 0's agent was not ended 2 s after host 1's ($SECONDS s)"
  grep -q "host 1's torchrun failed (exit 137)" "$D/err" &&
    grep -q "host 0 still running 2 s after host 1's torchrun ended: ended" "$D/err" ||
    fail "torchrun: the ended host must be named: $(tail -3 "$D/err")"
else
  echo "no torchrun at '$TORCHRUN': scripts/cluster torchrun untested (scripts/setup makes .venv)"
fi

"$CLUSTER" down 2> "$D/err" || fail "down: $(cat "$D/err")"
[ -z "$(leftovers)" ] || fail "down left: $(leftovers)"
echo "cluster: all checks passed"
