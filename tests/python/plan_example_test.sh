#!/usr/bin/env bash
# A plan of `sparq plan` in PyTorch: sparq.dlrm.plan_settings gives the plan
# file's codecs, collective, fusion (DDP's bucket size) and threads, and
# refuses a plan for another model, rank count, global batch or placement,
# or a file that is no plan, saying which; examples/dlrm_ddp.py --plan trains
# with them on 2 processes, and refuses a planned setting also given.
#   plan_example_test.sh SPARQ PYTHON MPIEXEC
set -uo pipefail
sparq=$1 py=$2 mpiexec=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MASTER_ADDR=127.0.0.1 GLOO_SOCKET_IFNAME=lo
MODEL=(--arch-embedding-size 2000 --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 256)

"$sparq" gen-data --format bin --out "$D/data" --num-samples 8192 --num-test 1024 --cardinalities 2000 > /dev/null \
  2> "$D/err" || fail "gen-data: $(cat "$D/err")"
"$sparq" plan --data-path "$D/data" "${MODEL[@]}" --hosts 2 --net 1gbit,50us --steps 4 --threads-choices 1 \
  --out "$D/plan.json" > "$D/out" 2> "$D/err" || fail "plan: $(cat "$D/err")"
"$py" - "$D" <<'PY' || fail "plan_settings"
import json, sys
from sparq.dlrm import plan_model, plan_settings
d = sys.argv[1]
model = plan_model([13, 64, 16], [367, 64, 1], 16, [2000] * 26)
s = plan_settings(f"{d}/plan.json", model=model, ranks=2, global_batch=256)
plan = json.load(open(f"{d}/plan.json"))
f = plan["flags"]
assert plan["model"] == model, (plan["model"], model)
assert s == {"hook": f["dp-codec"], "allreduce": f["dp-allreduce"],
             "emb_codec": f["emb-codec-fwd"] + "/" + f["emb-codec-bwd"],
             "bucket_cap_mb": {"0": 0, "1MiB": 1, "4MiB": 4}[f["fuse-bytes"]], "threads": int(f["threads"]),
             "mlp_precision": f["mlp-precision"]}, s
def refused(words, path=f"{d}/plan.json", **kw):
    args = dict(model=model, ranks=2, global_batch=256) | kw
    try:
        plan_settings(path, **args)
    except ValueError as e:
        assert words in str(e), (words, str(e))
        print("ok: refused:", e)
        return
    raise AssertionError(f"not refused: {words}")
refused("a plan for ranks 2, this run has 4", ranks=4)
refused("a plan for global batch 256, this run has 512", global_batch=512)
refused("a plan for model", model=plan_model([13, 64, 16], [367, 64, 1], 16, [1000] * 26))
json.dump(dict(plan, flags=dict(f, **{"emb-placement": "replicated"})), open(f"{d}/replicated.json", "w"))
refused("places the tables replicated", f"{d}/replicated.json")
json.dump(dict(plan, flags=dict(f, **{"mp-splits": "bot:2", "micro-batches": "2"})), open(f"{d}/hybrid.json", "w"))
refused("the plan is hybrid (--mp-splits bot:2)", f"{d}/hybrid.json")
json.dump(dict(plan, flags=dict(f, **{"dp-mode": "ps"})), open(f"{d}/ps.json", "w"))
refused("the plan is a parameter server", f"{d}/ps.json")
open(f"{d}/garbage.json", "w").write("{not json")
refused("not a plan file of sparq plan", f"{d}/garbage.json")
print("ok: plan_settings", s)
PY

port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MASTER_PORT=$port "$mpiexec" -n 2 --oversubscribe --bind-to none -x MASTER_ADDR -x MASTER_PORT -x GLOO_SOCKET_IFNAME \
  "$py" "$root/examples/dlrm_ddp.py" --data-path "$D/data" "${MODEL[@]}" --num-batches 6 --print-freq 3 \
  --plan "$D/plan.json" > "$D/out" 2> "$D/err" || fail "dlrm_ddp.py --plan: $(tail -5 "$D/err")"
want=$("$py" -c 'import json, sys; f = json.load(open(sys.argv[1]))["flags"]
print("hook %s (%s), emb-codec %s/%s" % (f["dp-codec"], f["dp-allreduce"], f["emb-codec-fwd"], f["emb-codec-bwd"]))' \
  "$D/plan.json")
grep -qF "dlrm_ddp: plan $D/plan.json: $want," "$D/out" || fail "not the plan's settings ($want): $(head -3 "$D/out")"
grep -q "^Finished training it 6/6" "$D/out" || fail "did not train: $(cat "$D/out")"
echo "ok: dlrm_ddp.py --plan: $want"
"$py" "$root/examples/dlrm_ddp.py" --data-path "$D/data" "${MODEL[@]}" --plan "$D/plan.json" --hook none \
  > /dev/null 2> "$D/err" && fail "--plan with --hook must fail"
grep -q -- "--plan sets --hook: give one or the other" "$D/err" || fail "--plan with --hook: $(tail -3 "$D/err")"
echo "ok: $(tail -1 "$D/err")"
