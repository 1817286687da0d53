"""`non_finite="skip"` in the PyTorch bridge: a step whose gradients (or
what crosses an alltoall or a DCT-MP cut) hold a NaN or inf on any rank is
skipped on every rank, as AMP's GradScaler skips one, and the codec's state
is left as it was before the step.

The hook's buckets reach it one at a time, so the guard decides bucket by
bucket, in the order every rank sees them: each bucket's flag (1 where this
rank's gradients hold a NaN or inf) is summed over the ranks first, 4 bytes
and one collective's latency, and the first bucket flagged anywhere
restores the codec's state saved at the step's first bucket (the buckets
already exchanged included); every later bucket of the step comes back as
zeros, unexchanged. A skipping alltoall or DCT-MP cut sends such values as
0 and marks the step (`mark`): they run inside autograd, where the hook
cannot see them, so the step's verdict comes after backward, from
Hook.step_skipped(), one more 4-byte sum over the ranks."""
import threading

import numpy as np
import torch

from . import _sparq

_seen = threading.Event()  # a skipping alltoall or cut met a NaN or inf since the last verdict


def check_mode(non_finite, what):
    if non_finite not in ("fail", "skip"):
        raise _sparq.InputError(f"{what}: non_finite '{non_finite}'; it is fail or skip")
    return non_finite == "skip"


def zeroed(t):
    """t, or where it holds a NaN or inf a copy with those set to 0, the step
    marked for skipping."""
    bad = ~torch.isfinite(t)
    if not bool(bad.any()):
        return t
    _seen.set()
    return t.masked_fill(bad, 0.0)


def take_seen():
    seen = _seen.is_set()
    _seen.clear()
    return seen


class StepGuard:
    def __init__(self, exchange, comm):
        self._x = exchange
        self._flags = _sparq.GradExchange(comm, "none")  # a 1-value allreduce
        self._saved = None
        self.skipping = False  # this step: a bucket was flagged
        self.bytes_sent = 0

    def start_step(self):
        """At a step's first bucket, on the hook's thread: the state to go back to."""
        self._saved = self._x.state()
        self.skipping = False

    def _any_rank(self, here, step):
        flag = np.array([1.0 if here else 0.0], dtype=np.float32)
        self.bytes_sent += self._flags.exchange("non-finite", flag, [], step)["bytes_sent"]
        return flag[0] > 0

    def _skip(self):
        if self._saved is not None:
            self._x.load_state(self._saved)
        self.skipping = True

    def bucket_is_skipped(self, grad, step):
        """Whether this bucket (a numpy float32 view) and the rest of the
        step are skipped; every rank calls it for the same buckets."""
        if not self.skipping and self._any_rank(not np.isfinite(grad).all(), step):
            self._skip()
        return self.skipping

    def end_step(self, step):
        """The step's verdict, the same on every rank: a flagged bucket, or a
        skipping alltoall or cut on any rank (take_seen)."""
        if self._any_rank(self.skipping or take_seen(), step) and not self.skipping:
            self._skip()
        skipped, self.skipping, self._saved = self.skipping, False, None
        return skipped
