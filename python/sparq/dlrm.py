"""sparq's data files and checkpoints for a DLRM in PyTorch: what
examples/dlrm_ddp.py and examples/torchrec_dlrm.py need to train on the
data of `sparq gen-data --format bin` and to start from a `sparq train
--save` checkpoint, hashing categorical values to rows as sparq does.
"""
import argparse
import datetime
import glob
import json
import os
import zlib

import numpy as np

NUM_DENSE, NUM_SPARSE = 13, 26
RECORD = np.dtype([("label", "<f4"), ("dense", "<f4", NUM_DENSE), ("sparse", "<u4", NUM_SPARSE)])


def read_bin(path):
    """sparq's binary format: a 64-byte header, then fixed-size records (memory-mapped)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if len(head) < 64 or head[:8] != b"SPARQCR1":
        raise SystemExit(f"{path}: not a sparq binary data file (make one with `sparq gen-data --format bin`)")
    count = int(np.frombuffer(head, "<u8", 1, 24)[0])
    return np.memmap(path, RECORD, "r", 64, (count,))


def read_data(path):
    """The training and test sets of a `sparq gen-data --format bin` directory."""
    return read_bin(os.path.join(path, "train.bin")), read_bin(os.path.join(path, "test.bin"))


def rows_of(values, table, rows):
    """sparq's categorical hash: fmix32(value ^ salt(table)) % rows."""
    h = values.astype(np.uint64) ^ np.uint64((0x9E3779B9 * (table + 1)) & 0xFFFFFFFF)
    for shift, mul in ((16, 0x85EBCA6B), (13, 0xC2B2AE35), (16, None)):
        h ^= h >> np.uint64(shift)
        if mul is not None:
            h = (h * np.uint64(mul)) & np.uint64(0xFFFFFFFF)
    return (h % np.uint64(rows)).astype(np.int64)


def read_checkpoint(path, sizes, dim):
    """A sparq checkpoint (`sparq train --save`, layout in
    sparq/model/checkpoint.h), checked against this model's tables:
    (meta, dense, tables) with the dense parameters in sparq's order
    (bot.0.weight [out x in], bot.0.bias, ..., top...) as one float32 array
    and every table as a (rows, dim) array."""
    with open(path, "rb") as f:
        why = _damage(f)
        f.seek(0)
        data = f.read()

    def bad(why):
        raise SystemExit(f"{path}: {why}")

    if why:
        bad(why)
    pos = 8

    def u64():
        nonlocal pos
        if pos + 8 > len(data):
            bad("truncated")
        v = int(np.frombuffer(data, "<u8", 1, pos)[0])
        pos += 8
        return v

    def floats(n):
        nonlocal pos
        if pos + 4 * n > len(data):
            bad("truncated")
        v = np.frombuffer(data, "<f4", n, pos)
        pos += 4 * n
        return v

    n = u64()
    if pos + n > len(data):
        bad("truncated")
    meta = json.loads(data[pos:pos + n].decode())
    pos += n
    dense = floats(u64())
    if u64() != NUM_SPARSE:
        bad(f"not {NUM_SPARSE} tables")
    tables = []
    for t in range(NUM_SPARSE):
        rows, d = u64(), u64()
        if rows != sizes[t] or d != dim:
            bad(f"table {t} is {rows} x {d}, this model's is {sizes[t]} x {dim}")
        if u64() != rows * d:
            bad(f"table {t}: a size that is not rows x dim")
        tables.append(floats(rows * d).reshape(rows, d))
    return meta, dense, tables


def _damage(f):
    """Why the open file `f` cannot be a checkpoint (None if it can), read
    in pieces: a checkpoint need not fit in memory twice."""
    magic = f.read(8)
    if magic not in (b"SPARQCK1", b"SPARQCK2", b"SPARQCK4"):  # the model comes first in every layout
        return "not a sparq checkpoint"
    if magic != b"SPARQCK4":
        return None
    # SPARQCK4 ends in the CRC-32 of every byte before it.
    size = os.fstat(f.fileno()).st_size
    if size < 12:
        return "checksum mismatch: the checkpoint is corrupt or truncated"
    crc, left = zlib.crc32(magic), size - 12
    while left > 0:
        piece = f.read(min(left, 1 << 24))
        crc, left = zlib.crc32(piece, crc), left - len(piece)
    if crc != int.from_bytes(f.read(4), "little"):
        return "checksum mismatch: the checkpoint is corrupt or truncated"
    return None


def checkpoint_path(pattern, step):
    """Where a checkpoint of `step` goes: `pattern` with "{step}" replaced."""
    return pattern.replace("{step}", str(step))


