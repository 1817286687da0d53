"""The kernels' launches as named ranges of torch.profiler, so a profile of
a training step tells sparq's codec time from the rest of the GPU's
(examples/dlrm_ddp.py --profile-steps)."""
import functools

import torch


def profiled(name):
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            with torch.profiler.record_function(name):
                return fn(*args, **kwargs)
        return call
    return wrap
