"""sparq's row-wise codecs inside TorchRec's sharded embeddings.

    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    import sparq.torchrec

    codecs = sparq.torchrec.qcomm_codecs(fwd="q4", bwd="q2", tables=ebc.embedding_bag_configs())
    model = DistributedModelParallel(model, sharders=[EmbeddingBagCollectionSharder(qcomm_codecs_registry=codecs)])

The pooled embeddings' alltoall of a sharded EmbeddingBagCollection (table-
and column-wise sharding) then carries sparq's wire format: every block for
another rank is rows of `row_len` values, each row q8, q4 or q2 with an fp16
scale and bias, encoded and decoded by sparq's C++ kernels, byte for byte
what sparq's quantized_alltoallv sends. The forward (lookups) and the
backward (their gradients) codecs are set apart. Unlike TorchRec's own
QCommsConfig this adds 4- and 2-bit codes; like it, the codecs keep no state
between steps (no error feedback).

The dense part that DistributedModelParallel puts under DDP takes one of
sparq.torch's hooks through data_parallel_wrapper(hook):

    hook = sparq.torch.dct_hook(0.98, 1000)
    model = DistributedModelParallel(model, ..., data_parallel_wrapper=sparq.torchrec.data_parallel_wrapper(hook))

The codec protocol is TorchRec's QuantizedCommCodec as of TorchRec 1.9: this
module refuses other TorchRec versions with an ImportError that names them,
rather than meeting a changed protocol mid-training.
"""
import math

import torch
import torchrec
from torch.nn.parallel import DistributedDataParallel
from torchrec.distributed.model_parallel import DefaultDataParallelWrapper
from torchrec.distributed.types import CommOp, NoOpQuantizedCommCodec, QuantizedCommCodecs

from . import _sparq

TESTED_TORCHREC = ("1.9",)  # major.minor releases whose codec protocol this module implements
CODECS = ("fp32", "q8", "q4", "q2")

if not torchrec.__version__.startswith(tuple(v + "." for v in TESTED_TORCHREC)):
    raise ImportError(f"sparq.torchrec implements TorchRec {', '.join(TESTED_TORCHREC)}'s codec protocol; this "
                      f"environment has TorchRec {torchrec.__version__} (torch {torch.__version__})")


class _Context:
    """What TorchRec's alltoall reads of a codec's context: no padding."""
    padded_dim_sum_per_rank = None

    def __init__(self, row_dim):
        self.row_dim = row_dim


class RowwiseCodec:
    """One direction's codec (TorchRec's QuantizedCommCodec protocol)."""

    def __init__(self, codec, row_len, direction):
        if codec not in CODECS:
            raise _sparq.InputError(f"sparq.torchrec: {direction} codec '{codec}'; sparq's are {', '.join(CODECS)}")
        if not isinstance(row_len, int) or row_len <= 0:
            raise _sparq.InputError(f"sparq.torchrec: row_len must be a positive integer, got {row_len!r}")
        self.codec, self.row_len, self.direction = codec, row_len, direction
        self.bytes_encoded = 0  # by this rank, all steps, the block it keeps included

    @property
    def quantized_dtype(self):
        return torch.uint8

    def create_context(self):
        return _Context(self.row_len)

    def padded_size(self, input_tensor, dim_per_rank, my_rank, qcomm_ctx):
        for rank, d in enumerate(dim_per_rank):
            if d % self.row_len:
                raise _sparq.InputError(
                    f"sparq.torchrec: rank {rank}'s tables give {d} values per sample, not whole rows of "
                    f"row_len {self.row_len}")
        dim_sum = input_tensor.shape[0] if input_tensor.dim() == 1 else input_tensor.shape[1]
        return dim_sum, 0

    def calc_quantized_size(self, input_len, qcomm_ctx=None):
        if input_len % self.row_len:
            raise _sparq.InputError(f"sparq.torchrec: a block of {input_len} values is not whole rows of "
                                    f"row_len {self.row_len}")
        return _sparq.encoded_bytes(self.codec, self.row_len, input_len)

    def encode(self, input_tensor, qcomm_ctx=None):
        x = _host_float32(input_tensor, f"{self.direction} codec input").reshape(-1)
        out = torch.empty(self.calc_quantized_size(x.numel()), dtype=torch.uint8)
        _sparq.encode(x.numpy(), out.numpy(), self.codec, self.row_len)
        self.bytes_encoded += out.numel()
        return out.to(input_tensor.device)

    def decode(self, input_grad, qcomm_ctx=None):
        y = input_grad.detach().to("cpu").contiguous()
        rows, rest = divmod(y.numel(), _sparq.encoded_bytes(self.codec, self.row_len, self.row_len))
        if rest:
            raise _sparq.WireError(f"sparq.torchrec: {y.numel()} bytes received are not whole {self.codec} rows of "
                                   f"{self.row_len} values")
        out = torch.empty(rows * self.row_len, dtype=torch.float32)
        _sparq.decode(y.numpy(), out.numpy(), self.codec, self.row_len)
        return out.to(input_grad.device)


