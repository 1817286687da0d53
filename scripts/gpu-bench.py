#!/usr/bin/env python3
"""sparq's GPU codec kernels (sparq.gpu) against a device-to-device copy of
the same input on the same GPU, in the same run, as bytes per second.

A kernel's bytes are what it must read and write once: its input, its
output (and the residual it reads and writes where it compensates), not
its scratch; the copy's are 2x its input (read and written). Each figure
is the median of --repeats timings by CUDA events after --warmup runs;
inputs are 256 MiB by default, well beyond the L2 cache. The kernels are
timed without the fault check that follows them (a device-to-host read of
a few bytes; the `call` rows time the whole function, check included).
Also sparq's CUDA C++ kernels (cuda:*, where libsparq_cuda.so is built),
the sparse-stream codec (where the package is installed), and the host
transfers a GPU rank makes: the fp32 bucket against its q4 payload, device
to pinned host memory.

    python3 scripts/gpu-bench.py --out kernels.jsonl     # on a GPU machine

Imports sparq.gpu, or the module SPARQ_GPU_MODULE names: the kernels alone,
copied out of the package where the extension is not built
(scripts/device-check)."""
import argparse
import importlib
import json
import os
import statistics

import torch


def timed(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def tune(rw, th, x, err, tau, a, record):
    """The kernels' speed at other tiles (values a program) and warps, to
    choose the modules' TILE/BLOCK and WARPS from."""
    n = x.numel()
    defaults = (rw.TILE, rw.WARPS, th.BLOCK, th.WARPS)
    for tile in (1024, 2048, 4096, 8192):
        for warps in (2, 4, 8):
            rw.TILE, rw.WARPS, th.BLOCK, th.WARPS = tile, warps, tile, warps
            cols = 16
            out = n // cols * (4 + cols // 2)
            record("tune:quantize", timed(lambda: rw.launch_quantize(x, cols, 4, "f16"), 2, 10),
                   4 * n + out + n // cols, bits=4, cols=cols, tile=tile, warps=warps)
            data = rw.launch_quantize(x, cols, 4, "f16")[0]
            record("tune:dequantize", timed(lambda: rw.launch_dequantize(data, cols, 4, "f16"), 2, 10),
                   data.numel() + 4 * n + n // cols, bits=4, cols=cols, tile=tile, warps=warps)
            e = err.clone()
            record("tune:threshold_pack_ec", timed(lambda: th.launch_threshold_pack(x, tau, e), 2, 10),
                   12 * n, tile=tile, warps=warps)
    rw.TILE, rw.WARPS, th.BLOCK, th.WARPS = defaults


def cuda_kernels(gpu, rw, th, x, err, tau, kept, a, record):
    """sparq's CUDA C++ kernels (row-wise, a thread to a row; threshold-pack)
    on the same inputs, rows named cuda:*; skipped, and said so, where the
    library is not built."""
    cuda = importlib.import_module(gpu.__name__ + ".cuda")
    if cuda.library() is None:
        print("skipped cuda:*: libsparq_cuda.so not built (SPARQ_CUDA_LIB)")
        return
    n = x.numel()
    saved, cuda.KERNELS = cuda.KERNELS, "cuda"
    try:
        record("cuda:threshold_pack", timed(lambda: th.launch_threshold_pack(x, tau), a.warmup, a.repeats),
               4 * n + 8 * kept, eta=a.eta, kept=kept)
        e = err.clone()
        record("cuda:threshold_pack_ec", timed(lambda: th.launch_threshold_pack(x, tau, e), a.warmup, a.repeats),
               12 * n + 8 * kept, eta=a.eta, kept=kept)
        for cols in (16, 64, 128):
            for bits in (4, 8, 2):
                data = rw.launch_quantize(x, cols, bits, "f16")[0]
                out = data.numel() + n // cols
                record("cuda:quantize", timed(lambda: rw.launch_quantize(x, cols, bits, "f16"), a.warmup, a.repeats),
                       4 * n + out, bits=bits, cols=cols, scale="f16")
                if bits != 4:
                    continue
                record("cuda:dequantize",
                       timed(lambda: rw.launch_dequantize(data, cols, bits, "f16"), a.warmup, a.repeats),
                       data.numel() + 4 * n + n // cols, bits=bits, cols=cols, scale="f16")
                e = err.clone()
                record("cuda:quantize_ec",
                       timed(lambda: rw.launch_quantize(x, cols, bits, "f16", e), a.warmup, a.repeats),
                       12 * n + out, bits=bits, cols=cols, scale="f16")
    finally:
        cuda.KERNELS = saved


def stream_codec(gpu, th, x, tau, a, record):
    """The sparse stream of DCT-DP's kept pairs (a bucket of the input's
    size): encoded (f32 and fp8 values) and two of them decoded and summed
    into the bucket, as a hook does on either route. Its bytes: the pairs
    read and the stream written; the streams read and the bucket written.
    Needs the package (its wire errors are _sparq's): skipped, and said so,
    with the kernels alone."""
    try:
        stream = importlib.import_module(gpu.__name__ + ".stream")
    except ImportError as e:
        print(f"stream: skipped ({e}: needs the package sparq, not the kernels alone)")
        return
    idx, val = gpu.threshold_pack(x, tau)
    n, kept = x.numel(), idx.numel()
    out = torch.empty_like(x)
    for fmt in ("f32", "fp8"):
        data = stream.encode(idx, val, n, fmt)[0]
        record("stream_encode", timed(lambda: stream.encode(idx, val, n, fmt), a.warmup, a.repeats),
               8 * kept + data.numel(), fmt=fmt, kept=kept, eta=a.eta)
        record("stream_decode_sum", timed(lambda: stream.decode_sum([data, data], out), a.warmup, a.repeats),
               2 * data.numel() + 4 * n, fmt=fmt, kept=kept, streams=2, eta=a.eta)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=256, help="input size per kernel")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--eta", type=float, default=0.98, help="DCT-DP's sparsity for threshold-pack")
    p.add_argument("--tune", action="store_true",
                   help="also time q4 quantize/dequantize and threshold-pack at other tiles and warps")
    p.add_argument("--out", help="JSON lines here (also printed)")
    a = p.parse_args()
    gpu = importlib.import_module(os.environ.get("SPARQ_GPU_MODULE", "sparq.gpu"))
    rw, th = importlib.import_module(gpu.__name__ + ".rowwise"), importlib.import_module(gpu.__name__ + ".threshold")
    n = a.mib * 2**20 // 4
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(n, device="cuda", generator=g)
    err = torch.randn(n, device="cuda", generator=g) * 0.01
    y = torch.empty_like(x)
    rows = []

    def record(kernel, ms, nbytes, **extra):
        row = dict(kernel=kernel, ms=round(ms, 4), bytes=nbytes, gbps=round(nbytes / ms / 1e6, 1), **extra)
        rows.append(row)

    copy_ms = timed(lambda: y.copy_(x), a.warmup, a.repeats)
    record("copy", copy_ms, 8 * n)
    for cols in (16, 64, 128):
        for bits in (4, 8, 2):
            data = rw.launch_quantize(x, cols, bits, "f16")[0]
            out = data.numel() + n // cols  # + the fault byte per row
            record("quantize", timed(lambda: rw.launch_quantize(x, cols, bits, "f16"), a.warmup, a.repeats),
                   4 * n + out, bits=bits, cols=cols, scale="f16")
            if bits != 4:
                continue
            record("dequantize", timed(lambda: rw.launch_dequantize(data, cols, bits, "f16"), a.warmup, a.repeats),
                   data.numel() + 4 * n + n // cols, bits=bits, cols=cols, scale="f16")
            e = err.clone()
            record("quantize_ec", timed(lambda: rw.launch_quantize(x, cols, bits, "f16", e), a.warmup, a.repeats),
                   12 * n + out, bits=bits, cols=cols, scale="f16")
            record("call:quantize", timed(lambda: gpu.quantize(x, cols, bits, "f16"), a.warmup, a.repeats),
                   4 * n + out, bits=bits, cols=cols, scale="f16")
    tau = gpu.sparsity_threshold(x + err, a.eta)
    kept = int(((x + err).abs() >= tau).sum())
    cuda_kernels(gpu, rw, th, x, err, tau, kept, a, record)
    record("threshold_pack", timed(lambda: th.launch_threshold_pack(x, tau), a.warmup, a.repeats),
           4 * n + 8 * kept, eta=a.eta, kept=kept)
    e = err.clone()
    record("threshold_pack_ec", timed(lambda: th.launch_threshold_pack(x, tau, e), a.warmup, a.repeats),
           12 * n + 8 * kept, eta=a.eta, kept=kept)
    record("call:threshold_pack_ec", timed(lambda: gpu.threshold_pack(x, tau, e), a.warmup, a.repeats),
           12 * n + 8 * kept, eta=a.eta, kept=kept)
    kept = n // 512 * 8
    record("topk", timed(lambda: gpu.bucket_topk(x, 512, 8), a.warmup, a.repeats), 4 * n + 8 * kept, bucket=512, k=8)
    e = err.clone()
    record("topk_ec", timed(lambda: gpu.bucket_topk(x, 512, 8, e), a.warmup, a.repeats), 12 * n + 8 * kept,
           bucket=512, k=8)
    record("sparsity_threshold", timed(lambda: gpu.sparsity_threshold(x, a.eta), 2, 10), 4 * n, eta=a.eta)
    record("torch.kthvalue", timed(lambda: torch.kthvalue(x.abs(), int(n * a.eta) + 1), 1, 3), 4 * n, eta=a.eta)
    stream_codec(gpu, th, x, tau, a, record)
    if a.tune:
        tune(rw, th, x, err, tau, a, record)
    pinned = torch.empty(n, dtype=torch.float32, pin_memory=True)
    record("d2h_fp32", timed(lambda: pinned.copy_(x, non_blocking=True), a.warmup, a.repeats), 4 * n)
    q4 = rw.launch_quantize(x, 16, 4, "f16")[0]
    pinned_q4 = torch.empty(q4.numel(), dtype=torch.uint8, pin_memory=True)
    record("d2h_q4", timed(lambda: pinned_q4.copy_(q4, non_blocking=True), a.warmup, a.repeats), q4.numel(), cols=16)
    for r in rows:
        r["of_copy"] = round(r["gbps"] / rows[0]["gbps"], 3)
        r["device"] = torch.cuda.get_device_name()
        print(json.dumps(r))
    if a.out:
        with open(a.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
