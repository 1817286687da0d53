"""A GPipe pipeline over a sparq Comm, with DCT-MP at its cuts.

Rank s of the Comm runs stage s of the model; every cut between two stages
carries the activations forward and their gradients back, in DCT-MP's wire
format (eta given) or dense fp32 (eta None). A step runs every micro-batch
forward, then every one backward in reverse (GPipe); each stage then steps
its own optimizer::

    stage = sparq.torch.PipelineStage(my_part, eta=0.9)
    loss = stage.step(x if first else None, y if last else None, loss_fn=..., micro_batches=4)
    opt.step()

torch.distributed.pipelining was the first candidate; its stages exchange
the tensors a stage returns and their gradients, so a compressed payload
would have to be a stage's output with a gradient of its own, and the
counters would be Gloo's, which count nothing. This schedule sends each
cut's message as one sparq message, so the transport's counters are the
bytes per cut.

Every message starts with a 16-byte header (kind, rows, cols, keep). A stage
that fails (its module, a shape the next stage's eta or module cannot take,
a message that does not decode) tells its neighbours with an error message
in place of the next data message, so every stage raises an exception
naming the stage and the cut instead of waiting for the failed one.
"""
import contextlib

import numpy as np
import torch

from . import _sparq
from .dct_mp import CutStats, check_eta, check_finite, check_values, gather, receive, rows_of, scatter, select

_FWD, _BWD = 1, 2  # tags
_DENSE, _DCT, _ERROR, _DCT_BF16 = 1, 2, 3, 4  # header kinds
_KIND_NAMES = {_DENSE: "dense", _DCT: "DCT-MP (f32 values)", _DCT_BF16: "DCT-MP (bf16 values)"}


class PipelineError(_sparq.Error):
    """Another stage of the pipeline failed (`stage`, the neighbour that said
    so); this one stopped with it."""

    def __init__(self, text, stage):
        super().__init__(text)
        self.stage = stage


def _message(kind, rows, cols, keep, payload):
    header = np.array([kind, rows, cols, keep], dtype=np.uint32).view(np.uint8)
    return np.concatenate([header, payload.reshape(-1).view(np.uint8)])


def _error_message(text):
    return _message(_ERROR, 0, 0, 0, np.frombuffer(text.encode(), dtype=np.uint8).copy())