def newest_checkpoint(pattern):
    """The newest checkpoint that reads whole among the files `pattern`
    names ("{step}" standing for a step; without it, the one file): (path,
    notes), path None when there is none, notes one line for each newer
    file skipped and why. Only the bytes are checked (magic and CRC); a
    checkpoint of another model is read_checkpoint's error, not skipped."""
    if "{step}" not in pattern:
        candidates = [pattern] if os.path.exists(pattern) else []
    else:
        head, tail = pattern.split("{step}", 1)
        found = glob.glob(glob.escape(head) + "*" + glob.escape(tail))
        middles = (path[len(head):len(path) - len(tail)] for path in found)
        steps = [int(m) for m in middles if m.isdigit()]
        candidates = [checkpoint_path(pattern, s) for s in sorted(steps, reverse=True)]
    notes = []
    for path in candidates:
        try:
            with open(path, "rb") as f:
                why = _damage(f)
        except OSError as e:
            why = e.strerror
        if why is None:
            return path, notes
        notes.append(f"{path}: skipped ({why})")
    return None, notes


def write_checkpoint(path, meta, dense, tables):
    """Writes a model in sparq's checkpoint layout (SPARQCK4, no optimizer or
    codec state: what read_checkpoint reads back): `dense` one float32 array
    in sparq's order, `tables` (rows, dim) arrays. Atomic as sparq's own:
    "<path>.tmp", fsynced, renamed over `path`, the directory fsynced."""
    def u64(v):
        return np.array([v], "<u8").tobytes()

    body = json.dumps(meta).encode()
    parts = [b"SPARQCK4", u64(len(body)), body, u64(len(dense)), np.asarray(dense, "<f4").tobytes(), u64(len(tables))]
    for w in tables:
        parts += [u64(w.shape[0]), u64(w.shape[1]), u64(w.size), np.ascontiguousarray(w, "<f4").tobytes()]
    parts += [u64(0), u64(0)]  # no optimizer states, no codec states
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for part in parts + [np.array([crc], "<u4").tobytes()]:
            f.write(part)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_dense(path, dense, params):
    """Copies sparq's dense parameters into `params` (torch tensors in sparq's order)."""
    import torch
    if len(dense) != sum(p.numel() for p in params):
        raise SystemExit(f"{path}: {len(dense)} dense parameters, this model has {sum(p.numel() for p in params)} "
                         "(other --arch flags?)")
    off = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(dense[off:off + p.numel()].copy()).view_as(p))
            off += p.numel()


