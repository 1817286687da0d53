"""A torch before 2.0 or a TorchRec other than 1.9 is refused at import: an
ImportError that names the versions. Each case runs in a fresh interpreter
whose version string is replaced before sparq's modules are imported.
    python -m pytest version_guards_test.py   (with the environment's python)
"""
import subprocess
import sys

import pytest
import torch


@pytest.mark.parametrize("pre, module, words", [
    ("import torch; torch.__version__ = '1.13.1'", "sparq.torch", ["torch 1.13.1"]),
    ("import torchrec; torchrec.__version__ = '1.8.0'", "sparq.torchrec", ["TorchRec 1.8.0", f"torch {torch.__version__}"]),
])
def test_a_version_the_package_was_not_built_for_is_refused(pre, module, words):
    r = subprocess.run([sys.executable, "-c", f"{pre}; import {module}"], capture_output=True, text=True)
    assert r.returncode != 0 and "ImportError" in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
