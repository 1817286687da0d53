#!/usr/bin/env bash
# A host cut off and a link that flaps, on 3 shaped hosts (scripts/net-fault-trials,
# one trial each, sparq train model parallel on 3 ranks): the cut must end
# the launch non-zero within --timeout + 30 s, naming the lost host, with no
# process left on any host; the flap must end normally with the checkpoint of
# an undisturbed run, byte for byte. Needs root, ip and tc; otherwise it says
# why and is skipped (exit 77).
#   tests/cluster/net_faults_test.sh path/to/scripts/net-fault-trials path/to/sparq
set -uo pipefail
NET_FAULT_TRIALS=$1
SPARQ=$2
[ "$(id -u)" -eq 0 ] || { echo "skipped: not root (network namespaces need it)"; exit 77; }
command -v ip > /dev/null && command -v tc > /dev/null || { echo "skipped: ip or tc not installed"; exit 77; }
ip netns add sqft_probe 2> /dev/null || { echo "skipped: cannot create network namespaces here"; exit 77; }
ip netns del sqft_probe
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; cat "$D/table"; exit 1; }

# Its own objects and addresses: a cluster of the user's stays untouched.
CLUSTER_PREFIX=sqft CLUSTER_NET=10.250.79 HOSTS=3 PLANS=mp FAULTS="cut-train flap" OUT=$D \
  "$NET_FAULT_TRIALS" 1 "$SPARQ" > "$D/table" 2>&1 || fail "net-fault-trials failed"
cat "$D/table"
# Columns: plan fault trials "ended ok" "max end s" "names rank" "no leftover" "max s" "ckpt ==" "resume =="
awk '$1 == "mp" && $2 == "cut-train" && $4 == "1/1" && $6 == "1/1" && $7 == "1/1"' "$D/table" | grep -q . ||
  fail "the cut did not end the launch in time, naming the host, with nothing left"
awk '$1 == "mp" && $2 == "flap" && $4 == "1/1" && $7 == "1/1" && $9 == "1/1"' "$D/table" | grep -q . ||
  fail "the flap did not end normally with the undisturbed checkpoint"
ip netns list | grep -q "^sqft_" && fail "namespaces left: $(ip netns list | grep "^sqft_")"
echo "ok: a cut host ended the launch, a flap changed nothing"
