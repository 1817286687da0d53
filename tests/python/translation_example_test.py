"""examples/translation.py end to end on a tiny configuration: the cuts at
the paper's places with the bytes of DCT-MP's closed form, a BLEU score,
the test-loss curve; bad flag combinations refused. Run by CTest with pytest."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import translation  # noqa: E402
from translation_data import make_corpus  # noqa: E402

TINY = ["--layers", "5", "--d-model", "16", "--ffn", "64", "--heads", "2", "--train-pairs", "128",
        "--test-pairs", "16", "--epochs", "1", "--batch-size", "32", "--eval-every", "2"]


def test_four_splits_cut_at_the_papers_places_with_dct_mp_bytes(tmp_path):
    out = tmp_path / "run.json"
    translation.main(TINY + ["--splits", "4", "--eta", "0.9", "--out", str(out)])
    r = json.loads(out.read_text())
    assert [c["cut"] for c in r["cuts"]] == ["enc3", "dec3", "enc5", "dec5"]
    keep = 64 - int(64 * 0.9)  # 7 of 64 per token
    for c in r["cuts"]:
        # 4 steps, 2 points of the curve, the final test loss, greedy decoding (the encoder once, the
        # decoder once per generated word): the mask stays at test time.
        if c["cut"].startswith("enc"):
            assert c["forwards"] == 4 + 2 + 1 + 1
        else:
            assert c["forwards"] > 4 + 2 + 1 + 1
        assert c["fwd_reduction"] == pytest.approx(64 * 4 / (64 / 8 + keep * 4))  # mask + values per row
        assert c["bwd_reduction"] == pytest.approx(64 / keep)  # values per row
    assert r["steps"] == 4 and len(r["curve"]) == 2
    assert 0 <= r["bleu"] <= 100 and r["test_loss"] > 0


def test_the_corpus_is_fixed_by_its_seed():
    assert make_corpus(50, 3) == make_corpus(50, 3) != make_corpus(50, 4)


@pytest.mark.parametrize("flags", [["--splits", "4", "--layers", "4"], ["--splits", "1", "--hook", "topk:4/512"]])
def test_bad_flag_combinations_are_refused(flags):
    with pytest.raises(SystemExit):
        translation.parse_args(flags)


class FakeBucket:
    def __init__(self, grad):
        self.grad = grad.clone()

    def index(self):
        return 0

    def buffer(self):
        return self.grad


def test_momentum_correction_hands_the_velocity_to_the_exchange():
    """u_t = m u_(t-1) + g_t goes to the hook in place of g_t (closed form)."""
    import torch
    seen = []
    hook = translation.momentum_corrected(lambda state, bucket: seen.append(bucket.buffer().clone()), 0.9)
    g = [torch.tensor([1.0, -2.0]), torch.tensor([0.5, 4.0]), torch.tensor([0.0, 1.0])]
    for x in g:
        hook(None, FakeBucket(x))
    want = [g[0], 0.9 * g[0] + g[1], 0.81 * g[0] + 0.9 * g[1] + g[2]]
    for got, w in zip(seen, want):
        assert torch.allclose(got, w, rtol=1e-6)


def test_adam_before_the_exchange_then_sgd_is_torchs_adam():
    """On one rank with an exchange that changes nothing, Adam's direction
    handed to the hook and applied by plain SGD moves the weights as
    torch.optim.Adam does (the independent reference)."""
    import torch
    torch.manual_seed(0)
    w0 = torch.randn(5)
    grads = [torch.randn(5) * s for s in (1.0, 0.01, 3.0, 1.0)]
    ref = w0.clone().requires_grad_()
    adam = torch.optim.Adam([ref], lr=0.01, betas=(0.9, 0.98), eps=1e-8)
    hook = translation.adam_before_exchange(lambda state, bucket: None)
    w = w0.clone()
    for g in grads:
        ref.grad = g.clone()
        adam.step()
        b = FakeBucket(g)
        hook(None, b)
        w -= 0.01 * b.buffer()
    assert torch.allclose(w, ref.detach(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("optimizer", ["sgd-mc", "adam-pre"])
def test_optimizers_before_the_exchange_without_one_are_refused(optimizer):
    with pytest.raises(SystemExit, match=optimizer):
        translation.main(TINY + ["--optimizer", optimizer])
