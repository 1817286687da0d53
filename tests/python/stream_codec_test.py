"""sparq.gpu.stream (sparse streams encoded, decoded and summed with torch's
tensor kernels, where the pairs live) against the CPU codec
(sparq/compress/stream_codec.h through _sparq.encode_stream and
decode_stream): the same bytes, the same pairs, the same wire errors; the
sum against a plain sequential one. On CPU tensors here; on CUDA tensors
too where torch has a GPU (scripts/device-check runs this file there)."""
import numpy as np
import pytest
import torch

from sparq import _sparq
from sparq.gpu import stream

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def pairs(rng, dim, k, spread="random"):
    """k sorted indices below dim and float32 values of every magnitude."""
    if spread == "random":
        idx = np.sort(rng.choice(dim, k, replace=False))
    elif spread == "front":  # one wide gap: long varints
        idx = np.concatenate([np.arange(k - 1), [dim - 1]]) if k else np.arange(0)
    else:  # every value
        idx = np.arange(k)
    val = rng.standard_normal(k) * 10.0 ** rng.integers(-45, 38, k)
    return idx.astype(np.uint32), val.astype(np.float32)


CASES = [(1, 1, "all"), (5, 0, "random"), (100, 10, "random"), (256, 256, "all"), (257, 40, "front"),
         (300, 40, "random"), (65536, 900, "random"), (65537, 900, "front"), (70000, 30000, "random"),
         (1 << 20, 20000, "random"), (1 << 20, 3, "front"), (1000, 1000, "all")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["f32", "bf16", "fp8", "fp4"])
@pytest.mark.parametrize("dim,k,spread", CASES)
def test_encode_is_the_cpu_encoders_bytes_and_decodes_back(device, fmt, dim, k, spread):
    idx, val = pairs(np.random.default_rng(dim + k), dim, k, spread)
    cpu = _sparq.encode_stream(dim, idx, val, fmt)
    sent = stream.round_values(torch.from_numpy(val).to(device), fmt)
    dev, decoded = stream.encode(torch.from_numpy(idx.astype(np.int64)).to(device), torch.from_numpy(val).to(device),
                                 dim, fmt)
    assert np.array_equal(dev.cpu().numpy(), cpu)
    dense, i2, v2 = _sparq.decode_stream(cpu)
    got_idx, got_val = stream.decode(torch.from_numpy(cpu).to(device))
    assert not dense and np.array_equal(got_idx.cpu().numpy(), i2)
    assert np.array_equal(got_val.cpu().numpy().view(np.uint32), v2.view(np.uint32))
    assert np.array_equal(sent.cpu().numpy().view(np.uint32), v2.view(np.uint32))  # what the peer decodes
    assert np.array_equal(decoded.cpu().numpy().view(np.uint32), v2.view(np.uint32))


EDGES = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F7FFFFF, 0x7F7FFFFF, 0x7F7F8000, 0x00000001, 0x00008000,
                  0x80018000, 0x80000000, 0x00000000, 0xC0490FDB, 0x00FF8000], dtype=np.uint32).view(np.float32)


def edge_values(fmt):
    """Values at each format's corners: bf16's ties and carries, fp8's
    subnormals and ties at its message scale and a largest that is a power
    of two, fp4's midpoints (ties to the even code), negative zeros,
    all-zero and odd-sized groups, float's largest (the next code down)."""
    if fmt == "bf16":
        return [EDGES]
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -2.5, 6.0, -0.0, 1e-30], dtype=np.float32)
    sub = np.array([200.0, 2.0**-10, 3 * 2.0**-10, 2.0**-9, 1.5 * 2.0**-9, 2.5 * 2.0**-9, 136.0, 152.0, 248.0, -0.0],
                   dtype=np.float32)
    top = np.finfo(np.float32).max
    return [mids, sub, np.zeros(40, np.float32), np.array([top, -top, 1.0], np.float32),
            np.concatenate([mids] * 6)[:70], np.array([255.9, 1.0], np.float32), np.array([-0.0], np.float32),
            np.array([256.0, 250.0, 1e-3], np.float32), np.array([-0.5, 0.1], np.float32)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["bf16", "fp8", "fp4"])
def test_values_round_at_the_formats_edges_as_the_cpu_does(device, fmt):
    for val in edge_values(fmt):
        idx = np.arange(val.size, dtype=np.uint32)
        cpu = _sparq.encode_stream(val.size, idx, val, fmt)
        _, _, want = _sparq.decode_stream(cpu)
        got = stream.round_values(torch.from_numpy(val).to(device), fmt).cpu().numpy()
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (fmt, val, got, want)
        dev, _ = stream.encode(torch.from_numpy(idx.astype(np.int64)).to(device), torch.from_numpy(val).to(device),
                               val.size, fmt)
        assert np.array_equal(dev.cpu().numpy(), cpu), (fmt, val)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["fp8", "fp4"])
