"""DLRM in PyTorch with sparq's codecs: the MLPs under DistributedDataParallel
with a sparq hook, the embedding tables table-wise over the ranks with
sparq's quantized alltoall. The model and data are sparq train's: the same
architecture flags, sparq's binary data files (`sparq gen-data --format bin`),
categorical values mapped to rows by the same hash.

    torchrun --nproc_per_node 4 examples/dlrm_ddp.py --data-path DIR \\
        --hook dct:0.98,1000 --emb-codec q4/q2

(or mpiexec -n 4 with MASTER_ADDR and MASTER_PORT set: any env:// launch).
With --device cuda the model, the tables and the batches live on the GPU
(every rank on cuda:LOCAL_RANK modulo the GPUs, so ranks may share one),
and --codecs says where sparq's codecs run: on the device (sparq.gpu's
kernels, only compressed bytes cross to the host) or on the host (each
bucket and block staged in fp32); --route group sends the device codecs'
payloads through torch.distributed instead (an NCCL group between GPUs,
one GPU a rank: not yet run on GPUs; gloo on the CPU).

Each rank reads the global batch's ids of its own tables and its share of the
dense features and labels; the lookups go to the ranks that own the samples
(alltoall), the MLPs run data parallel. Progress lines follow the DLRM
reference's, with the bytes this rank sent per step (sparq's counters).
"""
import argparse
import collections
import ctypes
import datetime
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.autograd import DeviceType
from torch.nn.parallel import DistributedDataParallel as DDP

import sparq
import sparq.torch as st
from sparq.dlrm import (NUM_SPARSE, ThreadClock, add_args, architecture, assign_tables, checkpoint_path, copy_dense,
                        init_distributed, newest_checkpoint, read_checkpoint, read_data, report_test, rows_of,
                        write_checkpoint)
from sparq.planner import Plan, plan_model



def dense_params(model):
    """The MLPs' parameters in sparq's checkpoint order (bot.0.weight, bot.0.bias, ..., top...)."""
    return [p for layer in list(model.bot) + list(model.top) if isinstance(layer, nn.Linear)
            for p in (layer.weight, layer.bias)]


def load_sparq_checkpoint(path, model, tables):
    """Loads a sparq checkpoint: the dense parameters into the model's MLPs
    (sparq's order), and this rank's own tables. Returns the saved step."""
    meta, dense, saved = read_checkpoint(path, tables.sizes, tables.dim)
    copy_dense(path, dense, dense_params(model))
    with torch.no_grad():
        for t, w in enumerate(saved):
            if t in tables.offset:
                tables.weight[tables.offset[t]:tables.offset[t] + tables.sizes[t]].copy_(torch.from_numpy(w.copy()))
    return int(meta.get("step", 0))


def save_model(path, model, tables, step):
    """Writes the model as a sparq checkpoint on rank 0 (read back with
    --load-sparq): the dense parameters in sparq's order, every table from
    the rank that owns it."""
    rank, size, sizes = dist.get_rank(), dist.get_world_size(), tables.sizes
    weight = tables.weight.cpu()
    if rank != 0:
        dist.send(weight, 0)
        return
    saved = {}
    for r in range(size):
        w = weight
        if r:
            w = torch.empty(sum(sizes[t] for t in tables.owned[r]), tables.dim)
            dist.recv(w, r)
        rows = 0
        for t in tables.owned[r]:  # a rank's tables lie in its weight in table order
            saved[t], rows = w[rows:rows + sizes[t]].numpy(), rows + sizes[t]
    dense = torch.cat([p.detach().reshape(-1) for p in dense_params(model)])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_checkpoint(path, {"step": step, "writer": "examples/dlrm_ddp.py"}, dense.numpy(),
                     [saved[t] for t in range(NUM_SPARSE)])


