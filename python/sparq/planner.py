"""sparq.plan: `sparq plan`'s search for a DLRM trained in PyTorch.

plan() runs the planner of the `sparq` CLI (pip install . puts it beside
the interpreter) on the user's data, ranks and network, and returns the
plan it wrote. The plan's settings() are what a PyTorch DLRM needs of it:
the DDP hook's codec and collective, the lookups' alltoall codecs
(forward/backward), the threads a rank and the MLPs' precision;
table_owners() is its table-wise placement, for a TorchRec sharding plan.
DDP's buckets keep DDP's size (a hook call each, DDP's own mechanism, not
sparq's fusion): `sparq plan --for pytorch` plans them as its largest
fusion, 4 MiB (one exchange for a model of up to 4 MiB of gradients, as one
bucket of DDP's default 25 MB is). Both examples take a plan file
(examples/dlrm_ddp.py and examples/torchrec_dlrm.py, --plan).
"""
import json
import os
import shutil
import subprocess
import sys

from .dlrm import assign_tables

# The plan file's knobs that the PyTorch examples have a setting for.
_PLAN_KNOBS = ("dp-allreduce", "dp-codec", "emb-codec-bwd", "emb-codec-fwd", "emb-placement", "threads")


def cli():
    """The sparq CLI: $SPARQ_CLI, else the one installed beside this
    interpreter, else the first on PATH."""
    if os.environ.get("SPARQ_CLI"):
        return os.environ["SPARQ_CLI"]
    beside = os.path.join(os.path.dirname(sys.executable), "sparq")
    found = beside if os.access(beside, os.X_OK) else shutil.which("sparq")
    if not found:
        raise FileNotFoundError("sparq.plan needs the sparq CLI: pip install . puts it beside the interpreter "
                                "(or set SPARQ_CLI to one, e.g. build/sparq)")
    return found


def plan(data_path, *, hosts, mini_batch_size, net, out="plan.json", max_loss_change=0.1, **flags):
    """Runs `sparq plan --for pytorch` (the data-parallel plans with the
    tables table-wise, which the examples train, fused as DDP's buckets) for
    HOSTS ranks on the network NET (BW,LAT[,stack costs], as `sparq plan
    --net`) and writes the plan file OUT. The modelled steps are sparq
    train's on the virtual clock: they rank the plans, PyTorch's own step
    differs. FLAGS are more of its flags, by their Python names
    (arch_mlp_bot="13-64-16", compute_scale=2, exhaustive=True); the model's
    must be the ones the training will use. Returns the Plan; its `table` is
    the planner's printed table. Raises ValueError with the planner's
    one-line error where it plans nothing (bad input, a budget or memory
    that no plan meets)."""
    args = [cli(), "plan", "--for", "pytorch", "--data-path", os.fspath(data_path), "--hosts", str(hosts),
            "--net", net, "--mini-batch-size", str(mini_batch_size), "--max-loss-change", str(max_loss_change),
            "--out", os.fspath(out)]
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args += [flag, str(value)]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        lines = run.stderr.strip().splitlines() or [f"sparq plan: exit status {run.returncode}"]
        raise ValueError(lines[-1])
    return Plan(out, table=run.stdout)


class Plan:
    """A plan file of `sparq plan`: its flags, what it was chosen for (model,
    ranks, global batch, network) and its modelled step. ValueError, naming
    the file, where it is no plan file sparq can read."""

    def __init__(self, path, table=""):
        self.path, self.table = os.fspath(path), table
        try:
            with open(path) as f:
                plan = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a plan file of sparq plan ({e})") from None
        if not isinstance(plan, dict) or plan.get("format") != "sparq-plan" or plan.get("format_version") != 1:
            raise ValueError(f"{path}: not a plan file of sparq plan (format sparq-plan, version 1)")
        self.flags = plan.get("flags", {})
        missing = [k for k in _PLAN_KNOBS if k not in self.flags]
        if missing:
            raise ValueError(f"{path}: the plan has no {', '.join(missing)}")
        self.model, self.ranks, self.global_batch = plan.get("model"), plan.get("ranks"), plan.get("global_batch")
        self.net, self.evidence = plan.get("net", ""), plan.get("evidence", "")
        self.modelled_ms = plan.get("modelled_ms_per_step")

    def settings(self, *, model, ranks, global_batch):
        """The settings for a data-parallel DLRM in PyTorch with its tables
        table-wise: hook (the dense gradients' codec), allreduce (its
        collective), emb_codec ("FWD/BWD" of the lookups' alltoall), threads
        and mlp_precision. The plan must be for this model (plan_model's
        string), rank count and global batch, data parallel (not hybrid, not
        a parameter server) and table-wise; else ValueError saying which."""
        for what, want, got in (("model", model, self.model), ("ranks", ranks, self.ranks),
                                ("global batch", global_batch, self.global_batch)):
            if want != got:
                raise ValueError(f"{self.path}: a plan for {what} {got}, this run has {want}")
        f = self.flags
        # Plan files written before these knobs joined the space hold data-parallel fp32 plans.
        if f.get("mp-splits", "") or f.get("dp-mode", "allreduce") != "allreduce":
            what = f"hybrid (--mp-splits {f['mp-splits']})" if f.get("mp-splits") else "a parameter server"
            raise ValueError(f"{self.path}: the plan is {what}; the PyTorch examples train data parallel only")
        if f["emb-placement"] != "table-wise":
            raise ValueError(f"{self.path}: the plan places the tables {f['emb-placement']}; the PyTorch "
                             "examples shard them table-wise only")
        return {"hook": f["dp-codec"], "allreduce": f["dp-allreduce"],
                "emb_codec": f"{f['emb-codec-fwd']}/{f['emb-codec-bwd']}", "threads": int(f["threads"]),
                "mlp_precision": f.get("mlp-precision", "fp32")}

    def table_owners(self, sizes):
        """The rank of each table in the plan's table-wise placement (the one
        its modelled step was timed with: sparq's largest-first rule)."""
        return assign_tables(sizes, self.ranks)


def plan_model(bot, top, dim, sizes):
    """The model a plan file names (as sparq plan writes it): the MLPs' widths
    (the top one from the interaction's output on), the tables and their rows."""
    rows = f"{sizes[0]} each" if len(set(sizes)) == 1 else "-".join(map(str, sizes))
    return (f"bot {'-'.join(map(str, bot))}, top {'-'.join(map(str, top))}, {len(sizes)} tables x {dim}, "
            f"rows {rows}")
