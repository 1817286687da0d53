"""The inputs on which the GPU codecs are compared with the CPU codecs:
random rows and the adversarial ones (all zeros, constant rows, one huge
value, denormals, signed zeros, small integers that land on half steps,
values beyond fp16). Plain numpy with fixed seeds, so a machine without
the CPU codecs (a GPU machine without the extension) can rebuild them and
compare with the CPU's results stored by gpu_codec_reference.py."""
import numpy as np

COLS = (64, 1, 7, 33, 128, 300)
FORMATS = [(bits, scale) for bits in (8, 4, 2) for scale in ("f16", "f32")]


def rowwise_inputs(cols):
    """(name, float32 values of whole rows of `cols`) pairs; every one
    encodes without error in f32 scales."""
    g = np.random.default_rng(cols)
    rows = 37
    yield "random", g.standard_normal(rows * cols).astype(np.float32)
    yield "zeros", np.zeros(rows * cols, np.float32)
    yield "constant rows", np.repeat(g.standard_normal(rows), cols).astype(np.float32)
    huge = g.standard_normal(rows * cols).astype(np.float32)
    huge[::cols + 1] = 3e37
    yield "one huge value", huge
    yield "denormals", (np.arange(rows * cols) % 97 * 1e-41).astype(np.float32)
    yield "signed zeros", np.where(np.arange(rows * cols) % 3 == 0, -0.0, 0.0).astype(np.float32)
    yield "half steps", (g.integers(-4, 5, rows * cols) * 0.5).astype(np.float32)
    yield "wide", (g.standard_normal(rows * cols) * 1e5).astype(np.float32)


def fp16_safe(name):
    return name not in ("one huge value", "wide")


def residual(n, seed=5):
    return (np.random.default_rng(seed).standard_normal(n) * 0.01).astype(np.float32)


def threshold_inputs():
    """(name, values, eta) for DCT-DP's threshold-pack."""
    g = np.random.default_rng(11)
    yield "random", g.standard_normal(100_003).astype(np.float32), 0.98
    yield "dense", g.standard_normal(20_000).astype(np.float32), 0.0
    yield "ties", np.repeat(g.standard_normal(50), 200).astype(np.float32), 0.9
    yield "zeros", np.zeros(9_000, np.float32), 0.99
    yield "one value", np.arange(1, 4_097, dtype=np.float32), 0.99999
    yield "denormals and signs", (g.standard_normal(30_000) * 1e-39).astype(np.float32), 0.95
    yield "one huge value", np.concatenate([g.standard_normal(999), [3e38]]).astype(np.float32), 0.9995


def topk_inputs():
    """(name, values, bucket, k) for TopK per bucket; the last run of each
    is shorter than its bucket."""
    g = np.random.default_rng(13)
    yield "random", g.standard_normal(5_000).astype(np.float32), 512, 8
    yield "ties", np.repeat(g.standard_normal(40), 25).astype(np.float32), 128, 16
    yield "signed ties", np.tile(np.array([1.0, -1.0, 0.5, -0.0, 0.0], np.float32), 300), 100, 3
    yield "k beyond the bucket", g.standard_normal(1_000).astype(np.float32), 64, 100
    yield "zeros", np.zeros(777, np.float32), 256, 2
