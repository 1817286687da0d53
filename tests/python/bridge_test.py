"""The PyTorch bridge on N processes (torch.distributed with gloo):
sparq.torch's hooks and alltoall against independent references (the
checks: host_codec_checks.py, device_codec_checks.py, torchrec_checks.py,
pipeline_checks.py). Run by
CTest as `bridge_test.py --nprocs N` (spawned processes: sparq's Gloo
transport), `bridge_test.py --nprocs N --torchrun` (ranks started by
torchrun: Gloo) and `bridge_test.py --nprocs N --mpiexec MPIEXEC` (ranks
started by mpiexec: sparq's MPI transport); `--cuda` runs the CUDA checks
instead, where torch has a CUDA device. Each check runs on every rank, and
the run fails if any rank fails. Under torchrun and mpiexec a second job
checks that a rank that dies ends the others. `--no-device-codecs` leaves
out the checks of sparq.gpu's codecs: CTest runs them on spawned ranks only.

Where torch has no CUDA device, sparq.gpu's kernels (quantized_alltoall's
codecs="device") run on CPU tensors under Triton's interpreter.
"""
import argparse
import datetime
import faulthandler
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
import warnings

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports Triton; the ranks inherit it
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")  # the interpreter's masked lanes
import torch.distributed as dist
import torch.multiprocessing as mp

import sparq.torch as st

import bridge_support
import host_codec_checks  # noqa: F401 - the checks register themselves on import, in this order
import non_finite_checks  # noqa: F401
import device_codec_checks  # noqa: F401
import pipeline_checks

try:
    import torchrec_checks
except ModuleNotFoundError as e:  # the GPU machine has none; --cuda needs none
    if e.name != "torchrec":
        raise
    torchrec_checks = None

CHECKS = bridge_support.CHECKS + (torchrec_checks.CHECKS if torchrec_checks else []) + pipeline_checks.CHECKS
CUDA_CHECKS = bridge_support.CUDA_CHECKS


def run_checks(rank, size, init_method, report, checks):
    # A rank a launcher ends (torchrun's SIGTERM when another failed) shows
    # where each of its threads was.
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # 300 s, not 60: after a check's last exchange each rank goes on alone
    # (the pipeline checks then train the unsplit reference on every rank),
    # and beside another test's ranks on 2 cores one rank of
    # python.bridge.torchrun.np3 reached the barrier after its peers had
    # waited 60 s for it (its check then passed). A hung sparq collective
    # still ends on the Comm's own timeout.
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))
    torch.set_num_threads(1)
    # While working on some: SPARQ_CHECKS=a,b runs the checks whose names or modules hold a or b.
    only = [w for w in os.environ.get("SPARQ_CHECKS", "").split(",") if w]
    for fn in [c for c in checks if not only or any(w in c.__module__ + "." + c.__name__ for w in only)]:
        try:
            fn(rank, size)
            print(f"[rank {rank}] ok   {fn.__name__}", flush=True)
        except Exception:
            report(f"rank {rank}: {fn.__name__}:\n{traceback.format_exc()}")
            print(f"[rank {rank}] FAIL {fn.__name__}", flush=True)
        # A failed check may leave peers mid-collective: realign through the store.
        dist.barrier()
    # While the interpreter is whole: left to its exit, torch's gloo worker
    # threads can free a tensor as it finalizes and abort the rank (SIGABRT).
    dist.destroy_process_group()


def chosen(args):
    """The checks this run's options ask for."""
    if args.cuda:
        return CUDA_CHECKS
    return [c for c in CHECKS if args.device_codecs or not getattr(c, "device_codecs", False)]


def worker(rank, size, port, failures, args):
    run_checks(rank, size, f"tcp://127.0.0.1:{port}", failures.put, chosen(args))


