"""The CPU codecs' results for gpu_codec_cases.py: computed by the
extension (sparq._sparq) where it is built, or read from a file this module
wrote there, for a GPU machine without the extension:

    python3 gpu_codec_reference.py OUT.npz      # where sparq is installed

Every result is keyed by the case, so a stale file fails loudly."""
import os
import sys

import numpy as np

import gpu_codec_cases as cases


class Reference:
    def __init__(self, path=None):
        self.stored = dict(np.load(path)) if path else None
        self.computed = {}
        if self.stored is None:
            from sparq import _sparq
            self.lib = _sparq

    def _get(self, key, compute):
        if self.stored is not None:
            if key + "/0" not in self.stored:
                raise KeyError(f"{key}: not in the stored CPU results (rewrite them with gpu_codec_reference.py)")
            return tuple(self.stored[f"{key}/{i}"] for i in range(int(self.stored[key + "/n"])))
        out = compute()
        for i, a in enumerate(out):
            self.computed[f"{key}/{i}"] = np.asarray(a)
        self.computed[key + "/n"] = np.array(len(out))
        return out

    def quantize(self, key, x, cols, bits, scale, err=None):
        """(bytes, residual after) of the CPU's row-wise encoding."""
        def compute():
            e = None if err is None else err.copy()
            out = self.lib.rowwise_quantize(x, cols, bits, scale, e)
            return (out,) if e is None else (out, e)
        return self._get(f"q/{key}/{cols}/{bits}/{scale}/{err is not None}", compute)

    def dequantize(self, key, data, cols, bits, scale):
        rows = data.size // ((4 if scale == "f16" else 8) + (cols * bits + 7) // 8)
        return self._get(f"d/{key}/{cols}/{bits}/{scale}",
                         lambda: (self.lib.rowwise_dequantize(data, cols, bits, scale, rows),))

    def threshold(self, key, x, eta):
        return self._get(f"t/{key}/{eta}", lambda: (np.float32(self.lib.sparsity_threshold(x, eta)),))[0]

    def threshold_pack(self, key, x, tau, err=None):
        """(indices, values[, residual after])."""
        def compute():
            e = None if err is None else err.copy()
            idx, val = self.lib.threshold_pack(x, float(tau), e)
            return (idx, val) if e is None else (idx, val, e)
        return self._get(f"p/{key}/{err is not None}", compute)


    def topk(self, key, x, bucket, k, err=None):
        """(indices, values[, residual after]) of TopK per bucket; with err,
        TopK SGD's accumulation as GradExchange does it: W = err + x, the
        pairs of W's TopK, err = W with the sent places zeroed."""
        def compute():
            w = x if err is None else err + x  # float32, as the CPU's e[i] += g[i]
            idx, val = self.lib.bucket_topk(np.ascontiguousarray(w), bucket, k)
            if err is None:
                return idx, val
            left = w.copy()
            left[idx] = 0
            return idx, val, left
        return self._get(f"k/{key}/{err is not None}", compute)


def compute_all(ref):
    """Every CPU result the GPU tests ask for."""
    for cols in cases.COLS:
        for name, x in cases.rowwise_inputs(cols):
            for bits, scale in cases.FORMATS:
                if scale == "f16" and not cases.fp16_safe(name):
                    continue
                data = ref.quantize(name, x, cols, bits, scale)[0]
                ref.quantize(name, x, cols, bits, scale, cases.residual(x.size))
                ref.dequantize(name, data, cols, bits, scale)
    for name, x, eta in cases.threshold_inputs():
        tau = ref.threshold(name, x, eta)
        ref.threshold_pack(name, x, tau)
        ref.threshold_pack(name, x, tau, cases.residual(x.size))
    for name, x, bucket, k in cases.topk_inputs():
        ref.topk(name, x, bucket, k)
        ref.topk(name, x, bucket, k, cases.residual(x.size))


if __name__ == "__main__":
    r = Reference()
    compute_all(r)
    np.savez_compressed(sys.argv[1], **r.computed)
    print(f"{len(r.computed)} arrays -> {sys.argv[1]} ({os.path.getsize(sys.argv[1])} bytes)")
