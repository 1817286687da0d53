"""How the GPU kernels report bad input: a kernel flags each faulty row (or
block) with a code in a small int8 tensor, and the host raises for the first
one. Reading that tensor waits for the kernel; every caller needs the
result before sending it anyway."""
import torch

# The fault code of a NaN or inf in what a kernel encodes, the same in every
# kernel's table (rowwise, threshold, topk): callers raise it apart.
NOT_FINITE = 1


def raise_row_errors(faults, texts, what=""):
    """ValueError with texts[code] for the first nonzero entry of `faults`
    (its index is the row), prefixed by `what` (e.g. the bucket's name)."""
    bad = torch.nonzero(faults)
    if bad.numel():
        row = int(bad[0, 0])
        raise ValueError(what + texts[int(faults[row])].format(row=row))
