"""TorchRec's DLRM on sparq's data, trained the way TorchRec users train it.

torchrec.models.dlrm.DLRM with `sparq train`'s architecture flags and its
data (`sparq gen-data --format bin`, categorical values hashed to rows as
sparq does), wrapped in DistributedModelParallel: the 26 tables sharded
table-wise over the ranks and updated by FBGEMM's fused exact SGD, the dense
part under DDP with SGD, both at --learning-rate; each rank's loss is the mean
over its share of the global batch (the tables' gradients are divided by the
ranks in TorchRec's alltoall, DDP averages the dense ones).

The pooled embeddings' alltoall runs in fp32, with TorchRec's own codecs
(--qcomms fp16|bf16|fp8|int8|mx4, QCommsConfig, both directions) or with
sparq's (--sparq-emb FWD/BWD of q8|q4|q2: sparq.torchrec.qcomm_codecs, rows
of one table's embedding). The dense gradients go by torch's allreduce or
one of sparq's DDP hooks (--hook dct:ETA,L | q8|q4|q2[+ec] | topk:K/B).
--plan FILE takes both, the threads, the MLPs' precision and each table's
rank from a plan of `sparq plan --for pytorch` (sparq.plan()).

    .venv/bin/python -m torch.distributed.run --nproc-per-node 2 examples/torchrec_dlrm.py \\
        --data-path data/synth-bin --sparq-emb q4/q2 --hook dct:0.98,1000

Prints sparq train's progress and test lines, and the bytes rank 0 put on the
wire per step by entity: the hook's from sparq's counters; the rest, which
torch's gloo does not count, from the sizes the codecs give each block
(marked "computed").
"""
import argparse
import datetime
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import sparq
import sparq.torch as st
import sparq.torchrec as sq
from fbgemm_gpu.split_embedding_configs import EmbOptimType
from sparq.dlrm import (NUM_DENSE, NUM_SPARSE, ThreadClock, add_args, architecture, copy_dense, init_distributed,
                        read_checkpoint, read_data, report_test, rows_of)
from sparq.planner import Plan, plan_model
from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor
from torchrec.distributed import DistributedModelParallel
from torchrec.distributed.embedding_types import EmbeddingComputeKernel
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.fbgemm_qcomm_codec import CommType, QCommsConfig, get_qcomm_codecs_registry
from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
from torchrec.distributed.types import CommOp, ShardingPlan, ShardingType
from torchrec.models.dlrm import DLRM
from torchrec.optim.keyed import KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter

QCOMMS = ("none", "fp16", "bf16", "fp8", "int8", "mx4")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_args(ap)
    ap.add_argument("--qcomms", choices=QCOMMS, help="TorchRec's codec of the embeddings' alltoall (default none)")
    ap.add_argument("--sparq-emb", help="sparq's codecs of the embeddings' alltoall, FWD/BWD, e.g. q4/q2 "
                                        "(default none)")
    ap.add_argument("--hook", help="the dense gradients: none (torch's allreduce) | dct:ETA,L | "
                    "q8|q4|q2[+ec] | topk:K/B (sparq's DDP hooks; default none)")
    ap.add_argument("--plan", help="a plan file of `sparq plan --for pytorch` (or sparq.plan()) for this model, rank "
                                   "count and global batch: sets --hook (and its collective), --sparq-emb, --threads, "
                                   "--mlp-precision and which rank holds each table")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="rank 0 prints torch.profiler's CPU ops of N steps (from step 20 on), by self time")
    ap.set_defaults(threads=None, mlp_precision=None)  # given, or the plan's, or PLANNED's
    args = ap.parse_args()
    given = [k for k in PLANNED if getattr(args, k) is not None]
    if args.plan and given:
        raise SystemExit(f"--plan sets {', '.join('--' + k.replace('_', '-') for k in given)}: give one or the other")
    for k, v in PLANNED.items():
        setattr(args, k, v if getattr(args, k) is None else getattr(args, k))
    if args.qcomms != "none" and args.sparq_emb != "none":
        raise SystemExit("--qcomms and --sparq-emb both code the embeddings' alltoall: give one")
    args.allreduce = "auto"  # the hook's collective: a plan's, else the rule in build()
    return args


# The settings a plan file makes, and their defaults without one.
PLANNED = {"hook": "none", "qcomms": "none", "sparq_emb": "none", "threads": 1, "mlp_precision": "fp32"}


