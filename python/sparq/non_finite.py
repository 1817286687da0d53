"""A DDP hook's `non_finite="skip"`: a step whose gradients hold a NaN or
inf on any rank is skipped on every rank, as AMP's GradScaler skips one,
and the codec's state is left as it was before the step.

The buckets of a step reach the hook one at a time, so the guard decides
bucket by bucket, in the order every rank sees them: each bucket's flag (1
where this rank's gradients hold a NaN or inf) is summed over the ranks
first, 4 bytes and one collective's latency. The first bucket flagged
anywhere restores the codec's state saved at the step's first bucket
(the residuals of the buckets already exchanged included), and every
bucket of the step from then on is handed back as zeros, unexchanged.
The caller skips its optimizer's step where `skipped` (Hook.skipped)."""
import numpy as np

from . import _sparq


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

    def bucket_is_skipped(self, grad, step):
        """Whether this bucket (a numpy float32 view) and the rest of the
        step are skipped; every rank calls it for the same buckets."""
        if self.skipping:
            return True
        flag = np.array([0.0 if np.isfinite(grad).all() else 1.0], dtype=np.float32)
        self.bytes_sent += self._flags.exchange("non-finite", flag, [], step)["bytes_sent"]
        if flag[0] > 0:
            self._x.load_state(self._saved)
            self.skipping = True
        return self.skipping
