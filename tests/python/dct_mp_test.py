"""sparq.torch's DCT-MP cut in one process, against a plain reference: per
sample the top (1 - eta) magnitudes by a stable sort (ties to the lower
columns), the same mask on the gradient. Run by CTest with pytest."""
import math

import numpy as np
import pytest
import torch
from torch import nn

import sparq
import sparq.torch as st
from dct_mp_reference import ReferenceCut, reference_mask as reference, rounded


def inputs():
    g = torch.Generator().manual_seed(7)
    yield "random", torch.randn(33, 70, generator=g)
    yield "relu", torch.relu(torch.randn(16, 1024, generator=g))  # the paper's place: zeros tie
    yield "zeros", torch.zeros(5, 24)
    yield "constant rows", torch.full((4, 19), -2.5)
    yield "one huge value", torch.cat([torch.full((3, 1), 3e38), torch.randn(3, 40, generator=g)], dim=1)
    yield "denormals", torch.full((6, 17), 1e-40) * torch.arange(1, 18)
    yield "signed zeros", torch.tensor([[0.0, -0.0, 1.0, -1.0, 0.0, -1.0, 1.0, -0.0, 0.5]])
    yield "tokens", torch.randn(7, 5, 48, generator=g)  # (time, batch, features): every token a sample


@pytest.mark.parametrize("values", ["f32", "bf16"])
@pytest.mark.parametrize("eta", [0.0, 0.5, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("name,x", list(inputs()))
def test_forward_and_backward_equal_the_reference_bit_for_bit(name, x, eta, values):
    mask, keep = reference(x, eta)  # selected on the fp32 activations, whatever the values' format
    xin = x.clone().requires_grad_()
    cut = st.DctMp(eta, name, values=values)
    y = cut(xin)
    assert torch.equal(y, torch.where(mask, rounded(x, values), torch.zeros_like(x)))
    assert torch.equal(torch.signbit(y[mask]), torch.signbit(x[mask]))  # -0.0 kept as -0.0
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(3))
    y.backward(g)
    assert torch.equal(xin.grad, torch.where(mask, rounded(g, values), torch.zeros_like(g)))
    rows, d = x.numel() // x.shape[-1], x.shape[-1]
    vb = 4 if values == "f32" else 2
    s = cut.stats.as_dict()
    assert s["fwd_bytes"] == rows * ((d + 7) // 8) + rows * keep * vb  # mask + values
    assert s["bwd_bytes"] == rows * keep * vb  # values only: the sender holds the mask
    kept = rounded(x, values).reshape(rows, d).abs().masked_fill(~mask.reshape(rows, d), math.inf).min(dim=1).values
    assert s["last_threshold"][0] == pytest.approx(float(kept.double().mean()), rel=1e-6)
    assert (s["last_threshold"][1], s["last_threshold"][2]) == (float(kept.min()), float(kept.max()))


def test_a_model_with_a_cut_trains_as_the_masked_reference():
    """Three SGD steps of an MLP with DctMp after its ReLU, and of the same
    MLP with the reference mask applied by hand: identical parameters."""
    def mlp():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Identity(), nn.Linear(64, 1))

    a, b = mlp(), mlp()
    a[2], b[2] = st.DctMp(0.9, "mlp"), ReferenceCut(0.9)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(32, 12, generator=g), torch.randn(32, 1, generator=g)
        for m in (a, b):
            m.zero_grad()
            nn.functional.mse_loss(m(x), y).backward()
            with torch.no_grad():
                for p in m.parameters():
                    p -= 0.1 * p.grad
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_evaluation_keeps_the_mask_unless_dense_eval():
    x = torch.randn(8, 40)
    masked = torch.where(reference(x, 0.9)[0], x, torch.zeros_like(x))
    assert torch.equal(st.DctMp(0.9).eval()(x), masked)
    assert torch.equal(st.DctMp(0.9, dense_eval=True).eval()(x), x)
    assert torch.equal(st.DctMp(0.9, dense_eval=True).train()(x), masked)


@pytest.mark.parametrize("eta", [-0.1, 1.0, 1.5, float("nan"), "0.9"])
def test_eta_outside_0_1_is_an_error_naming_the_cut(eta):
    with pytest.raises(sparq.InputError, match=r"cut 'enc5'.*eta .* outside \[0, 1\)"):
        st.DctMp(eta, "enc5")
    with pytest.raises(sparq.InputError, match="cut 'enc5'"):
        st.dct_mp(torch.ones(2, 4), eta, st.CutStats("enc5"))


def test_values_other_than_f32_and_bf16_are_an_error_naming_the_cut():
    with pytest.raises(sparq.InputError, match="cut 'enc3': values 'fp8'; they are f32 or bf16"):
        st.DctMp(0.9, "enc3", values="fp8")


def test_bad_tensors_are_errors_naming_the_cut():
    cut = st.DctMp(0.9, "dec3")
    with pytest.raises(sparq.InputError, match=r"cut 'dec3': a 1-D tensor \(10,\)"):
        cut(torch.ones(10))
    with pytest.raises(sparq.InputError, match="cut 'dec3': torch.float64"):
        cut(torch.ones(2, 10, dtype=torch.float64))



@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_values_stop_the_cut_both_ways_naming_it(value):
    cut = st.DctMp(0.5, "dec3")
    bad = torch.ones(3, 10)
    bad[1, 4] = value
    with pytest.raises(sparq.NonFiniteError, match=f"cut 'dec3': DCT-MP: the activation matrix holds {value} at 14 of 30"):
        cut(bad)
    x = torch.randn(3, 10, requires_grad=True)
    g = torch.ones(3, 10)
    g[2, 0] = value
    with pytest.raises(sparq.NonFiniteError, match=f"cut 'dec3': the gradient matrix holds {value} at 20 of 30"):
        cut(x).backward(g)


def test_a_forward_message_is_validated_before_use():
    x = torch.randn(4, 20)
    mask, msg = sparq._sparq.dct_mp_forward(x.numpy(), 20, 0.9)
    out = np.empty((4, 20), dtype=np.float32)
    with pytest.raises(sparq.WireError, match="bytes"):
        sparq._sparq.dct_mp_receive(msg[:-1].copy(), 4, 20, 2, out)
    bad = msg.copy()
    bad[0] ^= 0xFF  # row 0 now keeps another number of columns
    with pytest.raises(sparq.WireError, match="row 0 keeps"):
        sparq._sparq.dct_mp_receive(bad, 4, 20, 2, out)
