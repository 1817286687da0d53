"""Time per gradient exchange through sparq.torch's Comm (MPI under mpiexec,
or Gloo with SPARQ_TRANSPORT=gloo) against torch.distributed's own allreduce,
back to back on the same vector, on every rank of an env:// launch:

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 GLOO_SOCKET_IFNAME=lo \\
      mpiexec -n 4 --oversubscribe --bind-to none .venv/bin/python bench/bridge_exchange.py [--n 475000]

Each codec gets a fresh N(0,1) gradient per call (seeded per rank and call),
so the sparsifiers keep their usual density; rank 0 prints ms per call (the
mean over --calls calls after one warm-up) and the bytes it sent per call.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

import sparq
import sparq.torch as st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=475000, help="values per gradient (DLRM's dense layers: 475k)")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--codecs", default="none/ring;topk:10/512/auto;dct:0.98,1000/auto;q4+ec/ring",
                    help="CODEC/ALLREDUCE items, separated by ';'")
    args = ap.parse_args()
    for var, ompi in (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")):
        if var not in os.environ and ompi in os.environ:
            os.environ[var] = os.environ[ompi]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    grads = [torch.randn(args.n, generator=torch.Generator().manual_seed(rank * 1000 + i))
             for i in range(args.calls + 1)]
    comm = st.connect()
    rows = []

    def timed(name, call, sent):
        call(0)
        dist.barrier()
        before, t = sent(), time.perf_counter()
        for i in range(1, args.calls + 1):
            call(i)
        ms = (time.perf_counter() - t) / args.calls * 1e3
        rows.append((name, ms, (sent() - before) / args.calls))

    buf = grads[0].clone()
    timed("torch.distributed all_reduce (gloo)", lambda i: dist.all_reduce(buf), lambda: 0)
    for item in args.codecs.split(";"):
        codec, algo = item.rsplit("/", 1)
        x = sparq.GradExchange(comm, codec, algo)
        g = grads[0].numpy().copy()

        def call(i, x=x, g=g):
            g[:] = grads[i].numpy()
            x.exchange("grad", g, [], i)

        timed(f"sparq {codec} ({algo})", call, lambda: comm.counters()["bytes_sent"])
    if rank == 0:
        print(f"# {dist.get_world_size()} ranks, {args.n} values, mean of {args.calls} calls")
        for name, ms, b in rows:
            print(f"{name:45s} {ms:8.2f} ms/call {b / 1e3:10.1f} kB sent/call" if b else f"{name:45s} {ms:8.2f} ms/call")
    comm.barrier()
    dist.destroy_process_group()  # before the interpreter's exit (docs/reliability.md, "A rank's exit")


if __name__ == "__main__":
    main()