def apply_plan(args, size):
    """--plan: the plan's settings (Plan.settings checks it was made for
    this model, rank count and global batch). Returns each table's rank in
    the plan, or None without one (TorchRec's planner places them)."""
    if not args.plan:
        return None
    dim, bot, top, sizes = architecture(args)
    try:
        plan = Plan(args.plan)
        s = plan.settings(model=plan_model(bot, top, dim, sizes), ranks=size, global_batch=args.mini_batch_size)
    except ValueError as e:
        raise SystemExit(f"--plan {e}") from None
    args.hook, args.allreduce, args.threads, args.mlp_precision = s["hook"], s["allreduce"], s["threads"], \
        s["mlp_precision"]
    args.sparq_emb = "none" if s["emb_codec"] == "fp32/fp32" else s["emb_codec"]
    return plan.table_owners(sizes)


class Autocast(nn.Module):
    """Runs a module under torch.autocast (bf16) when on; its output in fp32."""

    def __init__(self, module, on):
        super().__init__()
        self.module, self.on = module, on

    def forward(self, *xs):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.on):
            return self.module(*xs).float()


def linears(module):
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def init_like_sparq(model):
    """sparq's initial distributions: N(0, sqrt(2/(in+out))) weights and
    N(0, sqrt(1/out)) biases (the tables keep TorchRec's default, which is
    sparq's: uniform within +-sqrt(1/rows))."""
    with torch.no_grad():
        for lin in linears(model.dense_arch) + linears(model.over_arch):
            lin.weight.normal_(0.0, (2.0 / (lin.in_features + lin.out_features)) ** 0.5)
            lin.bias.normal_(0.0, (1.0 / lin.out_features) ** 0.5)


def pair_order(n):
    """sparq's interaction pairs are (i, j), i > j, row by row; TorchRec's
    (i, j), i < j, row by row. For each of TorchRec's pairs, sparq's index."""
    return [j * (j - 1) // 2 + i for i, j in zip(*np.triu_indices(n, 1))]


def load_sparq(path, dmp, sizes, dim, dense_width):
    """Copies a sparq checkpoint into the sharded model: the MLPs (the top
    MLP's first layer's columns reordered to TorchRec's interaction pairs)
    and each table into the shard of it this rank holds. Returns the step."""
    meta, dense, tables = read_checkpoint(path, sizes, dim)
    model = dmp.module.module if hasattr(dmp.module, "module") else dmp.module
    lins = linears(model.dense_arch) + linears(model.over_arch)
    params = [p for lin in lins for p in (lin.weight, lin.bias)]
    copy_dense(path, dense, params)
    with torch.no_grad():
        first = linears(model.over_arch)[0].weight
        cols = list(range(dense_width)) + [dense_width + k for k in pair_order(NUM_SPARSE + 1)]
        first.copy_(first[:, cols].clone())
        for name, t in dmp.state_dict().items():
            if not name.endswith(".weight") or ".embedding_bags." not in name:
                continue
            table = tables[int(name.split(".embedding_bags.t")[1].split(".")[0])]
            for shard in t.local_shards():
                r, c = shard.metadata.shard_offsets
                n, d = shard.metadata.shard_sizes
                shard.tensor.copy_(torch.from_numpy(table[r:r + n, c:c + d].copy()))
    return int(meta.get("step", 0))


def sharding_plan(model, sharder, tables, owners, size):
    """Table-wise: each table on the rank OWNERS gives it (a sparq plan's
    placement), or where TorchRec's planner puts it (OWNERS None); either
    way with FBGEMM's fused kernel and its in-backward SGD (TorchRec's
    planner's choice; a plan built by hand defaults to the dense kernel,
    whose step took 1.5x as long on the cluster)."""
    if owners is None:
        constraints = {t.name: ParameterConstraints(sharding_types=[ShardingType.TABLE_WISE.value]) for t in tables}
        return EmbeddingShardingPlanner(topology=Topology(world_size=size, compute_device="cpu"),
                                        constraints=constraints).collective_plan(model, [sharder],
                                                                                 dist.GroupMember.WORLD)
    ebc = model.sparse_arch.embedding_bag_collection
    return ShardingPlan({"sparse_arch.embedding_bag_collection": construct_module_sharding_plan(
        ebc, {t.name: table_wise(rank=owners[i], compute_kernel=EmbeddingComputeKernel.FUSED.value)
              for i, t in enumerate(tables)}, sharder=sharder,
        local_size=size, world_size=size, device_type="cpu")})


def build(args, rank, size, owners):
    dim, bot, top, sizes = architecture(args)
    tables = [EmbeddingBagConfig(name=f"t{t}", embedding_dim=dim, num_embeddings=sizes[t], feature_names=[f"f{t}"])
              for t in range(NUM_SPARSE)]
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(tables=tables, device=torch.device("meta")),
                 dense_in_features=NUM_DENSE, dense_arch_layer_sizes=bot[1:], over_arch_layer_sizes=top[1:])
    init_like_sparq(model)
    bf16 = args.mlp_precision == "bf16"
    model.dense_arch, model.over_arch = Autocast(model.dense_arch, bf16), Autocast(model.over_arch, bf16)
    if args.sparq_emb != "none":
        fwd, bwd = (args.sparq_emb.split("/") + [args.sparq_emb])[:2]
        registry = sq.qcomm_codecs(fwd, bwd, tables=tables)  # rows of one table's embedding
    elif args.qcomms != "none":
        p = CommType[args.qcomms.upper()]
        registry = get_qcomm_codecs_registry(QCommsConfig(forward_precision=p, backward_precision=p),
                                             comm_ops=[CommOp.POOLED_EMBEDDINGS_ALL_TO_ALL], device=torch.device("cpu"))
    else:
        registry = None
    sharder = EmbeddingBagCollectionSharder(
        fused_params={"optimizer": EmbOptimType.EXACT_SGD, "learning_rate": args.learning_rate},
        qcomm_codecs_registry=registry)
    plan = sharding_plan(model, sharder, tables, owners, size)
    hook = None
    wrapper = None
    if args.hook != "none":
        allreduce = args.allreduce if args.allreduce != "auto" else "ring" if args.hook.startswith("q") else "auto"
        hook = st.Hook(args.hook, allreduce=allreduce,
                       comm=st.connect(timeout=datetime.timedelta(seconds=args.timeout)))
        wrapper = sq.data_parallel_wrapper(hook)
    dmp = DistributedModelParallel(model, device=torch.device("cpu"), plan=plan, sharders=[sharder],
                                   data_parallel_wrapper=wrapper)
    dense_opt = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(dmp.named_parameters())),
                                      lambda ps: torch.optim.SGD(ps, lr=args.learning_rate))
    start = load_sparq(args.load_sparq, dmp, sizes, dim, bot[-1]) if args.load_sparq else 0
    return dmp, dense_opt, hook, registry, sizes, start, plan