def mlp(widths, relu_last):
    layers = []
    for i in range(len(widths) - 1):
        lin = nn.Linear(widths[i], widths[i + 1])
        # sparq's init: N(0, sqrt(2/(in+out))) weights, N(0, sqrt(1/out)) biases
        nn.init.normal_(lin.weight, 0.0, (2.0 / (widths[i] + widths[i + 1])) ** 0.5)
        nn.init.normal_(lin.bias, 0.0, (1.0 / widths[i + 1]) ** 0.5)
        layers.append(lin)
        if i < len(widths) - 2 or relu_last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Interaction(torch.autograd.Function):
    """DLRM's dot interaction: per sample, the dot products of the feature
    vector pairs that `pairs` names (flat indices into the sample's Gram
    matrix z z^T). One batched product each way, where autograd through bmm
    and advanced indexing would run two products backward and a scatter into
    a zeroed tensor.

    The batched products run in numpy, on the tensors' own memory: torch
    1.13 without MKL (Debian's) runs bmm as one GEMM call per sample through
    its dispatcher, numpy's matmul loops over the samples in C, calling the
    same OpenBLAS, and gives the same bits 1.7-1.9x faster here
    (bench/dlrm_ddp_ops.py)."""

    @staticmethod
    def forward(ctx, z, pairs):  # z: (batch, features, dim), contiguous float32 on the CPU
        ctx.save_for_backward(z, pairs)
        zn = z.detach().numpy()
        gram = np.matmul(zn, np.ascontiguousarray(zn.transpose(0, 2, 1)))
        return torch.from_numpy(gram.reshape(len(zn), -1)).index_select(1, pairs)

    @staticmethod
    def backward(ctx, grad):
        z, pairs = ctx.saved_tensors
        b, n = z.shape[:2]
        # From torch's allocator: np.zeros's calloc got fresh pages from the
        # kernel on every call in some processes, 3x the whole interaction's time
        # (bench/dlrm_ddp_ops.py).
        g = torch.zeros(b, n * n).numpy()
        g[:, pairs.numpy()] = grad.numpy()
        g = g.reshape(b, n, n)
        return torch.from_numpy(np.matmul(g + g.transpose(0, 2, 1), z.detach().numpy())), None  # d(z z^T) = g z + g^T z


class DenseDlrm(nn.Module):
    """What runs data parallel: bottom MLP, dot interaction, top MLP.

    The embeddings may come in any order of the tables: `table_pos[t]` is
    table t's place among them. The pairs of the interaction are taken in
    DLRM's order all the same (i > j over the bottom output, then tables 0
    to 25), which is what the top MLP's weights see."""

    def __init__(self, bot, top, bf16=False, table_pos=None, device="cpu"):
        super().__init__()
        self.device_type = torch.device(device).type
        self.bot = mlp(bot, relu_last=True)
        self.top = mlp(top, relu_last=False)
        self.bf16 = bf16
        n = NUM_SPARSE + 1
        li, lj = torch.tril_indices(n, n, offset=-1)
        pos = torch.tensor([0] + [1 + p for p in (table_pos or range(NUM_SPARSE))])
        # Not a buffer: DDP would broadcast it every step.
        self.pairs = (pos[li] * n + pos[lj]).to(device)

    def forward(self, dense, emb):  # emb: (batch, 26, dim), tables in table_pos order
        # bf16: the MLPs under autocast (oneDNN's bf16 GEMMs), the interaction
        # in fp32, as sparq train --mlp-precision bf16 does; parameters and
        # their gradients stay fp32.
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16):
            x = self.bot(dense)
        x = x.float()
        z = torch.cat([x.unsqueeze(1), emb], dim=1)
        if self.device_type == "cpu":
            dots = Interaction.apply(z, self.pairs)
        else:  # the batched product on the GPU, torch's own backward
            dots = torch.bmm(z, z.transpose(1, 2)).flatten(1).index_select(1, self.pairs)
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16):
            out = self.top(torch.cat([x, dots], dim=1))
        return out.float().squeeze(1)


