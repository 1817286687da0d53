#!/usr/bin/env bash
# End-to-end checks of `sparq gen-data`, `convert` and `train` (small sizes):
# determinism by seed, TSV == binary, file:line errors and --skip-bad-lines,
# missing files, bitwise checkpoint resume, and data-parallel runs.
#   tests/data/cli_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$SPARQ" "$@" > "$D/out" 2> "$D/err"; }

run gen-data --out "$D/a" --num-samples 3000 --num-test 1000 --seed 7 || fail "gen-data: $(cat "$D/err")"
grep -q "teacher test loss" "$D/out" || fail "gen-data prints the teacher's score"
run gen-data --out "$D/b" --num-samples 3000 --num-test 1000 --seed 7 --threads 1 || fail "gen-data again"
cmp -s "$D/a/train.tsv" "$D/b/train.tsv" || fail "same seed (any thread count) must give the same data"
[ "$(wc -l < "$D/a/train.tsv")" -eq 3000 ] || fail "3000 lines"

run convert "$D/a/train.tsv" -o "$D/train.bin" || fail "convert: $(cat "$D/err")"
run convert --scan "$D/a/train.tsv" "$D/train.bin" || fail "scan"
[ "$(grep -o 'checksum [0-9.e+]*' "$D/out" | sort -u | wc -l)" -eq 1 ] || fail "TSV and binary must hold the same records"

# A malformed line: error naming file:line, exit 1; skipped and counted with the flag.
sed '17s/^\([01]\)\t[^\t]*\t/\1\t12x\t/' "$D/a/train.tsv" > "$D/bad.tsv"
run convert "$D/bad.tsv" -o "$D/bad.bin" && fail "bad line must fail"
grep -q "bad.tsv:17: malformed line" "$D/err" || fail "error names file:line: $(cat "$D/err")"
run convert "$D/bad.tsv" -o "$D/bad.bin" --skip-bad-lines || fail "skip-bad-lines"
grep -q "skipped 1 bad lines" "$D/out" || fail "skipped count printed"
run train --data-path "$D/bad.tsv" --num-batches 1 && fail "train on a bad file must fail"
grep -q "bad.tsv:17:" "$D/err" || fail "train error names file:line"
run train --data-path "$D/nope.tsv" && fail "missing file must fail"
[ "$(wc -l < "$D/err")" -eq 1 ] || fail "one-line error: $(cat "$D/err")"

# The GEMM kernels: oneDNN's, generated for the CPU; with SPARQ_GEMM=openblas,
# OpenBLAS's widest for the CPU whatever OPENBLAS_CORETYPE says, unless
# SPARQ_KEEP_BLAS_CORE=1.
tiny=(--data-path "$D/a" --arch-embedding-size 100 --arch-mlp-bot 13-16 --arch-mlp-top 8-1 --num-batches 1)
run train "${tiny[@]}" || fail "train: $(cat "$D/err")"
grep -q "^gemm: oneDNN [0-9.]* sgemm, [a-z0-9_]* kernels" "$D/out" || fail "default gemm: $(grep gemm "$D/out")"
SPARQ_GEMM=mkl run train "${tiny[@]}" && fail "an unknown SPARQ_GEMM must fail"
grep -q "SPARQ_GEMM=mkl: expected onednn or openblas" "$D/err" || fail "SPARQ_GEMM error: $(cat "$D/err")"
export SPARQ_GEMM=openblas
OPENBLAS_CORETYPE=Prescott run train "${tiny[@]}" || fail "train with Prescott: $(cat "$D/err")"
if grep -q avx2 /proc/cpuinfo && grep -q fma /proc/cpuinfo; then
  grep -q "^gemm: OpenBLAS core .* (chosen by sparq for this CPU; it had Prescott from OPENBLAS_CORETYPE=Prescott), by SPARQ_GEMM=openblas" "$D/out" ||
    fail "an AVX2 CPU must not run Prescott kernels: $(grep gemm "$D/out")"
fi
OPENBLAS_CORETYPE=Prescott SPARQ_KEEP_BLAS_CORE=1 run train "${tiny[@]}" || fail "train keeping Prescott"
grep -q "^gemm: OpenBLAS core Prescott (from OPENBLAS_CORETYPE=Prescott" "$D/out" || fail "kept: $(grep gemm "$D/out")"
unset SPARQ_GEMM
# bf16 MLPs: named in the start-up line where the CPU has AVX512_BF16,
# refused with the reason where it has not; an unknown precision is refused.
if grep -qw avx512_bf16 /proc/cpuinfo; then
  run train "${tiny[@]}" --mlp-precision bf16 || fail "bf16 train: $(cat "$D/err")"
  grep -q "^gemm: MLPs in bf16 on oneDNN [0-9.]* matmul (bf16 operands, fp32 accumulation); fp32: oneDNN" "$D/out" ||
    fail "bf16 gemm line: $(grep gemm "$D/out")"
