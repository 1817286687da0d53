#!/usr/bin/env bash
# torchrun --max-restarts with examples/dlrm_ddp.py --resume auto: on 2
# ranks saving every 10 steps, rank 1 is killed at step 25 of the first
# attempt; torchrun starts both again, they resume from step 20's checkpoint
# (the newest that reads whole) and end with the same model, byte for byte,
# as an uninterrupted run started from that checkpoint with --load-sparq.
# A newer damaged checkpoint is skipped, naming why; flags that cannot work
# are one-line errors.
#   torchrun_resume_test.sh SPARQ PYTHON
set -euo pipefail
sparq=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GLOO_SOCKET_IFNAME=lo
"$sparq" gen-data --format bin --num-samples 16384 --num-test 1024 --cardinalities 1000 --out "$tmp" > /dev/null
flags=(--data-path "$tmp" --arch-embedding-size 1000 --mini-batch-size 256 --print-freq 64
       --hook dct:0.98,1000 --emb-codec q4/q2 --timeout 60)
torchrun=("$py" -m torch.distributed.run --standalone --nproc-per-node 2)
fail=0
check() {  # check WHAT COMMAND...: the command must succeed
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

"${torchrun[@]}" --max-restarts 1 "$here/dies_once.py" 1 25 "${flags[@]}" --save "$tmp/ck/{step}" --save-every 10 \
  --resume auto > "$tmp/restarted.log" 2>&1 || { grep -v "^\[rank.\]:  " "$tmp/restarted.log" | tail -40; echo "FAIL the restarted job failed"; exit 1; }
check "the first attempt starts from the initial model" grep -q "no checkpoint '$tmp/ck/{step}' reads whole" "$tmp/restarted.log"
check "torchrun saw rank 1 killed" grep -q "exitcode: -9) local_rank: 1" "$tmp/restarted.log"
check "the second attempt resumes from step 20" grep -q "resuming from $tmp/ck/20 at step 20 on 2 ranks" "$tmp/restarted.log"
check "the restarted job saved its end" test -f "$tmp/ck/64"

"${torchrun[@]}" "$root/examples/dlrm_ddp.py" "${flags[@]}" --load-sparq "$tmp/ck/20" --save "$tmp/reference.ck" \
  > "$tmp/reference.log" 2>&1 || { cat "$tmp/reference.log"; echo "FAIL the reference run failed"; exit 1; }
check "the restarted model equals the reference resumed from step 20, byte for byte" cmp "$tmp/ck/64" "$tmp/reference.ck"

# The newest checkpoint damaged (cut short, as by a full disk without the
# atomic rename): the one before it is taken, and the skip says why.
mkdir "$tmp/b"
cp "$tmp/ck/20" "$tmp/b/20"
head -c 4096 "$tmp/ck/30" > "$tmp/b/30"
cp "$tmp/ck/40" "$tmp/b/40.tmp"
"$py" - "$tmp/b" > "$tmp/newest.log" << 'PY' || fail=1
import sys
from sparq.dlrm import newest_checkpoint
folder = sys.argv[1]
path, notes = newest_checkpoint(folder + "/{step}")
want = [f"{folder}/30: skipped (checksum mismatch: the checkpoint is corrupt or truncated)"]
if path != f"{folder}/20" or notes != want:
    sys.exit(f"FAIL newest_checkpoint: {path}, {notes}")
if newest_checkpoint(folder + "/none-{step}") != (None, []):
    sys.exit("FAIL newest_checkpoint of a pattern no file matches")
print("ok   a damaged newest checkpoint is skipped, saying why; '.tmp' files are no checkpoints")
PY
cat "$tmp/newest.log"

for bad in "--save-every 10 --save $tmp/x.ck" "--resume auto" "--resume auto --save $tmp/c/{step} --load-sparq $tmp/ck/20"; do
  if out=$("$py" "$root/examples/dlrm_ddp.py" --data-path "$tmp" $bad 2>&1); then
    echo "FAIL dlrm_ddp.py $bad: exit code 0"; fail=1
  elif [[ $(wc -l <<< "$out") -ne 1 ]]; then
    echo "FAIL dlrm_ddp.py $bad: not a one-line error: $out"; fail=1
  else
    echo "ok   dlrm_ddp.py $bad: $out"
  fi
done
exit $fail
