#!/usr/bin/env bash
# A launcher that started N > 1 processes whose MPI world is one process each
# (sparq's Open MPI under MPICH's Hydra, or srun without PMI support) makes
# `sparq train` fail with one line naming the launcher and both numbers,
# instead of N independent trainings.
#   tests/tools/launch_mismatch_test.sh path/to/sparq
set -uo pipefail
SPARQ=$1
E=$(mktemp)
trap 'rm -f "$E"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
tiny=(train --data-generation synthetic --data-size 500 --num-test 100 --arch-embedding-size 100
      --arch-mlp-bot 13-16 --arch-mlp-top 8-1 --num-batches 2)
for launcher in "PMI_SIZE=2 PMI_RANK=0|MPICH/Hydra as 2 processes (PMI_SIZE=2), but MPI sees 1" \
                "SLURM_STEP_NUM_TASKS=3 SLURM_PROCID=0|Slurm as 3 processes (SLURM_STEP_NUM_TASKS=3), but MPI sees 1"; do
  vars=${launcher%%|*}
  want=${launcher#*|}
  env $vars "$SPARQ" "${tiny[@]}" > /dev/null 2> "$E"
  rc=$?
  [ "$rc" -eq 1 ] || fail "$vars: exit code $rc: $(cat "$E")"
  [ "$(wc -l < "$E")" -eq 1 ] && grep -qF "started by $want" "$E" || fail "$vars: $(cat "$E")"
done
# A Slurm batch script holds the allocation's SLURM_NTASKS but is no task of a
# step: in-process ranks run there.
SLURM_NTASKS=4 SLURM_PROCID=0 "$SPARQ" "${tiny[@]}" --ranks 2 > /dev/null 2> "$E" || fail "batch script: $(cat "$E")"
exit 0