def profile_lines(prof, steps, device, top=12):
    """The profiled steps' time on the device: the sum of its kernels and
    copies (on the CPU, the operators' own time); the part that is
    sparq.gpu's: its kernels (Triton and CUDA, named _sparq_*) and what torch ran
    inside its ranges; then the kernels (operators) that took the most."""
    parts = collections.Counter()  # name -> microseconds
    calls = collections.Counter()
    ours = 0.0
    for e in prof.events():
        if device.type == "cpu":
            done = [(e.key, e.self_cpu_time_total, in_sparq_range(e))] if e.device_type == DeviceType.CPU else []
        elif e.device_type == DeviceType.CPU:  # the kernels it launched
            done = [(k.name, k.duration, in_sparq_range(e)) for k in e.kernels]
        else:  # a kernel or copy not tied to an operator; GPU-side ranges are spans, not work
            done = [] if e.is_user_annotation else [(e.name, e.time_range.elapsed_us(), False)]
        for name, us, inside in done:
            parts[name] += us
            calls[name] += 1
            ours += us if inside or "_sparq_" in name else 0.0
    total = sum(parts.values())
    where = "GPU" if device.type == "cuda" else "CPU"
    lines = [f"profile (rank 0, {steps} steps): {where} time {total / steps / 1e3:.3f} ms/step, sparq.gpu "
             f"{ours / steps / 1e3:.3f} ms/step ({ours / max(total, 1e-9):.1%})"]
    for name, us in parts.most_common(top):
        lines.append(f"profile   {us / steps / 1e3:8.3f} ms/step {calls[name] / steps:6.1f} calls/step: {name[:90]}")
    return lines


def in_sparq_range(e):
    while e is not None:
        if e.name.startswith("sparq.gpu."):
            return True
        e = e.cpu_parent
    return False


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_args(ap)
    ap.add_argument("--hook", help="none | dct:ETA,L[+bf16|+fp8] | q8|q4|q2[+ec] | topk:K/B (default none)")
    ap.add_argument("--emb-codec", help="FWD/BWD of the lookups alltoall, e.g. q4/q2 (fp32|q8|q4|q2; default fp32)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0,
                    help="DDP's bucket size: smaller buckets let the hook's exchanges overlap more of backward, "
                         "each a call of the hook (default 25)")
    ap.add_argument("--plan", help="a plan file of `sparq plan --for pytorch` (or sparq.plan()) for this model, rank "
                                   "count and global batch: sets --hook (and its collective), --emb-codec, --threads "
                                   "and --mlp-precision")
    ap.add_argument("--save", help="write the trained model here (rank 0; a sparq checkpoint, atomically); "
                                   "'{step}' in it stands for the step")
    ap.add_argument("--save-every", type=int, default=0,
                    help="also write the model every this many steps (--save needs '{step}': one file a step)")
    ap.add_argument("--resume", choices=["auto"],
                    help="auto: start from the newest of --save's checkpoints that reads whole (a folder every "
                         "rank sees), from the start if there is none; for torchrun --max-restarts")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where the model and tables live")
    ap.add_argument("--codecs", default="auto", choices=["auto", "host", "device"],
                    help="where sparq's codecs run (auto: on the device for CUDA tensors where sparq has kernels)")
    ap.add_argument("--route", default="host", choices=["host", "group"],
                    help="how the device codecs' payloads travel: host (pinned host memory, sparq's transport) or "
                         "group (tensors through torch.distributed: an NCCL group with --device cuda, gloo's "
                         "default group on the CPU)")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="profile the last this many steps (torch.profiler): the step's GPU (or CPU) time, the "
                         "share of sparq.gpu's kernels and the operators that took most, on rank 0")
    ap.set_defaults(threads=None, mlp_precision=None)  # given, or the plan's, or PLANNED's
    args = ap.parse_args()
    given = [k for k in PLANNED if getattr(args, k) is not None]
    if args.plan and given:
        raise SystemExit(f"--plan sets {', '.join('--' + k.replace('_', '-') for k in given)}: give one or the other")
    return args


# The settings a plan file makes, and their defaults without one.
PLANNED = {"hook": "none", "emb_codec": "fp32", "threads": 1, "mlp_precision": "fp32"}


