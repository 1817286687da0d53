#!/usr/bin/env bash
# A rank that dies under mpiexec must end the job with a non-zero exit and a
# message, well before any timeout (the survivors wait 5 minutes by default).
# usage: rank_death_test.sh MPIEXEC PROGRAM MODE
set -u
mpiexec=$1 prog=$2 mode=$3
out=$(timeout 120 "$mpiexec" -n 3 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$prog" "$mode" 2>&1)
rc=$?
echo "$out" | tail -n 20
[ "$rc" -ne 124 ] || { echo "FAIL: job hung (killed by timeout)"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: job exited 0"; exit 1; }
if [ "$mode" = throw ]; then
  grep -q "error on rank 1 of 3: planned failure" <<<"$out" || { echo "FAIL: no error message"; exit 1; }
fi
echo "ok: exit code $rc"
