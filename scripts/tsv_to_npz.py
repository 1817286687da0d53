#!/usr/bin/env python3
"""sparq's Criteo TSV -> the DLRM reference's pre-processed .npz layout.

As facebookresearch/dlrm data_utils.py writes it (np.savez_compressed):
  X_int  int32 [N, 13]  raw counts, missing -> 0
  X_cat  int32 [N, 26]  per-feature dictionary indices: each feature's
                        distinct values numbered in order of first appearance
                        over all the inputs (train, then test), as the
                        reference's dictionaries over all days
  y      int32 [N]
  counts int32 [26]     each dictionary's size

  tsv_to_npz.py --out DIR train.tsv [test.tsv]   -> DIR/train.npz [DIR/test.npz]
"""
import argparse
import os

import numpy as np

from sparq_records import NUM_SPARSE, read_tsv


def first_appearance_index(column):
    """Values -> 0..K-1 numbered by first appearance."""
    _, first, inverse = np.unique(column, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse], len(first)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="train.tsv [test.tsv]")
    ap.add_argument("--out", required=True, help="directory for <stem>.npz per input")
    a = ap.parse_args()
    parts = [read_tsv(p) for p in a.inputs]
    sizes = [len(y) for y, _, _ in parts]
    cats = np.concatenate([c for _, _, c in parts])
    x_cat = np.empty(cats.shape, np.int32)
    counts = np.empty(NUM_SPARSE, np.int32)
    for j in range(NUM_SPARSE):
        x_cat[:, j], counts[j] = first_appearance_index(cats[:, j])
    os.makedirs(a.out, exist_ok=True)
    start = 0
    for path, (y, x_int, _), n in zip(a.inputs, parts, sizes):
        if np.abs(x_int).max(initial=0) >= 2**31:
            raise SystemExit(f"{path}: an integer feature does not fit int32")
        out = os.path.join(a.out, os.path.splitext(os.path.basename(path))[0] + ".npz")
        np.savez_compressed(out, X_int=x_int.astype(np.int32), X_cat=x_cat[start:start + n], y=y, counts=counts)
        print(f"{out}: {n} samples, dictionaries of {counts.min()}..{counts.max()} values")
        start += n


if __name__ == "__main__":
    main()