def apply_plan(args, size):
    """--plan: the plan's settings (Plan.settings checks it was made
    for this model, rank count and global batch; parse_args, that none of
    them was also given); else the defaults of those not given."""
    args.allreduce = "auto"
    if not args.plan:
        for k, v in PLANNED.items():
            setattr(args, k, v if getattr(args, k) is None else getattr(args, k))
        return
    dim, bot, top, sizes = architecture(args)
    try:
        s = Plan(args.plan).settings(model=plan_model(bot, top, dim, sizes), ranks=size,
                                     global_batch=args.mini_batch_size)
    except ValueError as e:
        raise SystemExit(f"--plan {e}") from None
    for k, v in s.items():
        setattr(args, k, v)


def setup(args):
    """torch.distributed, this rank's device, the thread counts and the
    seed. Returns (rank, size, device)."""
    rank, size = init_distributed(args.timeout)
    apply_plan(args, size)
    device = torch.device("cpu")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    torch.set_num_threads(args.threads)
    # Debian's torch multiplies fp32 matrices with OpenBLAS, whose own thread
    # count set_num_threads() does not reach: left at one per core, 4 ranks
    # on 2 cores run 8 BLAS threads.
    try:
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(args.threads)
    except (OSError, AttributeError):
        pass  # another BLAS: torch's own setting is the one
    torch.manual_seed(args.seed)
    return rank, size, device


BITS = {"fp32": 32, "q8": 8, "q4": 4, "q2": 2}


def emb_codecs(spec):
    """--emb-codec FWD[/BWD] as the names of the two directions' codecs."""
    fwd, bwd = (spec.split("/") + [spec])[:2]
    if fwd not in BITS or bwd not in BITS:
        raise SystemExit(f"--emb-codec {spec}: fp32, q8, q4, q2, or FWD/BWD of them")
    return fwd, bwd


class Tables:
    """This rank's embedding tables (table-wise over the ranks) as one
    matrix, table t from row offset[t] on: the lookups are one gather from
    it and their SGD update one indexed add (the update torch.optim makes
    from nn.Embedding's sparse gradients, fused)."""

    def __init__(self, sizes, dim, rank, size, device):
        owner = assign_tables(sizes, size)
        self.owned = [[t for t in range(NUM_SPARSE) if owner[t] == r] for r in range(size)]
        self.mine = self.owned[rank]
        self.sizes, self.dim, self.size, self.device = sizes, dim, size, device
        self.offset, rows = {}, 0
        for t in self.mine:
            self.offset[t], rows = rows, rows + sizes[t]
        weight = torch.empty(rows, dim)
        for t in self.mine:
            bound = (1.0 / sizes[t]) ** 0.5
            nn.init.uniform_(weight[self.offset[t]:self.offset[t] + sizes[t]], -bound, bound)
        self.weight = weight.to(device)

    def positions(self):
        """Each table's place among the embeddings a rank receives: the
        received blocks hold the tables in rank order."""
        by_rank = sum(self.owned, [])
        return [by_rank.index(t) for t in range(NUM_SPARSE)]

    def lookups(self, ids, grad, alltoall):
        """ids: (B, 26) raw values of a global batch. Returns the embeddings
        of this rank's samples, (B / size, 26, dim) with the tables in rank
        order; the rows of `weight` this rank looked up for the whole batch;
        and the tensor of those rows, which holds their gradient after
        backward when `grad`."""
        n, mine = ids.shape[0] // self.size, self.mine
        # Rows for rank j: its n samples x my tables, sample-major (the global
        # batch holds rank j's samples at j*n).
        idx = torch.from_numpy(np.stack([rows_of(ids[:, t], t, self.sizes[t]) + self.offset[t] for t in mine], axis=1)
                               .reshape(-1) if mine else np.zeros(0, np.int64)).to(self.device)
        send = self.weight.index_select(0, idx).requires_grad_(grad)
        recv = [n * len(o) for o in self.owned]
        blocks = torch.split(alltoall(send, [n * len(mine)] * self.size, recv), recv)
        return torch.cat([b.view(n, len(o), self.dim) for b, o in zip(blocks, self.owned)], dim=1), idx, send

    def update(self, idx, grad, lr):
        """SGD on the looked-up rows. Each rank's loss is the mean over its
        share and DDP averages the dense gradients over the ranks; the rows'
        gradients need the same 1/size (sparq train applies it after the
        alltoall too). index_put_ with accumulate: in torch 1.13, 3x faster
        than index_add_ (bench/dlrm_ddp_ops.py)."""
        self.weight.index_put_((idx,), grad.mul_(-lr / self.size), accumulate=True)


