#!/bin/bash
# DCT-MP at 95%: test loss with the mask at test time (the trainer's own test) vs without (sparq predict on the saved model)
cd /tmp/mpx
S=${SPARQ:-build/sparq}
for seed in 1 2; do
  for eta in 0 0.95; do
    codec=none; [[ $eta == 0 ]] || codec=dct:$eta
    nice -n 19 $S train --data-path /tmp/zdata --arch-mlp-top 512-256-128-1 --mini-batch-size 256 --print-freq 4000 \
      --ranks 2 --mp-splits bot:2 --micro-batches 2 --mp-codec $codec --seed $seed --test-freq 0 \
      --save /tmp/mpx/ck_${eta}_s$seed > /tmp/mpx/train_${eta}_s$seed.log 2>&1
    nice -n 19 $S predict --load /tmp/mpx/ck_${eta}_s$seed --data-path /tmp/zdata/test.tsv --out /tmp/mpx/pred_${eta}_s$seed.txt > /dev/null 2>&1
    echo "done $eta $seed"
  done
done