class PipelineStage:
    """Stage comm.rank of comm.size; module is this stage's part of the model.

    eta: DCT-MP's sparsity at the cuts (None: dense fp32); values: f32 or
    bf16 (sparq's extension). Both stages of a cut must agree; a
    disagreement is an error on both. dense_eval: forward() sends dense
    activations (the model as trained without DCT-MP).
    """

    def __init__(self, module, *, eta=None, values="f32", comm=None, dense_eval=False):
        from .torch import connect  # the Comm of the job's torch.distributed group

        self.comm = comm if comm is not None else connect()
        self.stage, self.stages = self.comm.rank, self.comm.size
        if eta is not None:
            check_eta(eta, f"sparq pipeline stage {self.stage}")
        check_values(values, f"sparq pipeline stage {self.stage}")
        self.module, self.eta, self.values, self.dense_eval = module, eta, values, dense_eval
        self.prev = self.stage - 1 if self.stage > 0 else None
        self.next = self.stage + 1 if self.stage + 1 < self.stages else None
        self.stats = CutStats(f"cut {self.stage}") if self.next is not None else None  # the cut after this stage

    def close(self):
        """Closes the Comm (collective: every stage closes; on Gloo each waits
        for the others' goodbye)."""
        self.comm.close()

    def _where(self, cut=None):
        cut = self.stage if cut is None else cut
        return f"sparq pipeline stage {self.stage} of {self.stages}, cut {cut} (stage {cut} -> {cut + 1})"

    # -- the cut after this stage: send forward, receive gradients ---------
    def _send_forward(self, y, compress):
        where = self._where()
        if y.dim() != 2:  # the next stage would get rows without the shape they came in
            raise _sparq.InputError(f"{where}: an output of shape {tuple(y.shape)}; a cut carries "
                                    "(samples, features)")
        y2 = rows_of(y, where)
        if compress:
            mask, msg = select(y2, self.eta, self.values, where)
            self.stats.record_forward(mask, msg, self.values)
            self.comm.send(self.next, _FWD, _message(self._dct_kind(), mask.rows, mask.cols, mask.keep, msg))
            return mask
        check_finite(y2, where, "activation")
        self.comm.send(self.next, _FWD, _message(_DENSE, y2.shape[0], y2.shape[1], y2.shape[1], y2.numpy()))
        return None

    def _recv_grad(self, y, mask):
        where = self._where()
        kind, rows, cols, keep, payload = self._recv(self.next, _BWD, where)
        n = y.numel() // y.shape[-1]
        expect = mask.keep if mask is not None else y.shape[-1]
        if (kind, rows, cols, keep) != (self._dct_kind() if mask is not None else _DENSE, n, y.shape[-1], expect):
            raise _sparq.WireError(f"{where}: a {_KIND_NAMES[kind]} gradient message for {rows}x{cols} keeping "
                                   f"{keep}, where {n}x{y.shape[-1]} keeping {expect} was sent")
        if mask is not None:
            self.stats.record_backward(mask, payload)
            g = scatter(mask, payload, self.values, where)
        elif payload.nbytes != rows * cols * 4:
            raise _sparq.WireError(f"{where}: a dense gradient message of {payload.nbytes} bytes for {rows}x{cols}")
        else:
            g = torch.from_numpy(payload.view(np.float32).copy())
        return g.reshape(y.shape).to(y.device)

    # -- the cut before this stage: receive forward, send gradients --------
    def _recv_forward(self, compress):
        where = self._where(self.stage - 1)
        kind, rows, cols, keep, payload = self._recv(self.prev, _FWD, where)
        want = self._dct_kind() if compress else _DENSE
        if kind != want:
            raise _sparq.InputError(f"{where}: stage {self.prev} sends {_KIND_NAMES[kind]} activations, this stage "
                                    f"expects {_KIND_NAMES[want]} (eta {self.eta} here)")
        if compress:
            if keep != _sparq.dct_mp_kept(cols, self.eta):
                raise _sparq.InputError(f"{where}: stage {self.prev} keeps {keep} of {cols} columns, eta "
                                        f"{self.eta} here keeps {_sparq.dct_mp_kept(cols, self.eta)}: the stages' "
                                        "eta differ")
            x, mask = receive(payload, rows, cols, keep, self.values, where)
        else:
            if payload.nbytes != rows * cols * 4 or keep != cols:
                raise _sparq.WireError(f"{where}: a dense message of {payload.nbytes} bytes for {rows}x{cols}")
            x, mask = torch.from_numpy(payload.view(np.float32).copy()).reshape(rows, cols), None
        return x.requires_grad_(), mask

    def _send_grad(self, x, mask):
        g = x.grad if x.grad is not None else torch.zeros_like(x)
        if mask is not None:
            msg = gather(mask, g.contiguous(), self.values, self._where(self.stage - 1))
            self.comm.send(self.prev, _BWD, _message(self._dct_kind(), mask.rows, mask.cols, mask.keep, msg))
        else:
            check_finite(g, self._where(self.stage - 1), "gradient")
            self.comm.send(self.prev, _BWD, _message(_DENSE, g.shape[0], g.shape[1], g.shape[1], g.numpy()))

    def _dct_kind(self):
        return _DCT if self.values == "f32" else _DCT_BF16

    def _recv(self, peer, tag, where):
        m = self.comm.recv_message(peer, tag)
        self._progress["fwd" if tag == _FWD else "bwd"] += 1  # taken, whatever it holds
        if m.nbytes < 16:
            raise _sparq.WireError(f"{where}: a message of {m.nbytes} bytes from stage {peer}, shorter than its header")
        kind, rows, cols, keep = (int(v) for v in m[:16].view(np.uint32))
        if kind == _ERROR:
            raise PipelineError(f"{where}: stopped: {bytes(m[16:]).decode(errors='replace')}", peer)
        if kind not in _KIND_NAMES:
            raise _sparq.WireError(f"{where}: a message of unknown kind {kind} from stage {peer}")
        return kind, rows, cols, keep, m[16:]

    # -- the schedule -------------------------------------------------------
    def step(self, inputs=None, targets=None, *, loss_fn=None, micro_batches=1):
        """One training step of GPipe over micro_batches (the same number on
        every stage); gradients accumulate into the module's parameters as for
        the mean loss over the whole batch (each micro-batch's loss weighted by
        its rows). Stage 0 takes `inputs`, the last stage `targets` and
        `loss_fn(output, target)` (a mean over the micro-batch); the last stage
        returns the batch's loss."""
        last = self.next is None
        if self.prev is None and inputs is None or last and (targets is None or loss_fn is None):
            raise _sparq.InputError(f"sparq pipeline stage {self.stage}: the first stage takes inputs, the last "
                                    "targets and loss_fn")
        compress = self.eta is not None
        sent, got, losses = [], [], []
        progress = self._progress = {"phase": "forward", "fwd": 0, "bwd": 0, "m": micro_batches}  # messages taken
        with self._guard(progress):
            xs = inputs.tensor_split(micro_batches) if self.prev is None else [None] * micro_batches
            ts = targets.tensor_split(micro_batches) if last else [None] * micro_batches
            for m in range(micro_batches):
                got.append((xs[m], None) if self.prev is None else self._recv_forward(compress))
                y = self.module(got[m][0])
                if last:
                    losses.append(loss_fn(y, ts[m]) * (ts[m].shape[0] / targets.shape[0]))
                else:
                    sent.append((y, self._send_forward(y, compress)))
            progress["phase"] = "backward"
            for m in reversed(range(micro_batches)):
                if last:
                    losses[m].backward()
                else:
                    y, mask = sent[m]
                    y.backward(self._recv_grad(y, mask))
                if self.prev is not None:
                    self._send_grad(*got[m])
        return float(sum(loss.item() for loss in losses)) if last else None

    @torch.no_grad()
    def forward(self, inputs=None, *, micro_batches=1):
        """The model's output (on the last stage; None elsewhere) without
        gradients, the mask applied at every cut as in training unless
        dense_eval."""
        compress = self.eta is not None and not self.dense_eval
        outs = []
        progress = self._progress = {"phase": "evaluation", "fwd": 0, "bwd": 0, "m": micro_batches}
        with self._guard(progress):
            xs = inputs.tensor_split(micro_batches) if self.prev is None else [None] * micro_batches
            for m in range(micro_batches):
                x = xs[m] if self.prev is None else self._recv_forward(compress)[0]
                y = self.module(x)
                if self.next is None:
                    outs.append(y)
                else:
                    self._send_forward(y, compress)
        return torch.cat(outs) if self.next is None else None

    @contextlib.contextmanager
    def _guard(self, progress):
        """On an exception, releases the neighbours that would wait for this
        stage (an error message each) and raises it naming the stage."""
        try:
            yield
        except PipelineError as e:
            self._release(progress, str(e), came_from=e.stage)
            raise
        except Exception as e:
            text = f"sparq pipeline stage {self.stage} of {self.stages} ({progress['phase']}): {e}"
            self._release(progress, text, came_from=None)
            try:
                renamed = type(e)(text)
            except TypeError:  # an exception type that takes other arguments
                renamed = RuntimeError(text)
            raise renamed from e

    def _release(self, progress, text, came_from):
        """Before a failed stage tells its previous stage (which waits for
        gradients), it takes the activations that stage still has to send
        (Gloo's send waits for the receive); in backward it takes the
        gradients the next stage still has to send. The next stage, in
        forward, waits for activations: it gets the error in their place."""
        msg = _error_message(text)
        backward = progress["phase"] == "backward"
        try:
            if self.next is not None and came_from != self.next:
                if backward:
                    self._drain(self.next, _BWD, progress["m"] - progress["bwd"])
                else:
                    self.comm.send(self.next, _FWD, msg)
            if self.prev is not None and came_from != self.prev:
                if not backward:
                    self._drain(self.prev, _FWD, progress["m"] - progress["fwd"])
                if progress["phase"] != "evaluation":  # where the previous stage waits for nothing
                    self.comm.send(self.prev, _BWD, msg)
        except _sparq.Error:
            pass  # a neighbour is gone too; this stage raises anyway

    def _drain(self, peer, tag, count):
        for _ in range(count):
            m = self.comm.recv_message(peer, tag)
            if m.nbytes >= 4 and int(m[:4].view(np.uint32)[0]) == _ERROR:
                return
