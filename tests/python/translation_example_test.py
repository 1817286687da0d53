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


def test_narrow_cuts_make_the_ffns_at_the_cut_places_that_wide_without_dct_mp():
    a = translation.parse_args(TINY + ["--splits", "2", "--narrow-cuts", "7"])
    model = translation.Transformer(a, 10, 12, {})
    widths = {(side, i + 1): layer.ffn.fc1.out_features
              for side, layers in (("enc", model.enc), ("dec", model.dec)) for i, layer in enumerate(layers)}
    assert widths == {p: 7 if p in (("enc", 5), ("dec", 5)) else 64 for p in widths}
    assert all(isinstance(layer.ffn.cut, translation.nn.Identity) for layer in [*model.enc, *model.dec])


def test_the_corpus_is_fixed_by_its_seed():
    assert make_corpus(50, 3) == make_corpus(50, 3) != make_corpus(50, 4)


@pytest.mark.parametrize("flags", [["--splits", "4", "--layers", "4"], ["--splits", "1", "--hook", "topk:4/512"],
                                   ["--narrow-cuts", "13"], ["--splits", "1", "--narrow-cuts", "0"],
                                   ["--splits", "1", "--narrow-cuts", "300"]])
def test_bad_flag_combinations_are_refused(flags):
    with pytest.raises(SystemExit):
        translation.parse_args(flags)


@pytest.mark.parametrize("optimizer", ["sgd-mc", "adam-pre"])
def test_optimizers_before_the_exchange_without_one_are_refused(optimizer):
    with pytest.raises(SystemExit, match=optimizer):
        translation.main(TINY + ["--optimizer", optimizer])