PHASES = ("data", "lookups", "fwd+bwd", "opt")


class Progress:
    """The progress lines, every --print-freq steps and at the last: the
    global batch's mean loss, ms per step (the tests' time left out), the
    bytes this rank sent per step, and the steps' phases; "hook" is the
    sparq exchange's time on its own thread (it overlaps backward, so it is
    no part of the step's sum)."""

    def __init__(self, rank, size, steps, sent, hook, ddp_bytes):
        self.rank, self.size, self.steps = rank, size, steps
        self.sent, self.hook, self.ddp_bytes = sent, hook, ddp_bytes
        self.t0 = time.perf_counter()
        self.last_t, self.last_bytes, self.loss_sum, self.n_loss = self.t0, sent(), 0.0, 0
        self.testing = 0.0  # seconds spent in tests, left out of the training time
        self.phase = dict.fromkeys(PHASES + ("hook",), 0.0)
        self.hook_at = 0.0

    def add(self, loss, seconds):
        for key, dt in zip(PHASES, seconds):
            self.phase[key] += dt
        self.loss_sum += loss
        self.n_loss += 1

    def leave_out(self, seconds):
        self.testing += seconds
        self.last_t += seconds

    def training_seconds(self, at):
        return at - self.t0 - self.testing

    def report(self, it):
        now, b, k = time.perf_counter(), self.sent(), self.n_loss
        # The global batch's mean loss (equal shares: the mean over ranks).
        total = torch.tensor([self.loss_sum], dtype=torch.float64)
        dist.all_reduce(total)
        loss = total.item() / self.size
        if self.rank == 0:
            extra = f" + {self.ddp_bytes / 1e3:.1f} kB torch allreduce (computed)" if self.ddp_bytes else ""
            if self.hook:
                self.phase["hook"], self.hook_at = self.hook.exchange_seconds - self.hook_at, self.hook.exchange_seconds
            shown = [(key, v) for key, v in self.phase.items() if key != "hook" or self.hook]
            times = ", ".join(f"{key} {v / k * 1000:.1f}" for key, v in shown)
            print(f"Finished training it {it}/{self.steps} of epoch 0, {(now - self.last_t) / k * 1000:.2f} ms/it, "
                  f"loss {loss / k:.6f}, {(b - self.last_bytes) / k / 1e3:.1f} kB/step sent{extra} (rank 0); "
                  f"ms/step: {times}", flush=True)
        self.last_t, self.last_bytes, self.loss_sum, self.n_loss = now, b, 0.0, 0
        self.phase.update(dict.fromkeys(PHASES, 0.0))