def test_non_finite_values_are_the_cpus_input_error(device, fmt):
    with pytest.raises(_sparq.InputError, match=f"{fmt} stream values: non-finite value"):
        stream.round_values(torch.tensor([1.0, float("inf")], device=device), fmt)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_rounds_half_to_even_as_the_cpu_does(device):
    """Ties, the carry into the next binade, overflow to infinity, denormals,
    signed zeros: the CPU's float_to_bf16 on every one."""
    val = EDGES
    idx = np.arange(val.size, dtype=np.uint32)
    _, _, want = _sparq.decode_stream(_sparq.encode_stream(val.size, idx, val, "bf16"))
    got = stream.round_values(torch.from_numpy(val).to(device), "bf16").cpu().numpy()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def corrupt(cases):
    """(name, bytes) of streams the CPU decoder rejects, made from good ones."""
    rng = np.random.default_rng(3)
    idx, val = pairs(rng, 70000, 50)
    varint = _sparq.encode_stream(70000, idx, val)  # varint: 50 indices spread over 70000
    fixed = _sparq.encode_stream(200, *pairs(rng, 200, 150))  # 1-byte indices: no varint is shorter
    assert varint[1] == 0x80 and fixed[1] == 1

    def edit(b, at, v):
        b = b.copy()
        b[at] = v
        return b

    fp8 = _sparq.encode_stream(300, np.array([3, 9], np.uint32), np.array([1.0, 2.0], np.float32), "fp8")
    fp4 = _sparq.encode_stream(300, np.array([3, 9], np.uint32), np.array([1.0, 0.0], np.float32), "fp4")
    order = fixed.copy()
    order[12 + 5] = fixed[12 + 4]  # index 5 repeats index 4
    run_end = varint.size - 4 * 50
    long_varint = varint.copy()
    long_varint[12:18] = [0x80, 0x80, 0x80, 0x80, 0x80, 0x00]  # a 6-byte varint where the first was
    out = [("short", varint[:7]), ("kind", edit(varint, 0, 3)), ("format", edit(varint, 2, 9)),
           ("scale", edit(varint, 3, 1)), ("coding", edit(fixed, 1, 4)), ("n over dim", edit(fixed, 9, 0x7F)),
           ("size", fixed[:-1]), ("varint bytes left", np.concatenate([varint[:12], [0], varint[12:]])),
           ("varint cut", np.delete(varint, run_end - 1)), ("long varint", long_varint),
           ("index range", edit(fixed, 12 + 149, 0xFF)), ("order", order),
           ("fp8 NaN", edit(fp8, -1, 0xFF)), ("fp8 beyond float", edit(edit(fp8, 3, 120), -1, 0x78)),
           ("fp4 negative zero", edit(fp4, -1, 0x84)), ("fp4 beyond float", edit(edit(fp4, -2, 126), -1, 0x06))]
    return [c for c in out if c[0] in cases] if cases else out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,data", corrupt(None))
def test_bad_bytes_are_the_cpu_decoders_wire_errors(device, name, data):
    data = np.ascontiguousarray(data, dtype=np.uint8)
    with pytest.raises(_sparq.WireError) as cpu:
        _sparq.decode_stream(data)
    want = str(cpu.value).rsplit(" [", 1)[0]  # the words, without the C++ file and line
    out = torch.full((70000,), 7.0, device=device)
    with pytest.raises(_sparq.WireError) as dev:
        stream.decode_sum([torch.from_numpy(data).to(device)], out[:int.from_bytes(bytes(data[4:8]), "little")]
                          if data.size >= 8 else out)
    assert want in str(dev.value)
    assert bool((out == 7.0).all()), "a bad stream changed the sum"


@pytest.mark.parametrize("device", DEVICES)
def test_decode_sum_adds_sparse_and_dense_streams_in_order(device):
    """The sum of a dense and sparse streams (fixed and varint runs, f32 and
    bf16) against a plain float32 loop in the same order."""
    rng = np.random.default_rng(7)
    dim = 70000
    dense_vals = rng.standard_normal(dim).astype(np.float32)
    streams = [stream.encode_dense(torch.from_numpy(dense_vals).to(device))[0]]
    want = dense_vals.copy()
    for k, fmt in ((50, "f32"), (30000, "bf16"), (0, "f32"), (dim, "f32")):
        idx, val = pairs(rng, dim, k, "all" if k == dim else "random")
        data = _sparq.encode_stream(dim, idx, val, fmt)
        streams.append(torch.from_numpy(data).to(device))
        _, _, sent = _sparq.decode_stream(data)
        want[idx] = want[idx] + sent  # unique indices: one float32 add each
    out = torch.empty(dim, device=device)
    stream.decode_sum(streams, out)
    assert np.array_equal(out.cpu().numpy().view(np.uint32), want.view(np.uint32))
    with pytest.raises(_sparq.WireError, match="dimension 70000, expected 69999"):
        stream.decode_sum(streams, out[:-1])
    # The first stream is written, as the CPU's to_dense writes a sum: -0.0 stays -0.0.
    neg = torch.from_numpy(_sparq.encode_stream(8, np.array([2], np.uint32), np.array([-0.0], np.float32))).to(device)
    got = stream.decode_sum([neg], torch.full((8,), 5.0, device=device)).cpu()
    assert torch.equal(got, torch.zeros(8)) and bool(torch.signbit(got[2])) and not bool(torch.signbit(got[1]))
