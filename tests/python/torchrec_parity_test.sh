#!/usr/bin/env bash
# examples/torchrec_dlrm.py (TorchRec's DLRM: tables sharded table-wise by
# DistributedModelParallel, FBGEMM's fused SGD, the dense part under DDP)
# tracks `sparq train --emb-placement table-wise` on the same data from the
# same checkpoint: after 50 steps on 2 ranks under torchrun the printed
# training loss (the global batch's, averaged over the last 49 steps) agrees
# within 3e-5 in fp32 and with sparq's q4/q2 codecs in TorchRec's alltoall and
# DCT-DP as the DDP hook; within 1e-4 with the q4+ec hook, whose rows of 512
# values group other values in TorchRec's model: its top MLP's first layer
# holds its columns in TorchRec's order of the interaction's pairs.
#   torchrec_parity_test.sh SPARQ PYTHON
set -euo pipefail
sparq=$1 py=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GLOO_SOCKET_IFNAME=lo

"$sparq" gen-data --format bin --num-samples 16384 --num-test 2048 --cardinalities 1000 --out "$tmp" > /dev/null
common=(--data-path "$tmp" --arch-embedding-size 1000 --mini-batch-size 256 --no-shuffle --num-batches 51 --print-freq 50)
# The starting point both load: the initial model after one step at rate 0.
"$sparq" train "${common[@]:0:7}" --num-batches 1 --learning-rate 0 --save "$tmp/init.ck" > /dev/null
loss_at_50() { grep -o 'Finished training it 50/.*' | grep -o 'loss [0-9.]*' | cut -d' ' -f2; }
fail=0
# sparq train's --dp-codec, --emb-codec-fwd/bwd; torchrec_dlrm.py's --hook, --sparq-emb
for cfg in "none fp32 fp32 none none 3e-5" "dct:0.98,1000 q4 q2 dct:0.98,1000 q4/q2 3e-5" "q4+ec fp32 fp32 q4+ec none 1e-4"; do
  set -- $cfg
  tol=$6
  a=$("$sparq" train "${common[@]}" --ranks 2 --emb-placement table-wise --emb-row-len 16 --load "$tmp/init.ck" \
        --dp-codec "$1" --emb-codec-fwd "$2" --emb-codec-bwd "$3" | loss_at_50)
  # --standalone: the rendezvous binds a port the kernel picks (no probe another test could take first).
  # No retry: a failed start or an abort at the exit is a failure (docs/reliability.md, "A rank's exit").
  "$py" -m torch.distributed.run --standalone --nproc-per-node 2 "$root/examples/torchrec_dlrm.py" \
    "${common[@]}" --load-sparq "$tmp/init.ck" --hook "$4" --sparq-emb "$5" > "$tmp/out" 2> "$tmp/err" ||
    { cat "$tmp/out" "$tmp/err"; exit 1; }
  b=$(loss_at_50 < "$tmp/out")
  if "$py" -c 'import sys; a, b, tol = map(float, sys.argv[1:]); sys.exit(abs(a - b) > tol)' "$a" "$b" "$tol"; then
    echo "ok   $cfg: sparq train $a, torchrec_dlrm.py $b"
  else
    echo "FAIL $cfg: sparq train '$a', torchrec_dlrm.py '$b' (more than $tol apart)"
    fail=1
  fi
done
exit $fail
