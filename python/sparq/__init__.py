"""sparq: communication-efficient collectives for training recommendation models.

The collectives are sparq's C++ library (the _sparq extension); sparq.torch
puts them behind PyTorch's DDP communication hooks and an autograd alltoall.
"""
from ._sparq import (  # noqa: F401
    AbortedError,
    Comm,
    Error,
    GradExchange,
    InputError,
    TimeoutError,
    WireError,
    launched_by_mpiexec,
    quantized_alltoallv,
)