else
  run train "${tiny[@]}" --mlp-precision bf16 && fail "bf16 without AVX512_BF16 must be refused"
  grep -q "bf16 MLPs cannot run here: this CPU has no AVX512_BF16" "$D/err" || fail "bf16 refusal: $(cat "$D/err")"
fi
run train "${tiny[@]}" --mlp-precision fp16 && fail "--mlp-precision fp16 must be refused"
grep -q -- "--mlp-precision" "$D/err" || fail "names the flag: $(cat "$D/err")"

# Training output and metrics; resume from a checkpoint is bitwise.
common=(--data-path "$D/a" --arch-embedding-size 1000 --arch-mlp-bot 13-32-16 --arch-mlp-top 32-1
        --mini-batch-size 64 --print-freq 10 --num-batches 20)
run train "${common[@]}" --nepochs 2 --metrics "$D/m.jsonl" --save "$D/full.ck" || fail "train: $(cat "$D/err")"
grep -q "^Finished training it 20/20 of epoch 1, .* ms/it, loss [0-9.]*, accuracy [0-9.]* %, .* samples/s (.*), eta 0s$" \
  "$D/out" || fail "training line: $(grep Finished "$D/out")"
grep -q "^Finished training it 10/20 of epoch 0, .*, eta [0-9]*s$" "$D/out" || fail "ETA: $(grep Finished "$D/out")"
grep -q "^Testing at - 20/20 of epoch 1, loss .*, accuracy .* %, auc " "$D/out" || fail "testing line"
grep -q '"event":"test"' "$D/m.jsonl" || fail "metrics JSON lines"
# Every event carries the seconds since training started, and the same less testing.
[ "$(grep -c '"wall_s":' "$D/m.jsonl")" -eq "$(wc -l < "$D/m.jsonl")" ] || fail "wall_s on every event"
[ "$(grep -c '"train_s":' "$D/m.jsonl")" -eq "$(wc -l < "$D/m.jsonl")" ] || fail "train_s on every event"
# --target-loss / --target-auc: the first test that reaches it ends training
# (on every rank) and says when; a target never reached is said too.
field() { echo "$2" | grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }  # FIELD JSON
# Each rank count against its own first test loss (two ranks sum their
# gradients in another order than one, so the two may differ in the last bits).
for ranks in 1 2; do
  run train "${common[@]}" --test-freq 5 --ranks $ranks --metrics "$D/t.jsonl" || fail "test-freq run: $(cat "$D/err")"
  first_test=$(grep -m1 '"event":"test"' "$D/t.jsonl")
  target5=$(field loss "$first_test")
  [ $ranks = 1 ] && auc5=$(field auc "$first_test")
  run train "${common[@]}" --nepochs 2 --test-freq 5 --ranks $ranks --target-loss "$target5" --metrics "$D/tl.jsonl" ||
    fail "target loss: $(cat "$D/err")"
  grep -q "^target reached: test loss .* <= .* at step 5 (epoch 0, it 5/20): .* s of training" "$D/out" ||
    fail "target loss reached at the first test ($ranks ranks): $(cat "$D/out")"
  grep -q "epoch 1" "$D/out" && fail "training must stop at the target"
  grep -q '"event":"target"' "$D/tl.jsonl" || fail "target event in the metrics"