def _host_float32(t, what):
    if t.dtype != torch.float32:
        raise _sparq.InputError(f"sparq.torchrec: {what} has dtype {t.dtype}; the codecs take float32")
    return t.detach().to("cpu").contiguous()


class _Unsupported(NoOpQuantizedCommCodec):
    """Stands for a comm op sparq has no codec for: TorchRec may ask what it
    would send (the planner does, for every op), but encoding fails, rather
    than letting the op run in fp32 unnoticed."""

    def __init__(self, op):
        self.op = op

    @property
    def quantized_dtype(self):  # (a method in TorchRec's NoOpQuantizedCommCodec, where a dtype is read)
        return torch.float32

    def encode(self, input_tensor, qcomm_ctx=None):
        raise _sparq.InputError(f"sparq.torchrec: no codec for {self.op} (sparq's codecs serve the pooled "
                                "alltoall of table- and column-wise sharding)")

    decode = encode


def qcomm_codecs(fwd="q4", bwd="q2", *, row_len=None, tables=None):
    """The registry TorchRec's sharders take as `qcomm_codecs_registry=`.

    fwd, bwd: "fp32", "q8", "q4" or "q2", the pooled lookups' and their
    gradients' codecs. row_len: values per quantization row; None takes the
    greatest common divisor of the `tables`' embedding dims. tables: the
    EmbeddingBagConfigs to check now (a table whose width is not whole rows
    is an InputError naming it).
    """
    if tables is not None:
        tables = list(tables)
        if row_len is None and tables:
            row_len = math.gcd(*(t.embedding_dim for t in tables))
        for t in tables:
            if row_len and t.embedding_dim % row_len:
                raise _sparq.InputError(f"sparq.torchrec: table '{t.name}' has embedding_dim {t.embedding_dim}, "
                                        f"not whole rows of row_len {row_len}")
    if row_len is None:
        raise _sparq.InputError("sparq.torchrec.qcomm_codecs: give row_len, or the tables to take it from")
    codecs = QuantizedCommCodecs()
    codecs.forward = RowwiseCodec(fwd, row_len, "forward")
    codecs.backward = RowwiseCodec(bwd, row_len, "backward")
    registry = {CommOp.POOLED_EMBEDDINGS_ALL_TO_ALL.name: codecs}
    for op in (CommOp.POOLED_EMBEDDINGS_REDUCE_SCATTER, CommOp.SEQUENCE_EMBEDDINGS_ALL_TO_ALL):
        unsupported = QuantizedCommCodecs()
        unsupported.forward = unsupported.backward = _Unsupported(op.value)
        registry[op.name] = unsupported
    return registry


class _HookedDataParallelWrapper(DefaultDataParallelWrapper):
    def __init__(self, hook, **ddp_options):
        super().__init__(**ddp_options)
        self.hook = hook

    def _ddp_wrap(self, dmp, env, device, ddp_ignore_param_names):
        super()._ddp_wrap(dmp, env, device, ddp_ignore_param_names)
        ddp = dmp._dmp_wrapped_module
        if not isinstance(ddp, DistributedDataParallel):
            raise _sparq.InputError("sparq.torchrec.data_parallel_wrapper: the model has no dense parameters "
                                    "for DDP, so nothing for the hook")
        ddp.register_comm_hook(None, self.hook)


def data_parallel_wrapper(hook, *, bucket_cap_mb=25, static_graph=True):
    """What DistributedModelParallel takes as `data_parallel_wrapper=`: its
    dense part under DDP (TorchRec's default wrapper and options) with one
    of sparq.torch's hooks (dct_hook, quantized_hook, topk_hook)."""
    if not callable(hook):
        raise _sparq.InputError("sparq.torchrec.data_parallel_wrapper: the hook is not callable")
    return _HookedDataParallelWrapper(hook, bucket_cap_mb=bucket_cap_mb, static_graph=static_graph)