def auc(labels, scores):
    """ROC AUC, ties counted half (the Mann-Whitney statistic, as sparq's metrics)."""
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)  # tied scores share their mean rank
    pos = labels > 0.5
    npos, nneg = pos.sum(), (~pos).sum()
    if npos == 0 or nneg == 0:
        return float("nan")
    return float((ranks[pos].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def assign_tables(sizes, nranks):
    """Largest table first to the least loaded rank (sparq's table-wise rule)."""
    load = [0] * nranks
    owner = [0] * len(sizes)
    for t in sorted(range(len(sizes)), key=lambda t: (-sizes[t], t)):
        r = min(range(nranks), key=lambda r: (load[r], r))
        owner[t] = r
        load[r] += sizes[t]
    return owner


def _seconds(text):
    """An argparse type: a positive number of seconds."""
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive number of seconds")
    return v


def add_args(ap):
    """The flags the PyTorch examples share with `sparq train`."""
    ap.add_argument("--data-path", required=True, help="directory with train.bin and test.bin")
    ap.add_argument("--arch-sparse-feature-size", type=int, default=16)
    ap.add_argument("--arch-mlp-bot", default="13-512-256-64-16")
    ap.add_argument("--arch-mlp-top", default="512-256-1")
    ap.add_argument("--arch-embedding-size", default="100000", help="rows per table: 26 dash-separated or one")
    ap.add_argument("--mini-batch-size", type=int, default=2048, help="global batch")
    ap.add_argument("--learning-rate", type=float, default=0.1)
    ap.add_argument("--num-batches", type=int, default=0, help="0 or more than an epoch's: one epoch")
    ap.add_argument("--print-freq", type=int, default=100)
    ap.add_argument("--test-freq", type=int, default=0,
                    help="test every N steps too (0: at the end only); the training time leaves the tests out")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mlp-precision", choices=("fp32", "bf16"), default="fp32",
                    help="the MLPs' GEMMs in fp32, or in bf16 under torch.autocast (fast with AVX512_BF16)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-shuffle", action="store_true", help="keep the training set's order")
    ap.add_argument("--load-sparq", help="start from this sparq checkpoint (its parameters and step)")
    ap.add_argument("--timeout", type=_seconds, default=300,
                    help="seconds a rank waits for another (torch's gloo and sparq's exchanges) before the job ends")


def init_distributed(timeout_s=300):
    """torch.distributed on gloo, under torchrun or under mpiexec (whose
    variables stand in for RANK and WORLD_SIZE), a collective waiting at most
    `timeout_s` for a rank. Returns (rank, size)."""
    import torch.distributed as dist
    for var, ompi in (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")):
        if var not in os.environ and ompi in os.environ:
            os.environ[var] = os.environ[ompi]
    timeout = datetime.timedelta(seconds=timeout_s)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is None:
        dist.init_process_group("gloo", timeout=timeout)
    else:
        # torchrun's agent serves one store for all its attempts: without a
        # prefix of their own, a restarted rank can read the address a rank
        # of the failed attempt published, and connect to nothing.
        store, rank, size = next(dist.rendezvous("env://", timeout=timeout))
        dist.init_process_group("gloo", store=dist.PrefixStore(f"attempt/{attempt}", store), rank=rank,
                                world_size=size, timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def report_test(scores, labels, it, steps, train_s):
    """Gathers every rank's test scores and labels (1-D tensors of its
    shares) and prints `sparq train`'s test line on rank 0, with the
    training time so far. Every rank calls it."""
    import torch
    import torch.distributed as dist
    size = dist.get_world_size()
    all_sc = [torch.empty_like(scores) for _ in range(size)]
    all_lb = [torch.empty_like(labels) for _ in range(size)]
    dist.all_gather(all_sc, scores)
    dist.all_gather(all_lb, labels)
    if dist.get_rank() != 0:
        return
    s, y = torch.cat(all_sc).numpy().astype(np.float64), torch.cat(all_lb).numpy()
    eps = 1e-7
    logloss = float(-np.mean(y * np.log(np.clip(s, eps, 1)) + (1 - y) * np.log(np.clip(1 - s, eps, 1))))
    acc = float(np.mean((s > 0.5) == (y > 0.5)))
    print(f"Testing at - {it}/{steps} of epoch 0, loss {logloss:.6f}, accuracy {acc * 100:.3f} %, "
          f"auc {auc(y, s):.4f}; training {train_s:.2f} s, {train_s / max(it, 1) * 1000:.2f} ms/step", flush=True)


class ThreadClock:
    """CPU time of this process by thread name (Linux /proc/self/task), counted
    while running: `pause()` around what the training time leaves out (tests).
    The main thread is "main"; threads of one other name are summed (torch's
    gloo threads, for one); a thread that ended while running is lost, as
    /proc no longer lists it."""

    def __init__(self):
        self.total, self.running = {}, self._now()

    @staticmethod
    def _now():
        tick, main = os.sysconf("SC_CLK_TCK"), str(os.getpid())
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    stat = f.read()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            name = "main" if tid == main else stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            out[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)  # utime + stime
        return out

    def pause(self):
        for tid, (name, cpu) in self._now().items():
            start = self.running.get(tid, (name, 0.0))[1]
            self.total[name] = self.total.get(name, 0.0) + cpu - start
        self.running = None

    def resume(self):
        self.running = self._now()

    def report(self, steps):
        """Prints on rank 0 the CPU ms per step by thread name, summed over
        the ranks (on one machine, over the cores' time they shared). Every
        rank calls it, after pause()."""
        import torch.distributed as dist
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, self.total)
        if dist.get_rank() != 0 or steps == 0:  # none: a run loaded at its last step only tests
            return
        total = {}
        for rank_total in every:
            for name, cpu in rank_total.items():
                total[name] = total.get(name, 0.0) + cpu
        parts = ", ".join(f"{n} {s / steps * 1000:.1f}" for n, s in sorted(total.items(), key=lambda kv: -kv[1])
                          if s >= 0.0005 * steps)
        print(f"CPU ms/step by thread, {len(every)} ranks together: {sum(total.values()) / steps * 1000:.1f} "
              f"({parts})", flush=True)


def architecture(args):
    """The architecture flags: (feature size, bottom MLP's widths, top
    MLP's widths from the interaction's output on, the 26 tables' rows)."""
    dim = args.arch_sparse_feature_size
    bot = [int(w) for w in args.arch_mlp_bot.split("-")]
    top_in = bot[-1] + (NUM_SPARSE + 1) * NUM_SPARSE // 2
    top = [top_in] + [int(w) for w in args.arch_mlp_top.split("-")]
    sizes = [int(s) for s in args.arch_embedding_size.split("-")]
    sizes = sizes * NUM_SPARSE if len(sizes) == 1 else sizes
    if len(sizes) != NUM_SPARSE or bot[0] != NUM_DENSE or bot[-1] != dim:
        raise SystemExit("--arch-embedding-size needs 1 or 26 sizes, and the bottom MLP must go from 13 to the "
                         "feature size")
    return dim, bot, top, sizes