class Trainer:
    """The training loop over one epoch at most (as sparq train), batches in
    file order (--no-shuffle) or a seeded permutation's, with tests every
    --test-freq steps and at the end."""

    def __init__(self, args, rank, size, device, model, ddp, tables, alltoall, start, save):
        self.args, self.rank, self.size, self.device, self.save = args, rank, size, device, save
        self.model, self.ddp, self.tables, self.alltoall, self.start = model, ddp, tables, alltoall, start
        self.opt = torch.optim.SGD(list(ddp.parameters()), lr=args.learning_rate, foreach=True)
        self.train, self.test_set = read_data(args.data_path)
        self.batch = args.mini_batch_size
        if self.batch % size:
            raise SystemExit(f"--mini-batch-size {self.batch} does not divide over {size} ranks")
        self.local = self.batch // size
        epoch = len(self.train) // self.batch
        self.steps = min(args.num_batches or epoch, epoch)
        rng = np.random.default_rng(args.seed)
        self.order = np.arange(len(self.train)) if args.no_shuffle else rng.permutation(len(self.train))

    def share(self, rec, field):
        """This rank's share of a global batch's field, as a tensor."""
        return torch.from_numpy(np.ascontiguousarray(rec[self.rank * self.local:(self.rank + 1) * self.local][field]))

    def step(self, it):
        """One step on global batch `it`: the rank's loss and the phases' seconds."""
        t = time.perf_counter()
        # np.take: 5x train[...] on a memmap (bench/dlrm_ddp_ops.py)
        rec = np.take(self.train, self.order[it * self.batch:(it + 1) * self.batch])
        dense, label = self.share(rec, "dense").to(self.device), self.share(rec, "label").to(self.device)
        t1 = time.perf_counter()
        emb, idx, send = self.tables.lookups(rec["sparse"], True, self.alltoall)
        t2 = time.perf_counter()
        loss = nn.functional.binary_cross_entropy_with_logits(self.ddp(dense, emb), label)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        self.opt.step()
        self.tables.update(idx, send.grad, self.args.learning_rate)
        t4 = time.perf_counter()
        return loss.item(), (t1 - t, t2 - t1, t3 - t2, t4 - t3)

    def test(self, it, progress, clock):
        """sparq train's test line, with the training time so far: every
        rank scores its share of each test batch."""
        clock.pause()
        at = time.perf_counter()
        scores, labels = [], []
        with torch.no_grad():
            for s in range(0, len(self.test_set) - self.batch + 1, self.batch):
                rec = self.test_set[s:s + self.batch]
                emb = self.tables.lookups(rec["sparse"], False, self.alltoall)[0]
                scores.append(torch.sigmoid(self.model(self.share(rec, "dense").to(self.device), emb)).cpu())
                labels.append(self.share(rec, "label"))
        report_test(torch.cat(scores), torch.cat(labels), it, self.steps, progress.training_seconds(at))
        progress.leave_out(time.perf_counter() - at)
        clock.resume()

    def run(self, progress):
        args, steps = self.args, self.steps
        clock = ThreadClock()
        prof, profiled = None, range(max(self.start, steps - args.profile_steps), steps)
        for it in range(self.start, steps):
            if it == profiled.start and args.profile_steps:
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU] + (
                    [torch.profiler.ProfilerActivity.CUDA] if self.device.type == "cuda" else []))
                prof.start()
            progress.add(*self.step(it))
            if prof is not None and it + 1 == profiled.stop:
                prof.stop()
                if self.rank == 0:
                    print("\n".join(profile_lines(prof, len(profiled), self.device)), flush=True)
                prof = None
            if (it + 1) % args.print_freq == 0 or it + 1 == steps:
                progress.report(it + 1)
            if args.test_freq and (it + 1) % args.test_freq == 0 and it + 1 != steps:
                self.test(it + 1, progress, clock)
            if args.save_every and (it + 1) % args.save_every == 0 and it + 1 != steps:
                self.save(it + 1)  # the last step's checkpoint is the run's end's
        self.test(steps, progress, clock)
        clock.report(steps - self.start)


def check_saving(args):
    if args.save_every < 0:
        raise SystemExit(f"--save-every {args.save_every}: a number of steps, or 0 for the end only")
    if (args.save_every or args.resume) and "{step}" not in (args.save or ""):
        raise SystemExit("--save-every and --resume need --save with '{step}' in it (one checkpoint file a step)")
    if args.resume and args.load_sparq:
        raise SystemExit("--resume auto and --load-sparq both say where to start: give one")


def starting_point(args, rank):
    """The checkpoint this run starts from (None: the initial model):
    --load-sparq's, or with --resume auto the newest of --save's that reads
    whole, chosen on rank 0 and sent to the others, so that every rank
    loads the same one."""
    if not args.resume:
        return args.load_sparq
    choice = [None]
    if rank == 0:
        choice[0], notes = newest_checkpoint(args.save)
        for note in notes:
            print(f"dlrm_ddp: {note}", flush=True)
        if choice[0] is None:
            print(f"dlrm_ddp: no checkpoint '{args.save}' reads whole: starting from the initial model", flush=True)
    dist.broadcast_object_list(choice, src=0)
    return choice[0]