def kjt(ids, sizes):
    """The categorical values of a share, hashed to rows: one id per sample and feature."""
    n = ids.shape[0]
    values = np.concatenate([rows_of(ids[:, t], t, sizes[t]) for t in range(NUM_SPARSE)])
    return KeyedJaggedTensor.from_lengths_sync(keys=[f"f{t}" for t in range(NUM_SPARSE)],
                                               values=torch.from_numpy(values),
                                               lengths=torch.ones(NUM_SPARSE * n, dtype=torch.int32))


def table_ranks(plan):
    """The rank that holds each table (t0, t1, ...) in the sharding plan."""
    ranks = {name: ps.ranks[0] for shards in plan.plan.values() for name, ps in shards.items()}
    return [ranks[f"t{t}"] for t in range(NUM_SPARSE)]


def kernels(plan):
    """The compute kernels of the sharding plan's tables."""
    return sorted({ps.compute_kernel for shards in plan.plan.values() for ps in shards.values()})


def owned_dims(plan, size, dim):
    """Values per sample each rank's tables give (TorchRec's dim_sum_per_rank)."""
    ranks = table_ranks(plan)
    return [dim * ranks.count(r) for r in range(size)]


def block_bytes(registry, op_dir, n):
    """Bytes of an alltoall block of n values under the registry's codec."""
    if registry is None:
        return 4 * n
    codec = getattr(registry[CommOp.POOLED_EMBEDDINGS_ALL_TO_ALL.name], op_dir)
    size = codec.calc_quantized_size(n, codec.create_context())
    return size * torch.tensor([], dtype=codec.quantized_dtype).element_size()


