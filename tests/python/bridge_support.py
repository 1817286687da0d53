"""What the bridge's checks share (bridge_test.py runs them on every rank):
the registry of checks, a small model with each rank's batch, and
references computed without sparq."""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

CHECKS = []
CUDA_CHECKS = []  # run by --cuda, where torch has a CUDA device


def check(fn):
    CHECKS.append(fn)
    return fn


def device_codec_check(fn):
    """A check of sparq.gpu's codecs against the host's. Without a GPU they
    run under Triton's interpreter and take most of a run's time, and what
    a launcher changes (how the ranks start, which transport sparq picks)
    the other checks cover: --no-device-codecs leaves them out."""
    fn.device_codecs = True
    return check(fn)


def cuda_check(fn):
    CUDA_CHECKS.append(fn)
    return fn


def model_and_batch(rank, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(64, 13, generator=g)
    y = torch.rand(64, 1, generator=g)
    return model, x, y


def ddp_grads(ddp, x, y):
    ddp.zero_grad(set_to_none=True)
    nn.functional.mse_loss(ddp(x), y).backward()
    return {n[len("module."):]: p.grad.clone() for n, p in ddp.named_parameters()}


def local_grads(model, x, y):
    model.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def run_steps(rank, steps, hook, model):
    """DDP with `hook`: a gradient step of 0.1 at each of `steps` (the batch
    shifted by the step); each step's averaged gradients."""
    ddp = DDP(model, bucket_cap_mb=0.005)
    ddp.register_comm_hook(None, hook)
    _, x, y = model_and_batch(rank)
    out = []
    for s in steps:
        g = ddp_grads(ddp, x.to(model[0].weight.device) + s, y.to(model[0].weight.device))
        with torch.no_grad():
            for p in ddp.parameters():
                p -= 0.1 * p.grad
        out.append(g)
    hook.wait()
    return out


def exchange_blocks(out, blocks, rank, size):
    """An exact alltoall by point-to-point sends (gloo has no all_to_all)."""
    reqs = []
    for j in range(size):
        if j == rank:
            out[j].copy_(blocks[j])
        else:
            reqs.append(dist.isend(blocks[j].contiguous(), j))
            reqs.append(dist.irecv(out[j], j))
    for r in reqs:
        r.wait()