done
run train "${common[@]}" --test-freq 5 --target-auc "$auc5" || fail "target auc: $(cat "$D/err")"
grep -q "^target reached: test auc .* >= .* at step 5 " "$D/out" || fail "target auc reached: $(cat "$D/out")"
run train "${common[@]}" --test-freq 5 --target-loss 0.0001 || fail "unreached target: $(cat "$D/err")"
grep -q "^target not reached: test loss <= 0.0001 after 20 steps" "$D/out" || fail "unreached target said: $(cat "$D/out")"
run train "${common[@]}" --test-freq -1 || fail "--test-freq -1: $(cat "$D/err")"
grep -q "^Testing" "$D/out" && fail "--test-freq -1 never tests, as the reference"
run train "${common[@]}" --test-freq -1 --target-auc 0.6 && fail "a target needs tests"
[ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "never tests" "$D/err" || fail "target without tests: $(cat "$D/err")"
run train --data-path "$D/a" --arch-embedding-size 1000 --arch-mlp-bot 13-32-16 --arch-mlp-top 32-1 --num-batches 1 \
  --max-ind-range 300 || fail "--max-ind-range: $(cat "$D/err")"
grep -q "(.* dense parameters, 7800 embedding rows)" "$D/out" || fail "--max-ind-range caps 26 tables at 300 rows"
run train "${common[@]}" --ranks 0 && fail "--ranks 0 must fail"
[ "$(cat "$D/err")" = "sparq: error: --ranks: must be a positive number, got 0 (see --help)" ] || fail "--ranks 0: $(cat "$D/err")"
run train --data-path "$D/a/train.tsv" --num-batches 2 --target-loss 0.5 && fail "a target needs test samples"
[ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "no test samples" "$D/err" || fail "target without tests: $(cat "$D/err")"
run train "${common[@]}" --nepochs 1 --save "$D/half.ck" || fail "train half"
run train "${common[@]}" --nepochs 2 --load "$D/half.ck" --save "$D/resumed.ck" || fail "resume: $(cat "$D/err")"
cmp -s "$D/full.ck" "$D/resumed.ck" || fail "resumed run must equal the uninterrupted one bitwise"
# --stream (background parser + shuffle buffer) resumes bitwise too.
st=(--data-path "$D/a/train.tsv" --test-data-path "$D/a/test.tsv" --stream --shuffle-buffer 500
    --arch-embedding-size 1000 --arch-mlp-bot 13-32-16 --arch-mlp-top 32-1 --mini-batch-size 64 --print-freq 10)
run train "${st[@]}" --num-batches 30 --save "$D/s_full.ck" || fail "stream: $(cat "$D/err")"
run train "${st[@]}" --num-batches 12 --save "$D/s_half.ck" || fail "stream half"
run train "${st[@]}" --num-batches 30 --load "$D/s_half.ck" --save "$D/s_res.ck" || fail "stream resume"
cmp -s "$D/s_full.ck" "$D/s_res.ck" || fail "streamed resume must equal the uninterrupted run bitwise"

# Data parallel on 2 in-process ranks: table-wise embeddings with quantized
# alltoalls end with the accounting table and resume bitwise (the table
# owners' rows are gathered into the checkpoint); bad flags are one-line errors.
dp=("${common[@]}" --ranks 2 --emb-placement table-wise --emb-codec-fwd q4 --emb-codec-bwd q2)
run train "${dp[@]}" --nepochs 2 --save "$D/dp_full.ck" || fail "table-wise: $(cat "$D/err")"
grep -q "^  emb_fwd " "$D/out" && grep -q "^  emb_bwd " "$D/out" && grep -q "^   W_grad " "$D/out" ||
  fail "accounting table: $(cat "$D/out")"
# The communication thread's priority: raised by default, or said why not.
grep -q "^communication thread: nice -10$" "$D/out" || grep -q "communication thread runs at the default priority: nice -10 not permitted" "$D/err" ||
  fail "communication thread priority: $(cat "$D/out" "$D/err")"
run train "${dp[@]}" --nepochs 1 --save "$D/dp_half.ck" || fail "table-wise half"
run train "${dp[@]}" --nepochs 2 --load "$D/dp_half.ck" --save "$D/dp_res.ck" || fail "table-wise resume"
cmp -s "$D/dp_full.ck" "$D/dp_res.ck" || fail "table-wise resume must equal the uninterrupted run bitwise"
# Low-precision sparse-stream values keep the replicas identical (checked every
# step) and send fewer W_grad bytes than fp32 values.
wratio() { awk '$1 == "W_grad" { sub("x", "", $5); print $5 }' "$D/out"; }
run train "${common[@]}" --ranks 2 --dp-codec dct:0.9,10 --verify-freq 1 || fail "dct fp32: $(cat "$D/err")"
r32=$(wratio)
run train "${common[@]}" --ranks 2 --dp-codec dct:0.9,10+fp8 --verify-freq 1 || fail "dct fp8: $(cat "$D/err")"
awk -v a="$(wratio)" -v b="$r32" 'BEGIN { exit !(a > b) }' || fail "fp8 W_grad ratio $(wratio) not above fp32's $r32"
# The ring's error compensation as the paper prints it (none on a chunk's
# first hop) trains with identical replicas and is named as given; with
# recursive doubling, or misspelt, it is a one-line error listing the codecs.
run train "${common[@]}" --ranks 2 --dp-codec q4+ec-skip-first --verify-freq 1 || fail "q4+ec-skip-first: $(cat "$D/err")"
grep -q -- "--dp-codec q4+ec-skip-first" "$D/out" || fail "codec named: $(cat "$D/out")"
run train "${common[@]}" --ranks 2 --dp-codec q4+ec-skip && fail "q4+ec-skip must fail"
[ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "q8, q4, q2 with optional +ec or +ec-skip-first" "$D/err" ||
  fail "misspelt codec: one line listing the codecs: $(cat "$D/err")"
# Model and hybrid parallel: 3 stages, and 2 replicas x 2 stages with DCT-MP
# and DCT-DP, end with per-rank busy/idle lines and the accounting of every entity.
run train "${common[@]}" --ranks 3 --mp-splits bot:1,top:1 \
  --micro-batches 4 || fail "model parallel: $(cat "$D/err")"
grep -q "^rank 2 (replica 0, stage 2): busy" "$D/out" && grep -q "^    X_act " "$D/out" || fail "MP report: $(cat "$D/out")"
# Model-parallel checkpoints hold the whole model and resume bitwise.
mpr=("${common[@]}" --ranks 2 --mp-splits bot:1 --micro-batches 3)
run train "${mpr[@]}" --nepochs 2 --save "$D/mp_full.ck" || fail "MP save: $(cat "$D/err")"
run train "${mpr[@]}" --nepochs 1 --save "$D/mp_half.ck" || fail "MP half"
run train "${mpr[@]}" --nepochs 2 --load "$D/mp_half.ck" --save "$D/mp_res.ck" || fail "MP resume: $(cat "$D/err")"
cmp -s "$D/mp_full.ck" "$D/mp_res.ck" || fail "model-parallel resume must equal the uninterrupted run bitwise"
run train "${common[@]}" --nepochs 2 --load "$D/mp_half.ck" || fail "a model-parallel checkpoint loads on one rank"
run train "${common[@]}" --ranks 4 --mp-splits bot:1 --mp-codec dct:0.9 \
  --dp-codec dct:0.99,100 || fail "hybrid: $(cat "$D/err")"
for e in X_act X_grad W_grad emb_grad; do grep -q "^ *$e " "$D/out" || fail "hybrid accounting lacks $e"; done
grep -q "^ *emb_grad: fp32_bytes = an allgather of every rank's touched rows" "$D/out" ||
  fail "the accounting names emb_grad's baseline: $(cat "$D/out")"
# Hybrid with the tables spread over the replicas: alltoalls instead of a
# table gradient average, and a checkpointed run resumes bitwise.
hyt=("${common[@]}" --ranks 4 --mp-splits bot:1 --micro-batches 2 --emb-placement table-wise --emb-codec-fwd q4)
run train "${hyt[@]}" --nepochs 2 --save "$D/hyt_full.ck" || fail "hybrid table-wise: $(cat "$D/err")"
for e in X_act X_grad W_grad emb_fwd emb_bwd; do grep -q "^ *$e " "$D/out" || fail "hybrid table-wise lacks $e"; done
grep -q "^ *emb_grad " "$D/out" && fail "hybrid table-wise averages no table gradient"
run train "${hyt[@]}" --nepochs 1 --save "$D/hyt_half.ck" || fail "hybrid table-wise half"
run train "${hyt[@]}" --nepochs 2 --load "$D/hyt_half.ck" --save "$D/hyt_res.ck" || fail "hybrid table-wise resume"
cmp -s "$D/hyt_full.ck" "$D/hyt_res.ck" || fail "hybrid table-wise resume must equal the uninterrupted run bitwise"
# Parameter server: 2 workers + 1 server train and report; a worker that dies
# mid-run ends the job with an error naming the silent workers, within the timeout.
run train "${common[@]}" --ranks 3 --dp-mode ps --servers 1 --max-staleness 1 --dp-codec dct:0.9,10 --save "$D/ps.ck" ||
  fail "parameter server: $(cat "$D/err")"
grep -q "^     pull " "$D/out" && [ -s "$D/ps.ck" ] || fail "PS report and checkpoint: $(cat "$D/out")"
run train "${common[@]}" --ranks 3 --dp-mode ps --servers 1 --fail-at 1:5 --timeout 2 && fail "a dead worker must fail the job"
# The server notices the silence, or worker 0 its unanswered pull, whichever times out first.
grep -Eq "error: .*(parameter server 0: no message from workers|waiting to receive from rank 2)" "$D/err" ||
  fail "dead worker error: $(cat "$D/err")"
for bad in "--emb-placement row-wise" "--emb-codec-fwd q4" "--ranks 2 --emb-placement table-wise --emb-codec-bwd q3" \
           "--dp-codec dct:0.9,10 --dp-allreduce ring" "--ranks 2 --dp-codec q4+ec-skip-first --dp-allreduce recursive-doubling" \
           "--fuse-bytes 12parsecs" "--mp-splits bot:9" \
           "--ranks 3 --mp-splits bot:1" "--mp-codec dct:0.9" "--ranks 2 --mp-splits bot:1 --mp-codec sketch:1.5" \
           "--ranks 2 --mp-splits bot:1 --dp-codec q4" "--dp-codec q4+fp8" "--dp-codec dct:0.9,10+bf16 --dp-allreduce dense" \
           "--dp-mode gossip" "--ranks 2 --dp-mode ps --servers 2" "--ranks 3 --dp-mode ps --dp-codec q4" \
           "--servers 2" "--max-staleness 3" "--mp-threshold-eta 0.9" "--ranks 2 --mp-splits bot:1 --dp-allreduce ring" \
           "--ranks 2 --mp-splits bot:1 --emb-placement table-wise" "--num-test 10" "--zipf 1.3" \
           "--target-loss -1" "--target-auc 2" "--ranks 2 --comm-nice 5" "--comm-nice -5" "--ranks 2 --mp-splits bot:1 --comm-nice -5" \
           "--ranks 3 --dp-mode ps --comm-nice -5"; do
  # shellcheck disable=SC2086
  run train "${common[@]}" $bad && fail "'$bad' must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "error" "$D/err" || fail "'$bad': one-line error: $(cat "$D/err")"
done
# Dense Adagrad/Adam with the reference's LR schedule: data-parallel replicas
# and hybrid stages stay identical (checked every step), and a resumed run
# equals the uninterrupted one bitwise (the schedule and Adam's bias
# correction continue from the checkpoint's step; a stage's slice of the dense
# state travels with its parameters). Bad schedule flags are one-line errors.
sch=(--learning-rate 0.01 --lr-num-warmup-steps 5 --lr-decay-start-step 15 --lr-num-decay-steps 20 --verify-freq 1)
for mode in "--optimizer adam" "--optimizer adam --ranks 2 --emb-placement table-wise --embedding-optimizer rowwise-adagrad" \
            "--optimizer adagrad --ranks 3 --mp-splits bot:1,top:1 --micro-batches 2" \
            "--optimizer adam --ranks 4 --mp-splits bot:1 --embedding-optimizer rowwise-adagrad"; do
  # shellcheck disable=SC2086
  { run train "${common[@]}" "${sch[@]}" $mode --nepochs 2 --save "$D/o_full.ck" &&
    run train "${common[@]}" "${sch[@]}" $mode --nepochs 1 --save "$D/o_half.ck" &&
    run train "${common[@]}" "${sch[@]}" $mode --nepochs 2 --load "$D/o_half.ck" --save "$D/o_res.ck"; } ||
    fail "'$mode': $(cat "$D/err")"
  cmp -s "$D/o_full.ck" "$D/o_res.ck" || fail "'$mode': resumed run must equal the uninterrupted one bitwise"
done
grep -q "^model: .*lr 0.01 (linear warmup over updates 1..4, quadratic decay over updates 15..34), optimizer adam," \
  "$D/out" || fail "model line names the schedule and optimizer: $(grep model: "$D/out")"
run train "${common[@]}" --load "$D/o_full.ck" && fail "a checkpoint of another --optimizer must not load"
grep -q "saved with --optimizer adam" "$D/err" || fail "optimizer mismatch error: $(cat "$D/err")"
for bad in "--optimizer rmsprop" "--lr-num-decay-steps -3" "--lr-num-warmup-steps 10 --lr-decay-start-step 5 --lr-num-decay-steps 3" \
           "--lr-decay-start-step 5" "--ranks 3 --dp-mode ps --optimizer adam" "--ranks 3 --dp-mode ps --lr-num-warmup-steps 4"; do
  # shellcheck disable=SC2086
  run train "${common[@]}" $bad && fail "'$bad' must fail"
  [ "$(wc -l < "$D/err")" -eq 1 ] && grep -q "error" "$D/err" || fail "'$bad': one-line error: $(cat "$D/err")"
done
echo "cli_test: all passed"
