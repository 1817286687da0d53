#!/usr/bin/env bash
# The 16-core node's weak scaling predicted on the virtual clock: P in-process
# ranks on an effectively infinite network, so the modelled step is each
# rank's own CPU time (one thread a rank, 1024 samples a rank), tables
# replicated (the default) or table-wise; 3 runs of 40 steps each, each run's
# modelled ms/step over its steps. From the project root:
#   docs/data/device/emulated-weak/run.sh > docs/data/device/emulated-weak/runs.txt
set -euo pipefail
for rep in 1 2 3; do
  for placement in replicated table-wise; do
    for p in 1 2 4 8 16; do
      line=$(build/sparq train --ranks $p --net 100000gbit,0us --data-generation random --num-batches 40 \
        --mini-batch-size $((1024 * p)) --threads 1 --emb-placement $placement 2>&1 | grep '^Finished' | tail -1)
      echo "run $rep $placement P=$p: ${line##*, }"
    done
  done
done
