"""sparq.torchrec's codecs inside TorchRec's pooled-embeddings alltoall,
checked on every rank of bridge_test.py's runs against sparq's own
quantized alltoall (sparq.torch.quantized_alltoall, whose blocks go through
sparq's quantized_alltoallv)."""
import torch
import torch.distributed as dist
from torchrec.distributed import comm_ops
from torchrec.distributed.comm_ops import alltoall_pooled
from torchrec.distributed.types import CommOp
from torchrec.modules.embedding_configs import EmbeddingBagConfig

import sparq
import sparq.torch as st
import sparq.torchrec

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def roundtrip(x, codec, row_len):
    """What a block of x is after sparq's encode and decode."""
    c = sparq.torchrec.RowwiseCodec(codec, row_len, "check")
    return c.decode(c.encode(x)).view_as(x)


@check
def torchrec_alltoall_with_sparq_codecs_equals_sparq_alltoall(rank, size):
    """Lookups forward in q4, their gradients back in q2, uneven batches:
    every block from another rank decodes to the bits sparq's alltoall gives;
    the block a rank keeps, which TorchRec encodes too and sparq does not, is
    its encode-decode round trip."""
    D = 16
    batches = [3 + r for r in range(size)]
    B = batches[rank]
    g = torch.Generator().manual_seed(7 + rank)
    x = torch.randn(sum(batches), D, generator=g)
    w = torch.randn(B, size * D, generator=torch.Generator().manual_seed(99 + rank))
    codecs = sparq.torchrec.qcomm_codecs("q4", "q2", row_len=D)[CommOp.POOLED_EMBEDDINGS_ALL_TO_ALL.name]
    division = comm_ops.get_gradient_division()
    comm_ops.set_gradient_division(False)  # the sum of the gradients, as sparq's alltoall gives it
    try:
        xt = x.clone().requires_grad_()
        yt = alltoall_pooled(xt, batches, [D] * size, group=dist.group.WORLD, codecs=codecs).wait()
        (yt * w).sum().backward()
    finally:
        comm_ops.set_gradient_division(division)
    xs = x.clone().requires_grad_()
    ys = st.quantized_alltoall(xs, batches, 4, 2, recv_splits=[B] * size)  # (size * B, D), by source rank
    ys = ys.view(size, B, D).permute(1, 0, 2).reshape(B, size * D)  # TorchRec's layout: sources side by side
    (ys * w).sum().backward()
    assert yt.shape == ys.shape, (yt.shape, ys.shape)
    lo = sum(batches[:rank])
    for src in range(size):
        cols = slice(src * D, (src + 1) * D)
        if src == rank:
            assert torch.equal(yt[:, cols], roundtrip(x[lo:lo + B], "q4", D)), "own block forward"
            assert torch.equal(ys[:, cols], x[lo:lo + B]), "sparq keeps its own block as it is"
        else:
            assert torch.equal(yt[:, cols], ys[:, cols]), f"block from rank {src}"
    for dst in range(size):
        rows = slice(sum(batches[:dst]), sum(batches[:dst + 1]))
        if dst == rank:
            # TorchRec sent its own block's gradient through q2 as well.
            assert torch.equal(xt.grad[rows], roundtrip(xs.grad[rows], "q2", D)), "own block's gradient"
        else:
            assert torch.equal(xt.grad[rows], xs.grad[rows]), f"gradient block from rank {dst}"
    assert codecs.forward.bytes_encoded == sum(batches) * sparq._sparq.encoded_bytes("q4", D, D)


@check
def qcomm_codecs_refuses_what_it_cannot_do(rank, size):
    for call, words in [
        (lambda: sparq.torchrec.qcomm_codecs("q3", "q2", row_len=8), "'q3'"),
        (lambda: sparq.torchrec.qcomm_codecs("q4", "int8", row_len=8), "'int8'"),
        (lambda: sparq.torchrec.qcomm_codecs("q4", "q2"), "row_len"),
        (lambda: sparq.torchrec.qcomm_codecs("q4", "q2", row_len=0), "row_len"),
        (lambda: sparq.torchrec.qcomm_codecs("q4", "q2", row_len=8, tables=[
            EmbeddingBagConfig(name="t_wide", embedding_dim=16, num_embeddings=10, feature_names=["f0"]),
            EmbeddingBagConfig(name="t_odd", embedding_dim=12, num_embeddings=10, feature_names=["f1"])]), "'t_odd'"),
    ]:
        try:
            call()
            raise AssertionError(f"accepted; expected an InputError naming {words}")
        except sparq.InputError as e:
            assert words in str(e), str(e)
    registry = sparq.torchrec.qcomm_codecs("q8", "q8", tables=[
        EmbeddingBagConfig(name="a", embedding_dim=16, num_embeddings=10, feature_names=["f0"]),
        EmbeddingBagConfig(name="b", embedding_dim=24, num_embeddings=10, feature_names=["f1"])])
    assert registry[CommOp.POOLED_EMBEDDINGS_ALL_TO_ALL.name].forward.row_len == 8  # gcd(16, 24)
    try:  # reduce-scatter (row-wise sharding) has no sparq codec: used, it says so
        registry[CommOp.POOLED_EMBEDDINGS_REDUCE_SCATTER.name].forward.encode(torch.zeros(8))
        raise AssertionError("the reduce-scatter codec ran")
    except sparq.InputError as e:
        assert "reduce_scatter" in str(e), str(e)
    try:  # a block that is not whole rows
        registry[CommOp.POOLED_EMBEDDINGS_ALL_TO_ALL.name].forward.calc_quantized_size(12)
        raise AssertionError("12 values accepted as rows of 8")
    except sparq.InputError as e:
        assert "12 values" in str(e), str(e)