def main():
    args = parse_args()
    check_saving(args)
    rank, size, device = setup(args)
    dim, bot, top, sizes = architecture(args)
    fwd, bwd = emb_codecs(args.emb_codec)
    timeout = datetime.timedelta(seconds=args.timeout)
    tables = Tables(sizes, dim, rank, size, device)
    model = DenseDlrm(bot, top, bf16=args.mlp_precision == "bf16", table_pos=tables.positions(),
                      device=device).to(device)
    # The gradients are views into DDP's buckets: no copy into them and back.
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb, gradient_as_bucket_view=True)
    host_route = args.route == "host"
    # The group route between GPUs: NCCL (one GPU a rank); on the CPU, gloo's default group.
    group = dist.new_group(backend="nccl") if not host_route and device.type == "cuda" else None
    hook = None
    if args.hook != "none":
        allreduce = args.allreduce if args.allreduce != "auto" else "ring" if args.hook.startswith("q") else "auto"
        hook = st.Hook(args.hook, allreduce=allreduce, model=ddp,
                       comm=st.connect(timeout=timeout) if host_route else None, codecs=args.codecs,
                       route=args.route, group=group)
        ddp.register_comm_hook(None, hook)
    a2a = st.connect(timeout=timeout) if host_route else None

    def alltoall(send, splits, recv_splits):
        return st.quantized_alltoall(send, splits, BITS[fwd], BITS[bwd], recv_splits=recv_splits, comm=a2a,
                                     codecs=args.codecs, route=args.route, group=group)

    def sent():
        if not host_route:
            return st.group_route(group).bytes_sent + (hook.bytes_sent if hook else 0)
        return a2a.counters()["bytes_sent"] + (hook.comm.counters()["bytes_sent"] if hook else 0)

    origin = starting_point(args, rank)
    start = load_sparq_checkpoint(origin, model, tables) if origin else 0
    if args.resume and origin and rank == 0:
        print(f"dlrm_ddp: resuming from {origin} at step {start} on {size} ranks"
              + (f" (--hook {args.hook}: its error feedback and thresholds restart from zero)" if hook else ""),
              flush=True)

    def save(step):
        if hook:
            hook.wait()
        save_model(checkpoint_path(args.save, step), model, tables, step)

    trainer = Trainer(args, rank, size, device, model, ddp, tables, alltoall, start, save)
    if rank == 0:
        where = f"sparq transport {a2a.transport_name}" if host_route else f"route group ({dist.get_backend(group)})"
        if args.plan:
            print(f"dlrm_ddp: plan {args.plan}: hook {args.hook} ({args.allreduce}), emb-codec {fwd}/{bwd}, "
                  f"bucket-cap-mb {args.bucket_cap_mb:g}, threads {args.threads}", flush=True)
        print(f"dlrm_ddp: {size} ranks, {where}, hook {args.hook}, emb-codec {fwd}/{bwd}, "
              f"mlp-precision {args.mlp_precision}, global batch {trainer.batch}, {trainer.steps} steps", flush=True)
    # Without a hook DDP allreduces with torch's gloo, which sparq cannot
    # count: its bytes are given by the ring formula, marked as computed.
    ddp_bytes = 0 if hook else 2 * (size - 1) / size * 4 * sum(p.numel() for p in model.parameters())
    trainer.run(Progress(rank, size, trainer.steps, sent, hook, ddp_bytes))
    if rank == 0 and device.type == "cuda":
        c, n = st.host_copies, trainer.steps - start
        print(f"host copies (rank 0): {c['to_host'] / n / 1e6:.3f} MB/step to the host, "
              f"{c['to_device'] / n / 1e6:.3f} MB/step back (--codecs {args.codecs})", flush=True)
    if args.save:
        save(trainer.steps)
    elif hook:
        hook.wait()
    if a2a is not None:
        a2a.barrier()
    else:
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except (sparq.Error, dist.DistError) as e:  # one line, and the job ends at once (the others may wait for this rank)
        print(f"dlrm_ddp: rank {dist.get_rank() if dist.is_initialized() else '?'}: {e}", file=sys.stderr)
        st.abort(1)
    except Exception:  # a bug: its traceback, and the job ends all the same
        traceback.print_exc()
        st.abort(1)
