"""sparq.torch's optimizers before the exchange, against closed forms and
torch.optim.Adam, on buckets made by hand (no process group needed). Run by
CTest with pytest."""
import torch

import sparq.torch as st


class Bucket:
    """What the wrappers use of DDP's GradBucket: the flat buffer and its
    parameters, in buffer order."""

    def __init__(self, params):
        self.params = params
        self.buf = torch.cat([p.grad.reshape(-1) for p in params])

    def buffer(self):
        return self.buf

    def parameters(self):
        return self.params


def test_momentum_hands_the_velocity_to_the_exchange():
    """u_t = m u_(t-1) + g_t goes to the hook in place of g_t."""
    p = torch.nn.Parameter(torch.zeros(2))
    seen = []
    hook = st.momentum_before_exchange(lambda state, bucket: seen.append(bucket.buffer().clone()), 0.9)
    g = [torch.tensor([1.0, -2.0]), torch.tensor([0.5, 4.0]), torch.tensor([0.0, 1.0])]
    for x in g:
        p.grad = x.clone()
        hook(None, Bucket([p]))
    want = [g[0], 0.9 * g[0] + g[1], 0.81 * g[0] + 0.9 * g[1] + g[2]]
    for got, w in zip(seen, want):
        assert torch.allclose(got, w, rtol=1e-6)


def test_adam_before_the_exchange_then_sgd_is_torchs_adam_across_rebucketing():
    """On one rank with an exchange that changes nothing, Adam's direction
    applied by plain SGD moves the weights as torch.optim.Adam does, though
    the parameters share a bucket at first and then sit in buckets of their
    own in the other order (as DDP re-buckets after the first step)."""
    torch.manual_seed(0)
    a0, b0 = torch.randn(5), torch.randn(3)
    ref = [torch.nn.Parameter(a0.clone()), torch.nn.Parameter(b0.clone())]
    mine = [torch.nn.Parameter(a0.clone()), torch.nn.Parameter(b0.clone())]
    adam = torch.optim.Adam(ref, lr=0.01, betas=(0.9, 0.98), eps=1e-8)
    hook = st.adam_before_exchange(lambda state, bucket: None, betas=(0.9, 0.98), eps=1e-8)
    for step, scale in enumerate((1.0, 0.01, 3.0, 1.0)):
        ga, gb = torch.randn(5) * scale, torch.randn(3)
        for p, g in zip(ref, (ga, gb)):
            p.grad = g.clone()
        adam.step()
        for p, g in zip(mine, (ga, gb)):
            p.grad = g.clone()
        buckets = [Bucket(mine)] if step == 0 else [Bucket([mine[1]]), Bucket([mine[0]])]
        with torch.no_grad():
            for bucket in buckets:
                hook(None, bucket)
                offset = 0
                for p in bucket.parameters():
                    p -= 0.01 * bucket.buffer()[offset:offset + p.numel()].view_as(p)
                    offset += p.numel()
    for got, want in zip(mine, ref):
        assert torch.allclose(got.detach(), want.detach(), rtol=1e-5, atol=1e-7)
