#!/usr/bin/env python3
"""Every sparq.gpu kernel, in every variant its launchers can ask for,
compiled for an NVIDIA GPU (sm_90, the H100/H200) by Triton's own compiler:
Triton to PTX to a cubin with the ptxas Triton ships. No GPU is needed, so
CI catches what the interpreter (gpu_codecs_test.py) accepts and a real
compilation refuses: a non-constexpr global, an op with no lowering, a
type the backend cannot emit.

    python3 tests/python/gpu_compile_test.py [--arch 90]

Imports sparq.gpu, or the module SPARQ_GPU_MODULE names (the kernels copied
out of the package, as scripts/device-check does). Exit status 1 and the
compiler's message name the kernel and variant that failed."""
import argparse
import importlib
import itertools
import os
import sys
import time

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

gpu = importlib.import_module(os.environ.get("SPARQ_GPU_MODULE", "sparq.gpu"))
rowwise, threshold, topk = gpu.rowwise, gpu.threshold, gpu.topk


def rowwise_variants():
    """The launchers' variants: bits x scale x error compensation x rows as
    words or bytes, at a narrow and the widest row (the block shapes differ)."""
    for bits, f16, words, cols in itertools.product((8, 4, 2), (True, False), (True, False), (16, rowwise.MAX_COLS)):
        block_r, block_c = rowwise._blocks(cols, bits)
        out = "*i32" if words else "*u8"
        shape = dict(BITS=bits, F16=f16, WORDS=words, BLOCK_R=block_r, BLOCK_C=block_c)
        for ec in (True, False):
            yield (rowwise._sparq_quantize_kernel,
                   dict(x_ptr="*fp32", err_ptr="*fp32", out_ptr=out, fault_ptr="*i8",
                        rows="i32", cols="i32", row_bytes="i32"),
                   dict(shape, EC=ec), dict(num_warps=rowwise.WARPS, enable_fp_fusion=False))
        yield (rowwise._sparq_dequantize_kernel,
               dict(in_ptr=out, out_ptr="*fp32", fault_ptr="*i8", rows="i32", cols="i32", row_bytes="i32"),
               shape, dict(num_warps=rowwise.WARPS, enable_fp_fusion=False))


def sparsifying_variants():
    for ec in (True, False):
        yield (threshold._sparq_select_kernel,
               dict(g_ptr="*fp32", e_ptr="*fp32", tau="fp32", n="i32", stage_idx="*i32", stage_val="*fp32",
                    counts="*i32", faults="*i8"),
               dict(EC=ec, BLOCK=threshold.BLOCK), dict(num_warps=threshold.WARPS, enable_fp_fusion=False))
        for bucket in (1, 512, 16384):
            yield (topk._sparq_topk_kernel,
                   dict(x_ptr="*fp32", e_ptr="*fp32", n="i32", k="i32", out_idx="*i32", out_val="*fp32",
                        faults="*i8", bucket="i32"),
                   dict(EC=ec, BLOCK=triton.next_power_of_2(bucket)), dict(num_warps=topk.WARPS))
    yield (threshold._sparq_gather_kernel,
           dict(stage_idx="*i32", stage_val="*fp32", counts="*i32", ends="*i32", out_idx="*i32", out_val="*fp32"),
           dict(BLOCK=threshold.BLOCK), dict(num_warps=threshold.WARPS))


def compile_one(kernel, args, constexprs, options, target):
    signature = dict(args, **{name: "constexpr" for name in constexprs})
    missing = set(kernel.arg_names) - set(signature)
    if missing:  # the test's list of a kernel's arguments is out of date
        raise AssertionError(f"{kernel.__name__}: no type given for {sorted(missing)}")
    compiled = triton.compile(ASTSource(kernel, signature, constexprs), target=target, options=options)
    return compiled.asm["cubin"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, default=90, help="the compute capability, as 90 for sm_90")
    arch = ap.parse_args().arch
    target = GPUTarget("cuda", arch, 32)
    failed = count = 0
    t0 = time.time()
    for kernel, args, constexprs, options in itertools.chain(rowwise_variants(), sparsifying_variants()):
        count += 1
        try:
            cubin = compile_one(kernel, args, constexprs, options, target)
            assert len(cubin) > 0, "an empty cubin"
        except Exception as e:  # the compiler's own message, with the variant
            failed += 1
            print(f"FAIL {kernel.__name__} {constexprs}: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"{count - failed}/{count} kernel variants compiled for sm_{arch} by Triton {triton.__version__} "
          f"in {time.time() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
