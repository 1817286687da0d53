"""sparq's Criteo data in numpy, for the scripts beside this file.

Reads sparq's TSV (label, 13 integers, 26 hex values; empty fields are 0)
and sparq's binary records (sparq/data/binary_format.h), and maps
categorical values to embedding rows exactly as sparq does
(sparq/data/hash.h): row = fmix32(value ^ 0x9E3779B9 * (t + 1)) % rows.
"""
import numpy as np

NUM_DENSE, NUM_SPARSE = 13, 26
BINARY_MAGIC = b"SPARQCR1"
RECORD = np.dtype([("label", "<f4"), ("dense", "<f4", NUM_DENSE), ("sparse", "<u4", NUM_SPARSE)])


def read_tsv(path):
    """-> y int32 [N], X_int int64 [N, 13] (raw counts), cats uint32 [N, 26]."""
    y, xi, xc = [], [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != 1 + NUM_DENSE + NUM_SPARSE:
                raise SystemExit(f"{path}:{n}: {len(fields)} fields, {1 + NUM_DENSE + NUM_SPARSE} expected")
            y.append(int(fields[0]))
            xi.append([int(x) if x else 0 for x in fields[1:1 + NUM_DENSE]])
            xc.append([int(x, 16) if x else 0 for x in fields[1 + NUM_DENSE:]])
    return (np.array(y, np.int32), np.array(xi, np.int64).reshape(-1, NUM_DENSE),
            np.array(xc, np.uint32).reshape(-1, NUM_SPARSE))


def dense_transform(x_int):
    """log(1 + max(x, 0)) in double, then float32: sparq's criteo_dense_transform."""
    return np.log1p(np.maximum(x_int, 0).astype(np.float64)).astype(np.float32)


def read_records(path):
    """TSV or sparq binary -> labels float32 [N], dense float32 [N, 13], cats uint32 [N, 26]."""
    with open(path, "rb") as f:
        head = f.read(64)
    if head[:8] == BINARY_MAGIC:
        count = int(np.frombuffer(head, "<u8", 1, 24)[0])
        recs = np.fromfile(path, RECORD, count, offset=64)
        if len(recs) != count:
            raise SystemExit(f"{path}: {len(recs)} records, the header says {count}")
        return recs["label"], recs["dense"], recs["sparse"]
    y, x_int, cats = read_tsv(path)
    return y.astype(np.float32), dense_transform(x_int), cats


def fmix32(h):
    h = h.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def categorical_rows(values, table, rows):
    """Embedding rows of table `table` (of `rows` rows) for uint32 values."""
    salt = np.uint32((0x9E3779B9 * (table + 1)) & 0xFFFFFFFF)
    return (fmix32(values.astype(np.uint32) ^ salt) % np.uint32(rows)).astype(np.int64)