def main():
    args = parse_args()
    rank, size = init_distributed(args.timeout)
    owners = apply_plan(args, size)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    dmp, dense_opt, hook, registry, sizes, start, plan = build(args, rank, size, owners)
    train, test_set = read_data(args.data_path)
    batch = args.mini_batch_size
    if batch % size:
        raise SystemExit(f"--mini-batch-size {batch} does not divide over {size} ranks")
    local = batch // size
    steps = min(args.num_batches or len(train) // batch, len(train) // batch)  # one epoch at most, as sparq train
    order = np.arange(len(train)) if args.no_shuffle else np.random.default_rng(args.seed).permutation(len(train))

    # Bytes per step this rank puts on the wire, by entity.
    dims = owned_dims(plan, size, args.arch_sparse_feature_size)
    per_step = {
        "emb_fwd": sum(block_bytes(registry, "forward", local * dims[rank]) for j in range(size) if j != rank),
        "emb_bwd": sum(block_bytes(registry, "backward", local * dims[j]) for j in range(size) if j != rank),
        # TorchRec's input dist: each rank's ids (int64) and lengths (int32) to the tables' owners
        "ids": sum(local * (dims[j] // args.arch_sparse_feature_size) * 12 for j in range(size) if j != rank),
    }
    n_dense = sum(p.numel() for _, p in in_backward_optimizer_filter(dmp.named_parameters()))
    ring = 2 * (size - 1) / size * 4 * n_dense  # torch's allreduce, by the ring formula
    emb = f"sparq {args.sparq_emb}" if args.sparq_emb != "none" else f"torchrec {args.qcomms}"
    if rank == 0 and args.plan:
        print(f"torchrec_dlrm: plan {args.plan}: hook {args.hook} ({args.allreduce}), sparq-emb {args.sparq_emb}, "
              f"threads {args.threads}, tables by rank {table_ranks(plan)}, kernels {kernels(plan)}",
              flush=True)
    if rank == 0:
        print(f"torchrec_dlrm: {size} ranks, tables table-wise ({dims} values per sample by rank), embeddings' "
              f"alltoall {emb}, hook {args.hook}, mlp-precision {args.mlp_precision}, global batch {batch}, "
              f"{steps} steps", flush=True)

    def inputs(rec):
        share = rec[rank * local:(rank + 1) * local]
        return (torch.from_numpy(np.ascontiguousarray(share["dense"])), kjt(share["sparse"], sizes),
                torch.from_numpy(np.ascontiguousarray(share["label"])))

    t0 = last = time.perf_counter()
    testing = 0.0  # seconds spent in tests, left out of the training time
    loss_sum = correct = 0.0
    k = 0
    hook_bytes = 0
    clock = ThreadClock()

    def test(it):
        nonlocal testing, last
        clock.pause()
        at = time.perf_counter()
        evaluate(dmp, test_set, inputs, batch, it, steps, at - t0 - testing)
        dmp.train()
        clock.resume()
        testing += time.perf_counter() - at
        last += time.perf_counter() - at

    if args.profile and steps - start < 20 + args.profile:
        raise SystemExit(f"--profile {args.profile}: the run has {steps - start} steps, the profile needs "
                         f"{20 + args.profile} (it starts at step 20)")
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if args.profile else None
    for it in range(start, steps):
        if profiler and it == start + 20:
            profiler.start()
        if profiler and it == start + 20 + args.profile:
            profiler.stop()
            if rank == 0:
                print(f"torch.profiler, rank 0, steps {it - args.profile + 1}-{it}:\n"
                      + profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=30), flush=True)
        dense, ids, label = inputs(np.take(train, order[it * batch:(it + 1) * batch]))
        logits = dmp(dense, ids).squeeze(1)
        loss = nn.functional.binary_cross_entropy_with_logits(logits, label)
        dense_opt.zero_grad()
        loss.backward()  # the tables' fused SGD runs in it
        dense_opt.step()
        loss_sum += loss.item()
        correct += float(((logits > 0) == (label > 0.5)).float().mean())
        k += 1
        if (it + 1) % args.print_freq == 0 or it + 1 == steps:
            now = time.perf_counter()
            total = torch.tensor([loss_sum, correct], dtype=torch.float64)
            dist.all_reduce(total)  # equal shares: the global batch's mean is the mean over ranks
            if hook:
                hook.wait()
                w, hook_bytes = (hook.bytes_sent - hook_bytes) / k, hook.bytes_sent
                wgrad = f"W_grad {w / 1e3:.1f}"
            else:
                wgrad = f"W_grad {ring / 1e3:.1f} (computed)"
            computed = ", ".join(f"{e} {b / 1e3:.1f}" for e, b in per_step.items())
            if rank == 0:
                print(f"Finished training it {it + 1}/{steps} of epoch 0, {(now - last) / k * 1000:.2f} ms/it, "
                      f"loss {total[0].item() / size / k:.6f}, accuracy {100 * total[1].item() / size / k:.3f} %; "
                      f"kB/step sent (rank 0): {wgrad}, {computed} (computed)", flush=True)
            last, loss_sum, correct, k = now, 0.0, 0.0, 0
        if args.test_freq and (it + 1) % args.test_freq == 0 and it + 1 != steps:
            test(it + 1)
    test(steps)
    clock.report(steps - start)
    if hook:
        hook.wait()
    dist.destroy_process_group()


def evaluate(dmp, test, inputs, batch, it, steps, train_s):
    """sparq train's test line, with the training time so far: every rank
    scores its share of each test batch."""
    scores, labels = [], []
    dmp.eval()
    with torch.no_grad():
        for s in range(0, len(test) - batch + 1, batch):
            dense, ids, label = inputs(test[s:s + batch])
            scores.append(torch.sigmoid(dmp(dense, ids).squeeze(1)))
            labels.append(label)
    report_test(torch.cat(scores), torch.cat(labels), it, steps, train_s)


if __name__ == "__main__":
    try:
        main()
    except sparq.Error as e:  # one line, and the job ends at once (the other ranks may wait for this one)
        print(f"torchrec_dlrm: {e}", file=sys.stderr)
        st.abort(1)
