"""sparq: communication-efficient collectives for training recommendation models.

The collectives are sparq's C++ library (the _sparq extension); sparq.torch
puts them behind PyTorch's DDP communication hooks and an autograd alltoall,
sparq.torchrec behind TorchRec's sharded embeddings.
"""
import ctypes
import os
import sys


def _load_extension():
    """Imports _sparq so that its Gloo calls reach the Gloo it was built
    against (Debian's libgloo). PyTorch's wheels carry another Gloo inside
    libtorch_cpu; loaded normally it stays out of other libraries' reach, but
    with TORCH_USE_RTLD_GLOBAL=1 its symbols are global and would win. Then
    _sparq is loaded with RTLD_DEEPBIND, which puts its own dependencies
    first (docs/pytorch.md)."""
    if not hasattr(ctypes.CDLL(None), "_ZN4gloo10allgathervERNS_17AllgathervOptionsE"):
        from . import _sparq
        return _sparq
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
    try:
        from . import _sparq
    finally:
        sys.setdlopenflags(flags)
    return _sparq


_sparq = _load_extension()
from ._sparq import (  # noqa: E402,F401
    AbortedError,
    Comm,
    Error,
    GradExchange,
    InputError,
    NonFiniteError,
    TimeoutError,
    WireError,
    launched_by_mpiexec,
    quantized_alltoallv,
)
from .planner import Plan, plan  # noqa: E402,F401
