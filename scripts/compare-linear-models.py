#!/usr/bin/python3
"""The models of scripts/reproduce-linear's `exact` part, compared.

    compare-linear-models.py DIR

DIR holds p<P>-<exchange>.ck (sparq linear --save) and the runs' metrics
beside them in docs/data/linear/exact. For each P, every sparse exchange's
weights against the dense ring's: identical bits, or the largest difference
relative to the weight's size. Prints one JSON object.
"""
import glob
import json
import os
import struct
import sys


def weights(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"SPARQCK4", path
    meta_len = struct.unpack_from("<Q", data, 8)[0]
    at = 16 + meta_len
    n = struct.unpack_from("<Q", data, at)[0]
    return struct.unpack_from(f"<{n}f", data, at + 8)


def main():
    d = sys.argv[1]
    out = {}
    for dense in sorted(glob.glob(os.path.join(d, "p*-dense-ring.ck"))):
        p = os.path.basename(dense).split("-", 1)[0]
        w0 = weights(dense)
        for other in sorted(glob.glob(os.path.join(d, p + "-*.ck"))):
            if other == dense:
                continue
            w = weights(other)
            worst = max(abs(a - b) / (1 + abs(a)) for a, b in zip(w0, w))
            name = os.path.basename(other)[:-3]
            out[name] = {"identical_bits": w == w0, "max_rel_difference": worst, "weights": len(w)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
