#!/usr/bin/env bash
# A plan of `sparq plan` in PyTorch: sparq.plan() runs the planner for the
# PyTorch examples (data parallel, table-wise: `sparq plan --for pytorch`)
# and says why where it cannot plan; Plan.settings gives the plan file's
# codecs, collective, threads and MLP precision, and refuses a
# plan for another model, rank count, global batch or placement, or a file
# that is no plan, saying which; examples/dlrm_ddp.py --plan and
# examples/torchrec_dlrm.py --plan train with them on 2 processes (TorchRec's
# tables on the ranks of the plan's table-wise placement, sparq's rule, not
# TorchRec's planner's, in FBGEMM's fused kernel as TorchRec's planner would
# have them), and refuse a planned setting also given.
#   plan_example_test.sh SPARQ PYTHON MPIEXEC
set -uo pipefail
sparq=$1 py=$2 mpiexec=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MASTER_ADDR=127.0.0.1 GLOO_SOCKET_IFNAME=lo
# Tables of unequal rows: sparq's placement (largest first to the least
# loaded rank) is then no plain round robin.
SIZES=(2000 1900 1800 1700 1600 1500 1400 1300 1200 1100 1000 900 800 700 600 500 400 300 200 100 90 80 70 60 50 40)
ROWS=$(IFS=-; echo "${SIZES[*]}")
MODEL=(--arch-embedding-size "$ROWS" --arch-mlp-bot 13-64-16 --arch-mlp-top 64-1 --mini-batch-size 256)

"$sparq" gen-data --format bin --out "$D/data" --num-samples 8192 --num-test 1024 --cardinalities 2000 > /dev/null \
  2> "$D/err" || fail "gen-data: $(cat "$D/err")"
SPARQ_CLI=$sparq "$py" - "$D" "$ROWS" <<'PY' || fail "sparq.plan and Plan.settings"
import json, sys
import sparq
from sparq.dlrm import assign_tables
from sparq.planner import Plan, plan_model
d, rows = sys.argv[1], [int(r) for r in sys.argv[2].split("-")]
p = sparq.plan(f"{d}/data", hosts=2, net="1gbit,50us", mini_batch_size=256, out=f"{d}/plan.json",
               arch_embedding_size=sys.argv[2], arch_mlp_bot="13-64-16", arch_mlp_top="64-1", steps=4,
               threads_choices="1")
assert "(--for pytorch)" in p.table and "chosen: table-wise" in p.table, p.table[-600:]
assert p.flags["emb-placement"] == "table-wise" and p.flags["mp-splits"] == "" and p.modelled_ms > 0, p.flags
assert p.flags["fuse-bytes"] == "4MiB", p.flags  # DDP's buckets, as the examples keep them
assert p.table_owners(rows) == assign_tables(rows, 2) != [t % 2 for t in range(26)], p.table_owners(rows)
try:
    sparq.plan(f"{d}/data", hosts=2, net="1gbit,50us", mini_batch_size=256, out=f"{d}/no.json", max_loss_change=-1)
    raise AssertionError("a negative budget planned")
except ValueError as e:
    assert str(e).startswith("sparq: error: --max-loss-change must be >= 0"), e
    print("ok: refused:", e)
model = plan_model([13, 64, 16], [367, 64, 1], 16, rows)
s = Plan(f"{d}/plan.json").settings(model=model, ranks=2, global_batch=256)
plan = json.load(open(f"{d}/plan.json"))
f = plan["flags"]
assert plan["model"] == model, (plan["model"], model)
assert s == {"hook": f["dp-codec"], "allreduce": f["dp-allreduce"],
             "emb_codec": f["emb-codec-fwd"] + "/" + f["emb-codec-bwd"], "threads": int(f["threads"]),
             "mlp_precision": f["mlp-precision"]}, s
def refused(words, path=f"{d}/plan.json", **kw):
    args = dict(model=model, ranks=2, global_batch=256) | kw
    try:
        Plan(path).settings(**args)
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
print("ok: Plan.settings", s)
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

# TorchRec's DLRM with the same plan: the hook, sparq's alltoall codecs and the plan's table-wise placement.
MASTER_PORT=$port "$mpiexec" -n 2 --oversubscribe --bind-to none -x MASTER_ADDR -x MASTER_PORT -x GLOO_SOCKET_IFNAME \
  "$py" "$root/examples/torchrec_dlrm.py" --data-path "$D/data" "${MODEL[@]}" --num-batches 6 --print-freq 3 \
  --plan "$D/plan.json" > "$D/out" 2> "$D/err" || fail "torchrec_dlrm.py --plan: $(tail -5 "$D/err")"
want=$("$py" - "$D/plan.json" "$ROWS" <<'PY'
import json, sys
from sparq.dlrm import assign_tables
f = json.load(open(sys.argv[1]))["flags"]
owners = assign_tables([int(r) for r in sys.argv[2].split("-")], 2)
emb = "none" if f["emb-codec-fwd"] == f["emb-codec-bwd"] == "fp32" else f["emb-codec-fwd"] + "/" + f["emb-codec-bwd"]
print("hook %s (%s), sparq-emb %s, threads %s, tables by rank %s, kernels ['fused']"
      % (f["dp-codec"], f["dp-allreduce"], emb, f["threads"], owners))
print([16 * owners.count(r) for r in range(2)])
PY
)
grep -qF "torchrec_dlrm: plan $D/plan.json: $(head -1 <<< "$want")" "$D/out" ||
  fail "not the plan's settings ($(head -1 <<< "$want")): $(head -3 "$D/out")"
grep -qF "tables table-wise ($(tail -1 <<< "$want") values per sample by rank)" "$D/out" ||
  fail "TorchRec's sharding is not the plan's placement ($(tail -1 <<< "$want")): $(grep ranks "$D/out")"
grep -q "^Finished training it 6/6" "$D/out" || fail "did not train: $(cat "$D/out")"
echo "ok: torchrec_dlrm.py --plan: $(head -1 <<< "$want")"
"$py" "$root/examples/torchrec_dlrm.py" --data-path "$D/data" "${MODEL[@]}" --plan "$D/plan.json" --sparq-emb q8/q8 \
  > /dev/null 2> "$D/err" && fail "--plan with --sparq-emb must fail"
grep -q -- "--plan sets --sparq-emb: give one or the other" "$D/err" || fail "--plan with --sparq-emb: $(tail -3 "$D/err")"
echo "ok: $(tail -1 "$D/err")"
