"""Optimizer state applied to each rank's gradients before a sparsifying
exchange, for error feedback to hold back and release updates rather than
raw gradients. Each wraps a DDP communication hook (sparq's Hook, or any
other): the wrapper rewrites the bucket in place from per-parameter state,
then hands it to the hook; the optimizer after the exchange is plain SGD
(no momentum) at the wrapped optimizer's learning rate.

State is kept per parameter (its slice of the bucket), so DDP's re-bucketing
after the first step keeps it. It is not part of Hook.state_dict().
"""
import torch


def before_exchange(hook, update):
    """A hook that first calls update(state, grad) on each parameter's slice
    of the bucket (state: a dict per parameter, empty at first; grad: the
    slice, rewritten in place), then exchanges the bucket with `hook`."""
    states = {}

    def call(state, bucket):
        buf, offset = bucket.buffer(), 0
        for p in bucket.parameters():
            n = p.numel()
            update(states.setdefault(p, {}), buf[offset:offset + n])
            offset += n
        return hook(state, bucket)

    return call


def momentum_before_exchange(hook, m=0.9):
    """DGC's momentum correction (Lin et al., 2018): each rank keeps a
    velocity u = m * u + grad and hands u to the exchange in place of grad,
    so that a sparsifier's residual accumulates velocities and what it
    releases late still carries its momentum. With a dense exchange this is
    momentum SGD itself (the average is linear). DGC's factor masking
    (zeroing the velocity of sent values) is not done: a hook does not say
    which values it sent."""
    def update(st, grad):
        u = st.setdefault("u", torch.zeros_like(grad))
        u.mul_(m).add_(grad)
        grad.copy_(u)

    return before_exchange(hook, update)


def adam_before_exchange(hook, betas=(0.9, 0.999), eps=1e-8):
    """Adam's direction, computed on each rank from its own gradients (its
    own first and second moments, bias-corrected as torch.optim.Adam's), is
    handed to the exchange in place of the gradient; the optimizer after it
    is SGD at Adam's learning rate. A sparsifier's error feedback then holds
    back and releases updates already scaled by Adam. Fed back gradients
    instead reach Adam as rare bursts, which inflate its second moment and
    so shrink every step. (SparCML's Algorithm 2 feeds back SGD steps; this
    is sparq's extension of it to Adam.) On one rank with a dense exchange
    this is Adam itself; on several, the average of the ranks' Adam
    directions, not Adam on the averaged gradient."""
    b1, b2 = betas

    def update(st, grad):
        if not st:
            st.update(m=torch.zeros_like(grad), v=torch.zeros_like(grad), t=0)
        st["t"] += 1
        st["m"].mul_(b1).add_(grad, alpha=1 - b1)
        st["v"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (st["v"] / (1 - b2 ** st["t"])).sqrt_().add_(eps)
        torch.div(st["m"], denom, out=grad).div_(1 - b1 ** st["t"])

    return before_exchange(hook, update)
