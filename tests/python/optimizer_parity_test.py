#!/usr/bin/env python3
"""sparq's dense optimizers and LR schedule against PyTorch's on the same gradients.

For sgd, adagrad and adam, with and without the DLRM reference's learning-rate
schedule, torch.optim.SGD/Adagrad/Adam (defaults) driven by a scheduler with
the semantics of dlrm_s_pytorch.py's LRPolicyScheduler, and sparq's dense
update (tests/model/optimizer_trace) take the same initial parameters and
gradients; after every update the parameters must agree within 1e-6.

  .venv/bin/python optimizer_parity_test.py path/to/optimizer_trace
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch.optim.lr_scheduler import _LRScheduler

TOL = 1e-6


class LRPolicyScheduler(_LRScheduler):
    """The reference's schedule: get_lr() reads the scheduler's step count,
    which is 1 after construction and goes up by one with every step() (called
    after each optimizer.step()), so update k runs with the rate for count k.
    Where the reference would use a last rate it never computed (and fail),
    this one, as sparq, keeps the base rate."""

    def __init__(self, optimizer, num_warmup_steps, decay_start_step, num_decay_steps):
        self.num_warmup_steps = num_warmup_steps
        self.decay_start_step = decay_start_step
        self.decay_end_step = decay_start_step + num_decay_steps
        self.num_decay_steps = num_decay_steps
        self.last_lr = None
        super().__init__(optimizer)

    def get_lr(self):
        step_count = self._step_count
        if step_count < self.num_warmup_steps:
            scale = 1.0 - (self.num_warmup_steps - step_count) / self.num_warmup_steps
            self.last_lr = [base_lr * scale for base_lr in self.base_lrs]
            return self.last_lr
        if self.decay_start_step <= step_count < self.decay_end_step:
            decayed_steps = step_count - self.decay_start_step
            scale = ((self.num_decay_steps - decayed_steps) / self.num_decay_steps) ** 2
            self.last_lr = [max(0.0000001, base_lr * scale) for base_lr in self.base_lrs]
            return self.last_lr
        if self.num_decay_steps > 0 and self.last_lr is not None:
            return self.last_lr  # held: after the decay, or between warmup and decay
        return self.base_lrs


def gradients(rng, steps, n):
    """Steps of gradients of varied scale, with exact zeros and a few large values."""
    g = rng.standard_normal((steps, n)).astype(np.float32)
    g *= np.float32(10.0) ** rng.integers(-3, 1, size=(steps, 1)).astype(np.float32)
    g[rng.random((steps, n)) < 0.1] = 0
    g[rng.random((steps, n)) < 0.01] *= 30
    return g


def torch_trace(name, lr, schedule, p0, grads):
    p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam}[name]([p], lr=lr)
    sched = LRPolicyScheduler(opt, *schedule)
    out = []
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
        sched.step()
        out.append(p.detach().numpy().copy())
    return np.stack(out)


def sparq_trace(tool, tmp, name, lr, schedule, p0, grads):
    src, dst = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
    with open(src, "wb") as f:
        f.write(np.array([p0.size, len(grads)], dtype="<u8").tobytes())
        f.write(p0.astype("<f4").tobytes())
        f.write(grads.astype("<f4").tobytes())
    subprocess.run([tool, name, repr(lr), *map(str, schedule), src, dst], check=True)
    return np.fromfile(dst, dtype="<f4").reshape(len(grads), p0.size)


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(11)
    n, steps = 4096, 30
    p0 = rng.uniform(-0.5, 0.5, n).astype(np.float32)
    grads = gradients(rng, steps, n)
    # none; warmup, hold, decay, hold; warmup straight into the decay
    schedules = [(0, 0, 0), (5, 9, 12), (4, 4, 20)]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name, lr in [("sgd", 0.01), ("adagrad", 0.05), ("adam", 0.01)]:
            for schedule in schedules:
                want = torch_trace(name, lr, schedule, p0, grads)
                got = sparq_trace(tool, tmp, name, lr, schedule, p0, grads)
                per_step = np.abs(want - got).max(axis=1)
                moved = np.abs(want[-1] - p0).max()
                ok = per_step.max() <= TOL
                failed |= not ok
                print(f"{name:8s} schedule W,S,D={schedule}: max abs diff {per_step.max():.2e} over {steps} "
                      f"updates (parameters moved up to {moved:.3f}) {'ok' if ok else 'FAIL'}")
                if not ok:  # where it first went apart, to tell a rounding drift from a wrong update
                    k = int(np.argmax(per_step > TOL))
                    i = int(np.argmax(np.abs(want[k] - got[k])))
                    before = p0[i] if k == 0 else want[k - 1][i]
                    print(f"  first at update {k + 1}, element {i}: torch {want[k][i]!r}, sparq {got[k][i]!r}, "
                          f"before {before!r} (sparq {p0[i] if k == 0 else got[k - 1][i]!r}), gradient {grads[k][i]!r}, "
                          f"torch threads {torch.get_num_threads()}")
    if failed:
        sys.exit("optimizer_parity_test: sparq and PyTorch differ by more than 1e-6")
    print("optimizer_parity_test: Adagrad/Adam and the LR schedule checked against PyTorch's optimizers and "
          "schedule on the same gradients (1e-6)")


if __name__ == "__main__":
    main()
