"""The GPU codecs (sparq.gpu, Triton kernels) against the CPU codecs, bit
for bit: bytes, decoded floats, residuals, pairs and thresholds, on random
and adversarial inputs; and their errors on NaN, inf and bad headers.

Where the kernels run: on a GPU when one is there; else on CPU tensors
under Triton's interpreter (TRITON_INTERPRET=1, as CTest runs this file);
else the tests skip with the reason. The CPU's results come from the
extension, or on a GPU machine without it from a file that
gpu_codec_reference.py wrote (SPARQ_GOLDEN, SPARQ_GPU_MODULE;
scripts/device-check)."""
import importlib
import os

import numpy as np
import pytest
import torch

import gpu_codec_cases as cases
from gpu_codec_reference import Reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's masked lanes
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRETED else "cuda"
if not INTERPRETED and not torch.cuda.is_available():
    pytest.skip("no GPU here, and TRITON_INTERPRET=1 is not set to run the kernels on the CPU",
                allow_module_level=True)
# SPARQ_GPU_MODULE: the kernels alone, copied out of the package where the
# extension (which `import sparq` loads) is not built.
gpu = importlib.import_module(os.environ.get("SPARQ_GPU_MODULE", "sparq.gpu"))
REF = Reference(os.environ.get("SPARQ_GOLDEN"))


def on_device(a):
    """A copy of `a` on the kernels' device (never a view: they write in place)."""
    return torch.from_numpy(np.array(a, copy=True)).to(DEVICE)


def same_bits(got, want):
    got = got.cpu().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def rowwise_params():
    for cols in cases.COLS:
        for name, _ in cases.rowwise_inputs(cols):
            for bits, scale in cases.FORMATS:
                if scale == "f32" or cases.fp16_safe(name):
                    yield pytest.param(cols, name, bits, scale, id=f"{name}-{cols}-q{bits}-{scale}")


def case(cols, name):
    return dict(cases.rowwise_inputs(cols))[name]


@pytest.fixture(params=[True, False], ids=["words", "bytes"])
def word_rows(request):
    """Rows of whole words move as words, or (forced) as bytes: both paths."""
    rowwise = importlib.import_module(gpu.__name__ + ".rowwise")
    saved, rowwise.WORD_ROWS = rowwise.WORD_ROWS, request.param
    yield request.param
    rowwise.WORD_ROWS = saved


@pytest.fixture(params=["triton", "cuda"])
def kernels(request):
    """The row-wise codec and threshold-pack by the Triton kernels, and by
    sparq's CUDA C++ ones where there is a GPU and the library was built
    (SPARQ_CUDA_LIB)."""
    cuda = importlib.import_module(gpu.__name__ + ".cuda")
    if request.param == "cuda":
        if DEVICE != "cuda":
            pytest.skip("the CUDA kernels need a GPU (their row code is tested on the host by cuda_row_test)")
        if cuda.library() is None:
            pytest.skip("libsparq_cuda.so was not built (no nvcc at build time) or SPARQ_CUDA_LIB names no file")
    saved, cuda.KERNELS = cuda.KERNELS, request.param
    yield request.param
    cuda.KERNELS = saved


@pytest.mark.parametrize("cols,name,bits,scale", list(rowwise_params()))
def test_rowwise_encodes_decodes_and_compensates_as_the_cpu(cols, name, bits, scale, word_rows, kernels):
    if kernels == "cuda" and not word_rows:
        pytest.skip("the CUDA kernels have no word/byte paths to choose between")
    x = case(cols, name)
    want = REF.quantize(name, x, cols, bits, scale)[0]
    data = gpu.quantize(on_device(x), cols, bits, scale)
    same_bits(data, want)
    same_bits(gpu.dequantize(data, cols, bits, scale), REF.dequantize(name, want, cols, bits, scale)[0])
    err = cases.residual(x.size)
    want_ec, want_err = REF.quantize(name, x, cols, bits, scale, err)
    err_dev = on_device(err)
    same_bits(gpu.quantize(on_device(x), cols, bits, scale, err=err_dev), want_ec)
    same_bits(err_dev, want_err)