def under_mpiexec(checks):
    """One rank that mpiexec started: its failures go to stderr and the exit code."""
    rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    if "SPARQ_TEST_FAILING_RANK" in os.environ:
        a_rank_fails(rank, size, int(os.environ["SPARQ_TEST_FAILING_RANK"]))
    failed = []
    run_checks(rank, size, f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", failed.append, checks)
    for f in failed:
        print(f, file=sys.stderr)
    sys.exit(1 if failed else 0)


def under_torchrun(checks):
    """One rank that torchrun started (env:// rendezvous)."""
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if "SPARQ_TEST_KILLED_RANK" in os.environ:
        a_rank_is_killed(rank, int(os.environ["SPARQ_TEST_KILLED_RANK"]))
    failed = []
    run_checks(rank, size, "env://", failed.append, checks)
    for f in failed:
        print(f, file=sys.stderr)
    sys.exit(1 if failed else 0)


def a_rank_is_killed(rank, killed):
    """One rank dies (SIGKILL: no exception, no goodbye) while the others wait
    for it in a barrier of sparq's Gloo transport, whose timeout is 60 s."""
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    comm = st.connect(timeout=datetime.timedelta(seconds=60))
    if rank == killed:
        os.kill(os.getpid(), signal.SIGKILL)
    comm.barrier()
    sys.exit(0)  # not reached: the killed rank never joins the barrier


def torchrun_jobs(nprocs, forward):
    """The checks on ranks that torchrun starts; then a job where one rank is
    killed, which must end with the lost rank named, well within the
    Comm's timeout (torchrun stops the other workers when one fails)."""
    def cmd():
        # --standalone: the rendezvous binds a port the kernel picks (a probed
        # free port could be taken by another test before torchrun binds it)
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nprocs),
                os.path.abspath(__file__), *forward]

    rc = subprocess.run(cmd(), timeout=600).returncode
    if rc != 0:
        return rc
    killed = nprocs - 1
    start = time.monotonic()
    job = subprocess.run(cmd(), capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, SPARQ_TEST_KILLED_RANK=str(killed)))
    took = time.monotonic() - start
    out = job.stdout + job.stderr
    if job.returncode == 0 or f"local_rank: {killed}" not in out or took > 60:
        return f"FAIL: a killed rank's job: exit code {job.returncode} after {took:.0f} s, output:\n{out}"
    print(f"ok   a killed rank ends the job in {took:.1f} s (exit code {job.returncode}), rank {killed} named")
    return 0


def a_rank_fails(rank, size, failing):
    """One rank raises while the others wait for it in a collective, with the
    Comm's default timeout of 5 minutes: the uncaught exception aborts the
    job at once (sparq.torch's hook under MPI), where a rank that exits
    normally would wait in MPI_Finalize and its peers for their timeout."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=rank,
                            world_size=size)
    comm = st.connect()
    if rank == failing:
        raise RuntimeError(f"rank {rank} fails on purpose")
    comm.barrier()
    sys.exit(0)  # not reached: the failing rank never joins the barrier


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mpiexec_jobs(mpiexec, nprocs, forward):
    """The checks on ranks that mpiexec starts; then a job where one rank
    fails, which must end well before the Comm's 5-minute timeout."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def cmd(*extra):
        return [mpiexec, "-n", str(nprocs), "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle",
                "1", "-x", "MASTER_PORT", *extra, sys.executable, os.path.abspath(__file__), *forward]

    rc = subprocess.run(cmd(), env=dict(env, MASTER_PORT=str(free_port())), timeout=600).returncode
    if rc != 0:
        return rc
    failing = nprocs - 1
    job = subprocess.Popen(cmd("-x", "SPARQ_TEST_FAILING_RANK"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=dict(env, MASTER_PORT=str(free_port()), SPARQ_TEST_FAILING_RANK=str(failing)))
    try:
        _, err = job.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        job.terminate()  # mpiexec passes it on to the ranks
        job.communicate()
        return "FAIL: a rank's uncaught exception did not end the job within 120 s"
    # Not Open MPI's "MPI_ABORT was invoked" text: mpiexec, killing the job,
    # sometimes loses it ("ORTE_ERROR_LOG: ... show_help.c").
    if job.returncode == 0 or f"rank {failing} fails on purpose" not in err:
        return f"FAIL: a failing rank's job: exit code {job.returncode}, stderr:\n{err}"
    print(f"ok   a failing rank aborts the job (exit code {job.returncode})")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--mpiexec", help="start the ranks with this mpiexec (sparq's MPI transport)")
    ap.add_argument("--torchrun", action="store_true", help="start the ranks with torchrun (sparq's Gloo transport)")
    ap.add_argument("--cuda", action="store_true", help="the CUDA checks (exit 77, skipped, without a CUDA device)")
    ap.add_argument("--no-device-codecs", dest="device_codecs", action="store_false",
                    help="leave out the checks of sparq.gpu's codecs (device_codec_check)")
    args = ap.parse_args()
    forward = [] if args.device_codecs else ["--no-device-codecs"]  # to the ranks a launcher starts
    if args.cuda and not torch.cuda.is_available():
        print("skip: torch has no CUDA device here")
        sys.exit(77)
    if not args.cuda and torchrec_checks is None:
        sys.exit("bridge_test: TorchRec is not installed; its checks are a part of this run (scripts/setup)")
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        under_mpiexec(chosen(args))
    if "TORCHELASTIC_RUN_ID" in os.environ:
        under_torchrun(chosen(args))
    if args.mpiexec:
        sys.exit(mpiexec_jobs(args.mpiexec, args.nprocs, forward))
    if args.torchrun:
        sys.exit(torchrun_jobs(args.nprocs, forward))
    port = free_port()
    ctx = mp.get_context("spawn")
    failures = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args.nprocs, port, failures, args))
             for r in range(args.nprocs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    rc = 0
    while not failures.empty():
        print(failures.get(), file=sys.stderr)
        rc = 1
    for r, p in enumerate(procs):
        if p.exitcode != 0:
            print(f"rank {r} exited with {p.exitcode}", file=sys.stderr)
            rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