@pytest.mark.parametrize("name,x,eta", list(cases.threshold_inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_threshold_and_pack_equal_the_cpu(name, x, eta, kernels):
    tau = gpu.sparsity_threshold(on_device(x), eta)
    assert np.float32(tau).view(np.uint32) == REF.threshold(name, x, eta).view(np.uint32)
    idx, val = gpu.threshold_pack(on_device(x), tau)
    want_idx, want_val = REF.threshold_pack(name, x, tau)
    same_bits(idx, want_idx.astype(np.int32))
    same_bits(val, want_val)
    err = cases.residual(x.size)
    err_dev = on_device(err)
    idx, val = gpu.threshold_pack(on_device(x), tau, err=err_dev)
    want_idx, want_val, want_err = REF.threshold_pack(name, x, tau, err)
    same_bits(idx, want_idx.astype(np.int32))
    same_bits(val, want_val)
    same_bits(err_dev, want_err)


@pytest.mark.parametrize("name,x,bucket,k", list(cases.topk_inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_topk_per_bucket_equals_the_cpu(name, x, bucket, k):
    idx, val = gpu.bucket_topk(on_device(x), bucket, k)
    want_idx, want_val = REF.topk(name, x, bucket, k)
    same_bits(idx, want_idx.astype(np.int32))
    same_bits(val, want_val)
    err = cases.residual(x.size)
    err_dev = on_device(err)
    idx, val = gpu.bucket_topk(on_device(x), bucket, k, err=err_dev)
    want_idx, want_val, want_err = REF.topk(name, x, bucket, k, err)
    same_bits(idx, want_idx.astype(np.int32))
    same_bits(val, want_val)
    same_bits(err_dev, want_err)


def test_topk_refuses_nan_naming_the_bucket():
    x = np.ones(1_000, np.float32)
    x[700] = np.nan
    with pytest.raises(ValueError, match="tensor w: holds NaN or inf \\(TopK bucket 1\\)"):
        gpu.bucket_topk(on_device(x), 512, 4, what="tensor w: ")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("scale", ["f16", "f32"])
def test_a_row_holding_nan_or_inf_is_an_error_naming_it(bad, scale, kernels):
    x = np.ones(10 * 16, np.float32)
    x[5 * 16 + 3] = bad
    with pytest.raises(ValueError, match="row 5 holds NaN or inf"):
        gpu.quantize(on_device(x), 16, 4, scale)
    err = np.zeros_like(x)
    err_dev = on_device(err)
    with pytest.raises(ValueError, match="row 5 holds NaN or inf"):
        gpu.quantize(on_device(x), 16, 4, scale, err=err_dev)
    assert np.array_equal(err_dev.cpu().numpy()[80:96], x[80:96], equal_nan=True)  # the row's x + err kept


def test_ranges_beyond_the_scale_are_errors(kernels):
    x = np.zeros(4 * 8, np.float32)
    x[2 * 8] = 1e5  # a scale of 1e5 / 255 fits fp16
    gpu.quantize(on_device(x), 8, 8, "f16")
    x[2 * 8] = -1e5  # a bias beyond fp16
    with pytest.raises(ValueError, match="row 2's range exceeds fp16"):
        gpu.quantize(on_device(x), 8, 8, "f16")
    x[3 * 8], x[3 * 8 + 1] = 3e38, -3e38  # hi - lo overflows float
    with pytest.raises(ValueError, match="row 2's range exceeds fp16"):
        gpu.quantize(on_device(x), 8, 8, "f16")
    x[2 * 8] = 0
    with pytest.raises(ValueError, match="row 3's range overflows float"):
        gpu.quantize(on_device(x), 8, 8, "f32")


@pytest.mark.parametrize("header", [np.float32(np.nan), np.float32(-1.0), np.float32(np.inf)])
def test_a_header_that_is_no_grid_is_an_error(header, kernels):
    data = gpu.quantize(on_device(np.arange(3 * 8, dtype=np.float32)), 8, 8, "f32").cpu().numpy()
    data[1 * 16:1 * 16 + 4] = np.frombuffer(header.tobytes(), np.uint8)  # row 1's scale
    with pytest.raises(ValueError, match="row 1 has a scale or bias"):
        gpu.dequantize(on_device(data), 8, 8, "f32")


def test_bad_arguments_are_errors():
    x = on_device(np.zeros(12, np.float32))
    with pytest.raises(ValueError, match="codes are 8, 4 or 2"):
        gpu.quantize(x, 4, 3, "f16")
    with pytest.raises(ValueError, match="f16 or f32"):
        gpu.quantize(x, 4, 4, "bf16")
    with pytest.raises(ValueError, match="not rows of 5"):
        gpu.quantize(x, 5, 4, "f16")
    with pytest.raises(ValueError, match="rows of 20000 values"):
        gpu.quantize(x, 20000, 4, "f16")
    with pytest.raises(ValueError, match="contiguous float32"):
        gpu.quantize(x.double(), 4, 4, "f16")
    with pytest.raises(ValueError, match="not rows of"):
        gpu.dequantize(on_device(np.zeros(7, np.uint8)), 4, 4, "f16")


def test_nan_or_inf_in_a_gradient_is_an_error_naming_the_bucket(kernels):
    x = np.ones(10_000, np.float32)
    x[9_000] = np.inf
    with pytest.raises(ValueError, match="bucket 3: holds NaN or inf"):
        gpu.threshold_pack(on_device(x), 0.5, err=on_device(np.zeros_like(x)), what="bucket 3: ")
    x[9_000] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        gpu.sparsity_threshold(on_device(x), 0.9)


def test_empty_inputs(kernels):
    assert gpu.quantize(on_device(np.zeros(0, np.float32)), 8, 4, "f16").numel() == 0
    idx, val = gpu.threshold_pack(on_device(np.zeros(0, np.float32)), 1.0)
    assert idx.numel() == 0 and val.numel() == 0
