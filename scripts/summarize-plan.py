#!/usr/bin/env python3
"""results.md's tables of sparq plan: against an exhaustive sweep of its space
on the virtual clock, from the runs of scripts/reproduce-plan (docs/data/plan:
NAME_pruned.{jsonl,log} and NAME_exhaustive.{jsonl,log}); and, where
scripts/plan-cluster-sweep measured the same plans on the 4-host cluster
(docs/data/plan/cluster4), measured against modelled.

    python3 scripts/summarize-plan.py [docs/data/plan]"""
import importlib.util
import json
import pathlib
import re
import statistics
import sys

DEFAULTS = {"emb-placement": "replicated", "dp-codec": "none", "dp-allreduce": "auto",
            "emb-codec-fwd": "fp32", "emb-codec-bwd": "fp32", "fuse-bytes": "0", "mlp-precision": "fp32",
            "mp-splits": "", "micro-batches": "1", "mp-codec": "none", "dp-mode": "allreduce", "servers": "1"}


MODELS = {"cluster4-hostcores0": "a core for each thread (--host-cores 0)",
          "cluster4-alpha200us": "a core for each thread and 200 us a message",
          "cluster4-alpha500us": "a core for each thread and 500 us a message",
          "cluster4-hostcores1": "one core a host (--host-cores 1), as the plan's sweep",
          "cluster4-hostcores1-alpha300us": "one core a host and 300 us a message"}


def flag_text(flags, leave_out=()):
    """A plan's flags as a command line's, but those at their default ("") and LEAVE_OUT."""
    return " ".join(f"--{k} {v}" for k, v in sorted(flags.items()) if v != "" and k not in leave_out)


def plan_key(flags, leave_out=()):
    """A plan's knobs but its threads (a run's config line or a planner's flags; a flag older runs did not
    record has its default)."""
    return json.dumps({k: str(flags.get(k, v)) for k, v in DEFAULTS.items() if k not in leave_out}, sort_keys=True)


def load(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def admitted_runs(path):
    """The admitted plans an exhaustive run ran (its --metrics), their first runs (not the leaders' longer)."""
    return [p for p in load(path) if p["admitted"] and "modelled_ms_per_step" in p and not p.get("refined")]


def fp32(p):
    f = p["flags"]
    return (f["dp-codec"] == "none" and f["emb-codec-fwd"] == "fp32" and f["emb-codec-bwd"] == "fp32"
            and all(f.get(k, DEFAULTS[k]) == DEFAULTS[k] for k in ("mlp-precision", "mp-codec", "dp-mode")))


def main(out):
    print("| setting | plans (admitted) | run: planner / sweep | planning s | planner's plan | its ms/step in the sweep "
          "| sweep's fastest | ms/step | planner / fastest | vs defaults | vs fastest fp32 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    structures = []
    for pruned_path in sorted(out.glob("*_pruned.jsonl")):
        name = pruned_path.name[: -len("_pruned.jsonl")]
        pruned, sweep = load(pruned_path), load(out / f"{name}_exhaustive.jsonl")
        secs = re.search(r"planned in ([\d.]+) s", (out / f"{name}_pruned.log").read_text()).group(1)
        chosen = json.loads((out / f"{name}_pruned.plan.json").read_text())
        ran = [p for p in sweep if "modelled_ms_per_step" in p]
        first = [p for p in ran if not p.get("refined")]
        longer = [p for p in ran if p.get("refined")] or first  # the choice is among the leaders' longer runs
        key = lambda f: json.dumps(f, sort_keys=True)
        by_flags = {key(p["flags"]): p for p in first}
        by_flags.update({key(p["flags"]): p for p in longer})
        # The sweep ran the planner's plan at its thread count if it was one of
        # the sweep's leaders too; else its first run (one thread) stands in.
        same = by_flags.get(key(chosen["flags"])) or by_flags[key(dict(chosen["flags"], threads="1"))]
        mine = same["modelled_ms_per_step"]
        best = min((p for p in longer if p["admitted"]), key=lambda p: p["modelled_ms_per_step"])
        default = by_flags.get(key(dict(DEFAULTS, threads="1")), {}).get("modelled_ms_per_step")  # None: not run
        best_fp32 = min(p["modelled_ms_per_step"] for p in longer if fp32(p))
        admitted = sum(p["admitted"] for p in sweep if not p.get("refined"))
        n_pruned = sum("modelled_ms_per_step" in p and not p.get("refined") for p in pruned)
        space = sum(not p.get("refined") for p in sweep)
        print(f"| {name} | {space} ({admitted}) | {n_pruned} / {len(first)} | {secs} | {same['label']}{'' if same['flags'] == chosen['flags'] else ' (its ' + chosen['flags']['threads'] + ' threads not in the sweep)'} | {mine:.2f} "
              f"| {best['label']} | {best['modelled_ms_per_step']:.2f} | {mine / best['modelled_ms_per_step']:.3f} "
              f"| {f'{default / mine:.2f}x' if default else 'not run (memory)'} | {best_fp32 / mine:.2f}x |")
        hybrid = [p["modelled_ms_per_step"] for p in ran if p["admitted"] and p["flags"].get("mp-splits")]
        dp = [p["modelled_ms_per_step"] for p in ran if p["admitted"] and not p["flags"].get("mp-splits")]
        if hybrid:
            structures.append(f"{name} {min(dp):.2f} / {min(hybrid):.2f}")
    if structures:
        print(f"\nThe fastest data-parallel / hybrid plan of each sweep, ms/step: {'; '.join(structures)}.")


def measured_ms(path, key="ms_per_it"):
    """A run's step: the median of its print intervals after the first (key
    "modeled_ms_per_it": on the virtual clock)."""
    trains = [e for e in load(path) if e["event"] == "train"]
    return statistics.median(e[key] for e in trains[1:])


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0] * len(xs)
    for pos, i in enumerate(order):
        r[i] = pos
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def cluster(out):
    runs = out / "cluster4"
    if not runs.is_dir():
        return
    sweep = admitted_runs(out / "cluster4-1gbit_exhaustive.jsonl")
    measured = measured_by_flags(runs)  # the cluster's runs by their plan's flags (their config lines)
    rows = []
    for p in sweep:
        ms = measured.get(plan_key(p["flags"]))
        if ms:
            rows.append((p, statistics.median(ms), len(ms)))
    defaults = statistics.median(measured_ms(f) for f in sorted(runs.glob("defaults_r*.jsonl")))
    chosen = json.loads((out / "cluster4-1gbit_pruned.plan.json").read_text())["flags"]
    mine = next(ms for p, ms, _ in rows if plan_key(p["flags"]) == plan_key(chosen))
    best = min(rows, key=lambda r: r[1])
    best_fp32 = min(ms for p, ms, _ in rows if fp32(p))
    errors = [p["modelled_ms_per_step"] / ms for p, ms, _ in rows]
    rounds = [v for v in measured.values() if len(v) == 2]
    print(f"\nThe cluster against itself: Spearman {spearman([v[0] for v in rounds], [v[1] for v in rounds]):.3f} "
          f"between the sweep's two rounds of {len(rounds)} plans; round 1 / round 2 "
          f"{min(a / b for a, b in rounds):.2f}-{max(a / b for a, b in rounds):.2f}.")
    print(f"{len(rows)} plans measured on the cluster ({rows[0][2]} rounds each, median): Spearman "
          f"{spearman([p['modelled_ms_per_step'] for p, _, _ in rows], [ms for _, ms, _ in rows]):.3f} between modelled "
          f"and measured; modelled/measured {min(errors):.2f}-{max(errors):.2f} (median "
          f"{statistics.median(errors):.2f}), {sum(abs(e - 1) <= 0.15 for e in errors)} of {len(rows)} within 15 %.")
    print(f"In the sweep (every plan at --threads 1), the planner's plan's codecs and placement measured {mine:.2f} ms/step; the fastest measured plan ({best[0]['label']}) "
          f"{best[1]:.2f}: {mine / best[1]:.3f}x. The default flags (--threads 2) {defaults:.2f} ms/step: "
          f"{defaults / mine:.2f}x the plan's; the fastest fp32 plan {best_fp32:.2f}: {best_fp32 / mine:.2f}x.")
    fusion(rows)
    print()
    # The same measurements against sweeps modelled otherwise (scripts/reproduce-
    # plan's models part): a per-message latency, one core a host.
    measured = {p["label"]: ms for p, ms, _ in rows}
    for path in sorted((out / "models").glob("*.jsonl")):
        mod = {p["label"]: p["modelled_ms_per_step"] for p in load(path)
               if "modelled_ms_per_step" in p and not p.get("refined")}
        both = [label for label in measured if label in mod]
        e = [mod[label] / measured[label] for label in both]
        print(f"Modelled as {MODELS[path.stem]} ({path.name}): Spearman "
              f"{spearman([mod[x] for x in both], [measured[x] for x in both]):.3f}; modelled/measured "
              f"{min(e):.2f}-{max(e):.2f}, {sum(abs(x - 1) <= 0.15 for x in e)} of {len(both)} within 15 %.")
    model_rounds(out / "models" / "rounds", {plan_key(p["flags"]): ms for p, ms, _ in rows})
    print()
    print("| plan | modelled ms/step | measured ms/step | modelled / measured |")
    print("|---|---|---|---|")
    for p, ms, _ in sorted(rows, key=lambda r: r[1]):
        print(f"| {p['label']} | {p['modelled_ms_per_step']:.2f} | {ms:.2f} | {p['modelled_ms_per_step'] / ms:.2f} |")


def model_rounds(runs, measured):
    """scripts/plan-model-rounds: the cluster's plans modelled two ways in the same rounds, each round's
    modelled steps and their median against the cluster's measured ones."""
    if not runs.is_dir():
        return
    print()
    print("| the hosts modelled as | round | Spearman, modelled and measured | modelled / measured "
          "| within 15 % | hybrid plans: modelled / measured |")
    print("|---|---|---|---|---|---|")
    for name, what in (("hostcores1", "a core each at half speed (`--compute-scale 2 --host-cores 1`)"),
                       ("shared2", "2 cores shared at full speed (`--shared-cores 2`)")):
        rounds = [{plan_key(p["flags"]): p for p in load(f)} for f in sorted(runs.glob(f"{name}_r*.jsonl"))]
        keys = [k for k in measured if all(k in r for r in rounds)]
        steps = [{k: r[k]["modelled_ms_per_step"] for k in keys} for r in rounds]
        steps.append({k: statistics.median(s[k] for s in steps) for k in keys})
        hybrid = [k for k in keys if rounds[0][k]["flags"].get("mp-splits")]
        for i, s in enumerate(steps):
            e = [s[k] / measured[k] for k in keys]
            h = [s[k] / measured[k] for k in hybrid]
            print(f"| {what} | {i + 1 if i < len(rounds) else 'median'} "
                  f"| {spearman([s[k] for k in keys], [measured[k] for k in keys]):.3f} | {min(e):.2f}-{max(e):.2f} "
                  f"| {sum(abs(x - 1) <= 0.15 for x in e)} of {len(keys)} | {min(h):.2f}-{max(h):.2f} |")


def fusion(rows):
    """What --fuse-bytes auto rests on: each plan unfused against the same plan fused by 1 MiB, and 1 MiB
    against 4 MiB, the plans with a --dp-codec apart from those without (auto fuses only the former)."""
    by = {}
    for p, ms, _ in rows:
        by.setdefault(plan_key(p["flags"], ("fuse-bytes",)),
                      {})[p["flags"]["fuse-bytes"]] = (ms, p["flags"]["dp-codec"] == "none")
    for kind, want in (("with a --dp-codec", False), ("with --dp-codec none", True)):
        trios = [f for f in by.values() if len(f) == 3 and f["0"][1] == want]
        one = [f["0"][0] / f["1MiB"][0] for f in trios]
        four = [f["1MiB"][0] / f["4MiB"][0] for f in trios]
        print(f"Fusion, the {len(trios)} plans {kind}: 1 MiB {min(one):.2f}-{max(one):.2f}x as fast as unfused, "
              f"4 MiB {min(four):.2f}-{max(four):.2f}x as fast as 1 MiB.")


def measured_by_flags(runs):
    """{plan flags (json): [ms/step of each round]} of the cluster sweep's runs."""
    out = {}
    for f in sorted(f for f in runs.glob("p*_r*.jsonl") if re.fullmatch(r"p\d+_r\d+\.jsonl", f.name)):
        config = load(f)[0]["flags"]
        out.setdefault(plan_key(config), []).append(measured_ms(f))
    return out


def measured_medians(runs):
    """{plan key: its median measured step} over a cluster sweep's rounds (RUNS: its folder)."""
    return {k: statistics.median(v) for k, v in measured_by_flags(runs).items()}


def fastest_measured(runs, admitted=None):
    """The flags of the fastest plan a cluster sweep measured (its runs' folder), as train flags; of those
    an exhaustive run admitted (ADMITTED: its --metrics) where given: the planner's space on today's evidence."""
    return flag_text(json.loads(fastest_admitted(measured_medians(runs), admitted)))


def fastest_admitted(meas, admitted=None):
    """The key of the fastest plan of MEAS ({plan key: ms}); of those an exhaustive run admitted, where given."""
    keep = {plan_key(p["flags"]) for p in admitted_runs(admitted)} if admitted else meas
    return min((k for k in meas if k in keep), key=meas.get)


def check(out):
    for runs, sweep, what in (("cluster4-check", "cluster4", ""),
                              ("cluster4-check-eager", "cluster4-eager", " (5 ms spin, 4 MiB eager)"),
                              ("cluster4-check-eager-200", "cluster4-eager",
                               " (5 ms spin, 4 MiB eager), 200 steps a run"),
                              ("cluster4-check-replan", "cluster4-eager", " (planned again: cluster4-eager-1gbit)"),
                              ("cluster4-check-replan-200", "cluster4-eager",
                               " (planned again: cluster4-eager-1gbit), 200 steps a run"),
                              ("cluster4-check-byset-200", "cluster4-eager",
                               " (planned on the evidence set by set: plan-byset), 200 steps a run"),
                              ("cluster4-check-leaders-200", "cluster4-eager",
                               " (planned again, the leaders family by family, 2 threads a rank allowed), 200 steps a run"),
                              ("cluster4-check-cores-200", "cluster4-eager",
                               " (planned again, threads a rank up to a host's cores: cluster4-eager-1gbit), 200 steps a run"),
                              ("cluster4-check-admitted-200", "cluster4-eager",
                               " (the same plan against the sweep's fastest admitted plan), 200 steps a run"),
                              ("cluster4-check-admitted-200-again", "cluster4-eager",
                               " (the same three again, the next 5 rounds), 200 steps a run"),
                              ("cluster4-check-trial-leaders-200", "cluster4-trial-sweep",
                               " (sparq plan --trial, the leaders alone by their median step: cluster4-trial-leaders), "
                               "200 steps a run"),
                              ("cluster4-check-trial-200", "cluster4-trial-sweep",
                               " (sparq plan --trial: cluster4-trial), 200 steps a run"),
                              ("cluster4-check-trial-again-200", "cluster4-trial-sweep",
                               " (sparq plan --trial an hour later: cluster4-trial-again), 200 steps a run")):
        check_rounds(out / runs, out / sweep, what)


def check_rounds(runs, sweep, what):
    """scripts/plan-cluster-check's rounds (RUNS) against the fastest plan of the sweep SWEEP (of the plans
    admitted by the exhaustive run RUNS/admitted.jsonl, where the check was made with one)."""
    if not runs.is_dir():
        return
    admitted = runs / "admitted.jsonl"
    fastest = fastest_measured(sweep, admitted if admitted.exists() else None)

    ms = {kind: [measured_ms(f) for f in sorted(runs.glob(f"{kind}_r*.jsonl"))] for kind in ("defaults", "plan", "fastest")}
    med = {k: statistics.median(v) for k, v in ms.items()}
    ratios = [a / b for a, b in zip(ms["plan"], ms["fastest"])]  # paired by round, as the clock's check
    gains = [a / b for a, b in zip(ms["defaults"], ms["plan"])]
    print(f"\nsparq train --plan on the cluster{what}, {len(ms['plan'])} interleaved rounds (median ms/step): the plan "
          f"{med['plan']:.2f}, the sweep's fastest{' admitted' if admitted.exists() else ''} plan ({fastest}, --threads 1) {med['fastest']:.2f}, the "
          f"default flags {med['defaults']:.2f}: the plan is {med['plan'] / med['fastest']:.3f}x the fastest's step "
          f"(round by round {', '.join(f'{r:.3f}' for r in ratios)}: median {statistics.median(ratios):.3f}) and "
          f"{med['defaults'] / med['plan']:.2f}x faster than the defaults (round by round "
          f"{', '.join(f'{g:.2f}' for g in gains)}).")
    if admitted.exists():
        print(f"\nIn the sweep {in_sweep(runs / 'plan.json', sweep, admitted)}")


def in_sweep(plan, sweep, admitted):
    """'SWEEP (...) that plan took X ms a step, ...': a plan file's plan in a cluster sweep's steps against the
    fastest plan there that an exhaustive run (ADMITTED) admits, medians of the sweep's rounds."""
    meas = measured_medians(sweep)
    key, best = plan_key(json.loads(plan.read_text())["flags"]), meas[fastest_admitted(meas, admitted)]
    if key not in meas:
        return f"{sweep.name} that plan did not run: its space came later."
    return (f"{sweep.name} (median of its rounds) that plan took {meas[key]:.2f} ms a step, the fastest admitted one "
            f"{best:.2f}: {meas[key] / best:.3f}x.")


def same_day(out, folder="cluster4-today", plan="cluster4-eager-1gbit_pruned.plan.json", whose="The planner's plan"):
    """The clock's exhaustive run for the cluster (cluster4-eager-1gbit) against a sweep of its admitted plans
    on the cluster made on the same machine the same day (FOLDER), and the plan of PLAN there."""
    runs, name = out / folder, "cluster4-eager-1gbit"
    measured = measured_by_flags(runs) if runs.is_dir() else {}
    if not measured:
        return
    meas = {k: statistics.median(v) for k, v in measured.items()}
    sweep = {plan_key(p["flags"]): p["modelled_ms_per_step"] for p in admitted_runs(out / f"{name}_exhaustive.jsonl")}
    keys = [k for k in meas if k in sweep]
    e = [sweep[k] / meas[k] for k in keys]
    both = [k for k in keys if len(measured[k]) > 1]
    mine = meas[plan_key(json.loads((out / plan).read_text())["flags"])]
    best = min(meas, key=meas.get)
    print(f"\nThe same day's sweep ({runs.name}: {len(keys)} admitted plans, {min(map(len, measured.values()))} rounds, "
          f"median) against the clock's exhaustive run of that day: Spearman "
          f"{spearman([sweep[k] for k in keys], [meas[k] for k in keys]):.3f} (round 1 against round 2: "
          f"{spearman([measured[k][0] for k in both], [measured[k][1] for k in both]):.3f}), modelled/measured "
          f"{min(e):.2f}-{max(e):.2f}, {sum(abs(x - 1) <= 0.15 for x in e)} of {len(keys)} within 15 %. {whose} "
          f"there {mine:.2f} ms/step, {mine / meas[best]:.3f}x the fastest ({flag_text(json.loads(best))}, "
          f"{meas[best]:.2f}).")


def trial_stages(log):
    """The tables sparq plan --trial printed (LOG: its output): [(heading, [(plan, modelled, measured, vs round
    or None, rounds)])]."""
    stages = []
    for line in log:
        if line.startswith("on the hosts: "):
            stages.append((line.removeprefix("on the hosts: ").split(",")[0], []))
        elif stages and (m := re.fullmatch(r"  (.+?) +(\d+\.\d\d) +(\d+\.\d\d)(?: +(\d\.\d{3}))?  ([\d., ]+)", line)):
            stages[-1][1].append((m[1], m[2], m[3], m[4], m[5]))
    return stages


def trial_tables(runs):
    """The plans a sparq plan --trial's hosts trained, stage by stage, and what it measured and chose (RUNS:
    scripts/plan-cluster-trial's folder)."""
    log = (runs / "planner.log").read_text().splitlines()
    for heading, rows in trial_stages(log):
        print(f"\n| {heading}: plan | modelled ms/step (the clock's first run) | on the hosts, round by round | "
              "median | against the round's median plan |")
        print("|---|---|---|---|---|")
        for plan, modelled, measured, vs_round, rounds in rows:
            print(f"| {plan} | {modelled} | {rounds} | {measured} | {vs_round} |")
    for line in log:
        if line.startswith(("measured network: ", "chosen: ")):
            print(f"\n{line.split(' (latency')[0]}")


def trial(out):
    """scripts/plan-cluster-trial: sparq plan --measure --trial on the cluster, the plans its hosts trained stage
    by stage (as its log printed them), and the plan in a sweep of the same hour (cluster4-trial-sweep)."""
    runs = out / "cluster4-trial"
    if not runs.is_dir():
        return
    trial_tables(runs)
    for other, how in (("cluster4-trial-leaders", "Earlier the same hour (the leaders alone, by their median step)"),
                       ("cluster4-trial-by-median", "Earlier the same hour (leaders and fusion sizes, by their median step)"),
                       ("cluster4-trial-again", "The same command an hour later")):
        chosen = next(l for l in (out / other / "planner.log").read_text().splitlines() if l.startswith("chosen: "))
        print(f"\n{how} ({other}): {chosen}")
    same_day(out, "cluster4-trial-sweep", "cluster4-trial/planner.plan.json", "The plan --trial chose")
    sweep = out / "cluster4-trial-sweep"
    meas = measured_medians(sweep)
    mine = meas[plan_key(json.loads((runs / "planner.plan.json").read_text())["flags"])]
    defaults = statistics.median(measured_ms(f) for f in sorted(sweep.glob("defaults_r*.jsonl")))
    print(f"\nIn {sweep.name} the default flags took {defaults:.2f} ms a step (the median of its rounds), "
          f"{defaults / mine:.2f}x the step of the plan --trial chose.")


def wait_counted(out, trial="cluster4-trial-wait", sweep="cluster4-sweep-wait",
                 rounds=(("models/rounds-wait", "base", "CPU time as measured"),
                         ("models/rounds-wait", "kc", "kernel costs by shape"),
                         ("models/rounds-units", "units", "kernel costs by shape and units")),
                 check="cluster4-check-wait-200"):
    """The cluster measured again once a step counted rank 0's wait for the slowest rank: sparq plan --trial
    (TRIAL), every plan of the exhaustive run trained on the cluster (SWEEP), the clock's rounds of the plans
    today's evidence admits, each way of charging the CPU (ROUNDS: folder, TAG of its TAG-shared2_rN runs,
    label; a folder not there is left out), and the trial's plan in check rounds (CHECK)."""
    runs = out / sweep
    if not runs.is_dir():
        return
    trial_tables(out / trial)
    measured = measured_by_flags(runs)
    meas = {k: statistics.median(v) for k, v in measured.items()}
    admitted_path = out / "cluster4-eager-1gbit_exhaustive.jsonl"
    admits = {plan_key(p["flags"]) for p in admitted_runs(admitted_path)}
    admitted = [k for k in meas if k in admits]
    defaults = statistics.median(measured_ms(f) for f in sorted(runs.glob("defaults_r*.jsonl")))
    print(f"\nThe sweep ({sweep}): {len(meas)} plans, {min(map(len, measured.values()))} rounds; round 1 against "
          f"round 2 Spearman {agreement([measured[k] for k in meas])}; the {len(admitted)} plans today's evidence "
          f"admits: {agreement([measured[k] for k in admitted])}; the fastest plan {min(meas.values()):.2f} "
          f"ms/step, the fastest admitted {meas[fastest_admitted(meas, admitted_path)]:.2f}, the default flags "
          f"(--threads 2) {defaults:.2f}.")
    clock_rounds(out, rounds, admitted, meas)
    check_rounds(out / check, runs, f" (sparq plan --trial: {trial}), 200 steps a run")


def clock_rounds(out, rounds, admitted, meas, title="the clock (2 cores shared, 32 steps a plan)"):
    """The clock's rounds of the ADMITTED plans against a cluster sweep's medians (MEAS), each way of charging
    the CPU (ROUNDS: folder, TAG of its TAG-shared2_rN runs, label; one with no runs is left out), and how
    each way's rounds agree with each other."""
    print(f"\n| {title} | round | Spearman, modelled and measured "
          "| modelled / measured | within 15 % | hybrid plans | the rest |")
    print("|---|---|---|---|---|---|---|")
    against = []
    for folder, tag, what in rounds:
        got = [{plan_key(p["flags"]): p for p in load(f)} for f in sorted((out / folder).glob(f"{tag}-shared2_r*.jsonl"))]
        if not got:
            continue
        keys = [k for k in admitted if all(k in g for g in got)]
        steps = [{k: g[k]["modelled_ms_per_step"] for k in keys} for g in got]
        against.append(f"{what} {agreement([[x[k] for x in steps] for k in keys])}")
        steps.append({k: statistics.median(x[k] for x in steps) for k in keys})
        for i, x in enumerate(steps):
            e = {k: x[k] / meas[k] for k in keys}
            hyb = [e[k] for k in keys if got[0][k]["flags"].get("mp-splits")]
            rest = [e[k] for k in keys if not got[0][k]["flags"].get("mp-splits")]
            print(f"| {what} | {i + 1 if i < len(got) else 'median'} "
                  f"| {spearman([x[k] for k in keys], [meas[k] for k in keys]):.3f} "
                  f"| {min(e.values()):.2f}-{max(e.values()):.2f} | {sum(abs(v - 1) <= 0.15 for v in e.values())} of "
                  f"{len(keys)} | {min(hyb):.2f}-{max(hyb):.2f} | {min(rest):.2f}-{max(rest):.2f} |")
    print(f"\nThe clock's rounds against each other (Spearman, the lowest of the pairs; modelled step's ratio): "
          f"{'; '.join(against)}.")


def units_day(out, sweep="cluster4-sweep-units", rounds="models/rounds-units", check="cluster4-check-units-200"):
    """The day the embedding rows were first charged by units: the 48 admitted plans swept on the cluster
    (SWEEP) against the clock's rounds of that day (ROUNDS, TAG units), and the trial's plan of
    cluster4-trial-wait in check rounds (CHECK)."""
    runs = out / sweep
    if not runs.is_dir():
        return
    measured = measured_by_flags(runs)
    meas = {k: statistics.median(v) for k, v in measured.items()}
    admits = {plan_key(p["flags"]) for p in admitted_runs(out / "cluster4-eager-1gbit_exhaustive.jsonl")}
    admitted = [k for k in meas if k in admits]
    defaults = statistics.median(measured_ms(f) for f in sorted(runs.glob("defaults_r*.jsonl")))
    print(f"\nThe sweep ({sweep}): {len(admitted)} admitted plans, {min(map(len, measured.values()))} rounds; "
          f"the rounds against each other Spearman {agreement([measured[k] for k in admitted])}; the fastest "
          f"{min(meas[k] for k in admitted):.2f} ms/step, the default flags (--threads 2) {defaults:.2f}.")
    clock_rounds(out, ((rounds, "units", "kernel costs by shape and units"),), admitted, meas,
                 f"the clock against {sweep} (2 cores shared, 32 steps a plan)")
    check_rounds(out / check, runs, " (sparq plan --trial: cluster4-trial-wait), 200 steps a run")


def codec_units_day(out, trial="cluster4-trial-codec-units", check="cluster4-check-codec-units-200"):
    """The build that charges the codecs by their values: sparq plan --measure --trial on the cluster (TRIAL)
    and its plan in check rounds against the default flags and cluster4-sweep-units' fastest admitted plan."""
    if not (out / trial).is_dir():
        return
    chosen = next(l for l in (out / trial / "planner.log").read_text().splitlines() if l.startswith("chosen: "))
    print(f"\nThe codecs charged by their values ({trial}): {chosen}")
    check_rounds(out / check, out / "cluster4-sweep-units", f" (sparq plan --trial: {trial}), 200 steps a run")


def agreement(runs):
    """'S, ratio A-B': how a plan's runs agree with each other (RUNS: each plan's steps, one a round): the lowest
    Spearman of any two rounds over the plans, and the range of their steps' ratio."""
    pairs = [(i, j) for i in range(len(runs[0])) for j in range(i + 1, len(runs[0]))]
    rho = min(spearman([r[i] for r in runs], [r[j] for r in runs]) for i, j in pairs)
    ratios = [r[i] / r[j] for r in runs for i, j in pairs]
    return f"{rho:.3f}, ratio {min(ratios):.2f}-{max(ratios):.2f}"


def collat(out):
    """The plan for the cluster's network with a latency a collective (plan-collat) in the eager sweep."""
    runs = out / "plan-collat"
    if runs.is_dir():
        print(f"\nPlanned with a latency a collective ({planned_net(runs / 'cluster4-eager-1gbit.log')}): in the sweep "
              + in_sweep(runs / "cluster4-eager-1gbit.plan.json", out / "cluster4-eager",
                         out / "cluster4-eager-1gbit_exhaustive.jsonl"))


def dct_variants(out):
    """scripts/cluster-dct-variants: DCT-DP 98 % with fp32 or bf16 values, fused by 1 or 4 MiB, on the cluster;
    each against the fp32-valued 4 MiB plan of the same round (the median of the rounds' ratios)."""
    runs = out / "cluster4-dct-variants"
    measured = measured_by_flags(runs) if runs.is_dir() else {}
    if not measured:
        return
    label = lambda k: f"{json.loads(k)['dp-codec']}, fuse {json.loads(k)['fuse-bytes']}"
    base = next(k for k in measured if label(k) == "dct:0.98,1000, fuse 4MiB")
    print("\n| replicated, one thread | ms/step, round by round | median | against dct:0.98,1000, fuse 4MiB |")
    print("|---|---|---|---|")
    for k, v in sorted(measured.items(), key=lambda kv: label(kv[0])):
        ratio = statistics.median(a / b for a, b in zip(v, measured[base]))
        print(f"| {label(k)} | {', '.join(f'{x:.2f}' for x in v)} | {statistics.median(v):.2f} | {ratio:.3f} |")
    sweep = measured_medians(out / "cluster4-eager")
    print("\nThe same four in the eager sweep (its rounds' median, ms/step): "
          + "; ".join(f"{label(k)} {sweep[k]:.2f}" for k in sorted(measured, key=label) if k in sweep) + ".")


def clock_check(out, check="clock-check"):
    """scripts/plan-clock-check (its runs under OUT/CHECK): the planner's plan and the sweep's fastest, both
    by sparq train --plan in the same rounds on the clock, the default flags and the sweep's fastest fp32 plan."""
    settings = sorted((out / check).glob("*/planner_r1.jsonl"), key=lambda f: (int(f.parent.name[1:].split("-")[0]),
                                                                                       f.parent.name))
    if not settings:
        return
    with_fp32 = all(any(f.parent.glob("fp32_r*.jsonl")) for f in settings)  # older checks ran without it
    print("\n| setting | rounds | the planner's plan, ms/step | the sweep's fastest | the default flags "
          + ("| the fastest fp32 plan " if with_fp32 else "") + "| planner / fastest (median of the rounds' ratios) "
          "| defaults / planner |" + (" fastest fp32 / planner |" if with_fp32 else ""))
    print("|---" * (9 if with_fp32 else 7) + "|")
    for first in settings:
        d = first.parent
        ms = {k: [measured_ms(f, "modeled_ms_per_it") for f in sorted(d.glob(f"{k}_r*.jsonl"))]
              for k in ("planner", "fastest", "defaults", "fp32")}
        med = {k: statistics.median(v) for k, v in ms.items() if v}
        cell = lambda k: f"{med[k]:.2f} <sub>{', '.join(f'{x:.2f}' for x in ms[k])}</sub>" if k in med else "not run (memory)"
        paired = lambda a, b: statistics.median(x / y for x, y in zip(ms[a], ms[b]))
        vs = f"{paired('defaults', 'planner'):.2f}x" if "defaults" in med else "-"
        print(f"| {d.name} | {len(ms['planner'])} | {cell('planner')} | {cell('fastest')} | {cell('defaults')} "
              + (f"| {cell('fp32')} " if with_fp32 else "") + f"| {paired('planner', 'fastest'):.3f} | {vs} |"
              + (f" {paired('fp32', 'planner'):.2f}x |" if with_fp32 else ""))


def accuracy(out):
    """scripts/plan-accuracy: the plan's test loss against the same runs without codecs, paired by seed, on
    each of the DP/MP maps' data sets and over all of them: the final test's, and the mean of the last three
    tests' (steadier); one epoch at the default rate (accuracy-1epoch), and three with the rate decayed; then
    each codec alone (accuracy-codecs, plan-accuracy's CODEC runs: the planner's evidence set by set)."""
    for runs in (out / "accuracy-1epoch", out / "accuracy", out / "accuracy-replan", out / "accuracy-byset",
                 out / "accuracy-cores", out / "accuracy-trial"):
        if (runs / "plan.json").exists():
            flags = flag_text(json.loads((runs / "plan.json").read_text())["flags"])
            accuracy_table(runs, "plan", f"The plan `{flags}`")
    codecs = out / "accuracy-codecs"
    for name in sorted({f.stem.split("_")[2] for f in codecs.glob("*_s*.jsonl")} - {"fp32", "fp32-replicated"}):
        config = next(load(f)[0]["flags"] for f in codecs.glob(f"*_{name}_s*.jsonl"))
        flags = " ".join(f"--{k} {config[k]}" for k in ("dp-codec", "dp-allreduce", "emb-codec-fwd", "emb-codec-bwd")
                         if config[k] not in ("none", "auto", "fp32"))
        replicated = config["emb-placement"] == "replicated"
        accuracy_table(codecs, name, f"`{flags}` alone ({name})", "fp32-replicated" if replicated else "fp32")
    # No codec at all, the tables replicated: the same model as table-wise fp32's, its sums in another order.
    accuracy_table(codecs, "fp32-replicated", "fp32 with replicated tables (no codec: the sums in another order)")


def accuracy_table(runs, name, what, base="fp32"):
    """The runs NAME in RUNS against the same sets' and seeds' runs BASE there (see accuracy)."""
    dp = importlib.util.spec_from_file_location("summarize_dp", pathlib.Path(__file__).parent / "summarize-dp.py")
    t975 = importlib.util.module_from_spec(dp)
    dp.loader.exec_module(t975)

    def tests(f):  # the test losses of a run that ended, else None
        events = load(f) if f.exists() else []
        losses = [e["loss"] for e in events if e["event"] == "test"]
        return losses if losses and any(e["event"] == "summary" for e in events) else None

    def cell(xs):
        m = statistics.fmean(xs)
        half = t975.T975[len(xs) - 1] * statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0
        return f"{m:+.3f} % [{m - half:+.3f}, {m + half:+.3f}] | {', '.join(f'{x:+.3f}' for x in xs)}"

    changes = {}  # data set -> [(final, last three)]
    for f in sorted(runs.glob(f"*_{name}_s*.jsonl")):
        data, seed = re.fullmatch(rf"(.+)_{re.escape(name)}_s(\d+)", f.stem).groups()
        ours, theirs = tests(f), tests(runs / f"{data}_{base}_s{seed}.jsonl")
        if ours and theirs:
            last3 = statistics.fmean(ours[-3:]) / statistics.fmean(theirs[-3:])
            changes.setdefault(data, []).append((100 * (ours[-1] / theirs[-1] - 1), 100 * (last3 - 1)))
    if not changes:
        return
    config = load(next(runs.glob(f"*_{base}_s*.jsonl")))[0]["flags"]
    protocol = ("one epoch" if config["nepochs"] == 1 else
                f"{config['nepochs']} epochs, the rate decayed from step {config['lr-decay-start-step']}")
    print(f"\n{what} against {config['emb-placement']} fp32, test loss change after {protocol} ({runs.name}), "
          "paired by seed:")
    print("\n| data set | seeds | final test: mean [95 % interval] | per seed "
          "| last three tests: mean [95 % interval] | per seed |")
    print("|---|---|---|---|---|---|")
    for set_name, pairs in list(changes.items()) + [("all sets", [p for ps in changes.values() for p in ps])]:
        print(f"| {set_name} | {len(pairs)} | {cell([p[0] for p in pairs])} | {cell([p[1] for p in pairs])} |")


def measure(out):
    """scripts/plan-cluster-measure: the plan for the network the hosts measured, beside the plan for the
    network fitted to stored benchmarks and the default flags, trained in interleaved rounds."""
    runs = out / "cluster4-measure"
    if not runs.is_dir():
        return
    log = (runs / "plan.log").read_text()
    net = re.search(r"^measured network: (\S+)", log, re.M).group(1)
    secs = re.search(r"planned in ([\d.]+) s", log).group(1)
    fitted = json.loads((runs / "fitted.plan.json").read_text())  # the plan file the rounds trained
    plans = {"measured": (json.loads((runs / "plan.json").read_text()), f"{net}, measured by the hosts"),
             "fitted": (fitted, f"{fitted['net']}, fit-net.py and stack-cpu.py"), "defaults": (None, "-")}
    ms = {kind: [measured_ms(f) for f in sorted(runs.glob(f"{kind}_r*.jsonl"))] for kind in plans}
    med = {k: statistics.median(v) for k, v in ms.items()}
    print(f"\nsparq plan --measure on the cluster: planned in {secs} s; sparq train --plan, {len(ms['measured'])} "
          "interleaved rounds:\n")
    print("| plan | network planned for | ms/step, round by round | median | vs the default flags |")
    print("|---|---|---|---|---|")
    for kind, (plan, where) in plans.items():
        label = "the default flags" if plan is None else flag_text(plan["flags"])
        print(f"| {label} | {where} | {', '.join(f'{x:.2f}' for x in ms[kind])} | {med[kind]:.2f} | "
              f"{med['defaults'] / med[kind]:.2f}x |")


def unshaped(out):
    """scripts/plan-cluster-unshaped: the planner's plan for the unshaped cluster's measured network against
    every admitted plan of its space measured there (the sweep, 2 rounds), and its check rounds (the plan, the
    sweep's fastest and the default flags, interleaved)."""
    d = out / "cluster4-none"
    if not (d / "check").is_dir():
        return
    net = re.search(r"^measured network: (\S+)", (d / "planner.log").read_text(), re.M).group(1)
    chosen = json.loads((d / "planner.plan.json").read_text())["flags"]
    measured = measured_by_flags(d / "runs")
    rows = [(p, statistics.median(measured[plan_key(p["flags"])])) for p in admitted_runs(d / "sweep.jsonl")
            if measured.get(plan_key(p["flags"]))]
    mine = next((p, ms) for p, ms in rows if plan_key(p["flags"]) == plan_key(chosen))
    best = min(rows, key=lambda r: r[1])
    best_fp32 = min((r for r in rows if fp32(r[0])), key=lambda r: r[1])
    errors = [p["modelled_ms_per_step"] / ms for p, ms in rows]
    print("\n| network (measured) | plans measured | the planner's plan | in the sweep, ms/step | the sweep's fastest "
          "| ms/step | planner / fastest | the fastest fp32 plan | ms/step | vs it | Spearman, modelled and measured "
          "| modelled within 15 % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {net} | {len(rows)} | {mine[0]['label']}, {chosen['threads']} thread{'' if chosen['threads'] == '1' else 's'} a rank | {mine[1]:.2f} | "
          f"{best[0]['label']} | {best[1]:.2f} | {mine[1] / best[1]:.3f} | {best_fp32[0]['label']} | {best_fp32[1]:.2f} | "
          f"{best_fp32[1] / mine[1]:.2f}x | "
          f"{spearman([p['modelled_ms_per_step'] for p, _ in rows], [ms for _, ms in rows]):.3f} | "
          f"{sum(abs(e - 1) <= 0.15 for e in errors)} of {len(rows)} |")
    ms = {k: [measured_ms(f) for f in sorted((d / "check").glob(f"{k}_r*.jsonl"))] for k in ("planner", "fastest", "defaults")}
    med = {k: statistics.median(v) for k, v in ms.items()}
    print(f"\n| check, {len(ms['planner'])} interleaved rounds | ms/step, round by round | median | the plan against it |")
    print("|---|---|---|---|")
    for k, what in (("planner", "sparq train --plan (the planner's plan)"), ("fastest", "the sweep's fastest plan"),
                    ("defaults", "the default flags")):
        print(f"| {what} | {', '.join(f'{x:.2f}' for x in ms[k])} | {med[k]:.2f} | {med[k] / med['planner']:.3f}x |")


def budget(out):
    """scripts/plan-budget-check: the cluster's plan at each accuracy budget, and each trained on the cluster
    beside the default flags in interleaved rounds."""
    d = out / "budget"
    if not d.is_dir():
        return
    budgets = sorted(f.name[len("budget"):-len(".plan.json")] for f in d.glob("budget*.plan.json"))
    defaults = [measured_ms(f) for f in sorted(d.glob("defaults_r*.jsonl"))]
    print(f"\n| budget | plans (admitted) | planning s | the plan | expected change | modelled ms/step "
          f"| on the cluster, {len(defaults)} rounds | median | vs the default flags |")
    print("|---|---|---|---|---|---|---|---|---|")
    for b in budgets:
        plans = [p for p in load(d / f"budget{b}.jsonl") if not p.get("refined")]
        plan = json.loads((d / f"budget{b}.plan.json").read_text())
        chosen = next(p for p in plans if plan_key(p["flags"]) == plan_key(plan["flags"]))
        secs = re.search(r"planned in ([\d.]+) s", (d / f"budget{b}.log").read_text()).group(1)
        ms = [measured_ms(f) for f in sorted(d.glob(f"budget{b}_r*.jsonl"))]
        threads = plan["flags"]["threads"]
        print(f"| +{b} % | {len(plans)} ({sum(p['admitted'] for p in plans)}) | {secs} | {chosen['label']}, "
              f"{threads} thread{'' if threads == '1' else 's'} a rank | {chosen['expected_change']:+.3f} % "
              f"| {plan['modelled_ms_per_step']:.2f} | {', '.join(f'{x:.2f}' for x in ms)} | {statistics.median(ms):.2f} "
              f"| {statistics.median(x / y for x, y in zip(defaults, ms)):.2f}x |")
    print(f"| the default flags | - | - | - | - | - | {', '.join(f'{x:.2f}' for x in defaults)} "
          f"| {statistics.median(defaults):.2f} | 1.00x |")


def ab_runs(folder):
    """An A/B's runs (runs*.txt of FOLDER, its provenance.txt says how): {plan: {variant: [ms/step]}}, each
    line 'ROUND PLAN VARIANT... MS [rss=BYTES]'."""
    runs = {}
    for f in sorted(folder.glob("runs*.txt")):
        for line in f.read_text().splitlines():
            words = [w for w in line.split() if not w.startswith("rss=")]
            runs.setdefault(words[1], {}).setdefault(" ".join(words[2:-1]), []).append(float(words[-1]))
    return runs


def ab(folder, variants):
    """Each plan's steps by variant (VARIANTS: [(its key in the runs, its column)], the first the base):
    the runs in turn, their median and its ratio to the base's."""
    if not folder.is_dir():
        return
    print("\n| plan | " + " | ".join(name for _, name in variants) + " |")
    print("|---|" + "---|" * len(variants))
    for plan, by in ab_runs(folder).items():
        base = statistics.median(by[variants[0][0]])
        cells = [f"{', '.join(f'{x:.1f}' for x in by[v])} (median {statistics.median(by[v]):.1f}, "
                 f"{statistics.median(by[v]) / base:.2f}x)" if v in by else "-" for v, _ in variants]
        print(f"| {plan} | " + " | ".join(cells) + " |")


def transport_abs(out):
    """How long an MPI wait spins before it sleeps (docs/data/plan/spin-ab), and Open MPI's TCP eager
    limit (docs/data/plan/eager-ab)."""
    ab(out / "spin-ab", [("spin=100 sleep=50", "100 us, then 50 us sleeps"), ("spin=5000 sleep=50", "5 ms, then 50 us sleeps"),
                         ("spin=1000 sleep=50", "1 ms, then 50 us sleeps"), ("spin=100 sleep=-1", "100 us, then yields"),
                         ("spin=100 sleep=1000", "100 us, then 1 ms sleeps")])
    ab(out / "eager-ab", [("eager=0", "64 KiB (Open MPI's)"), ("eager=1048576", "1 MiB"), ("eager=4194304", "4 MiB"),
                          ("eager=4194304+buf8MiB", "4 MiB, 8 MiB socket buffers"), ("built-in", "sparq's own (4 MiB)"),
                          ("eager=65536", "64 KiB by --mca")])


def plan_evidence():
    """scripts/plan-evidence.py as a module (its seeds(): a run's final test loss by seed)."""
    spec = importlib.util.spec_from_file_location("plan_evidence", pathlib.Path(__file__).parent / "plan-evidence.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def emb_bf16_ab(out):
    """The replicated tables' gradients in fp32 and bf16, one plan's flags otherwise, and the default flags
    (docs/data/plan/emb-bf16-ab, scripts/plan-cluster-ab), with the round-by-round ratios; then sparq plan
    --trial with them in its space (cluster4-trial-bf16) and its plan in check rounds."""
    runs = out / "emb-bf16-ab"
    if not runs.is_dir():
        return
    ab(runs, [("fp32-grads", "fp32 gradients"), ("bf16-grads", "bf16 gradients"), ("defaults", "the default flags")])
    sent = {v: int(re.search(r"^ *emb_grad +(\d+)", (runs / f"{v}_r1.log").read_text(), re.M)[1])
            for v in ("fp32-grads", "bf16-grads")}
    print(f"\nRank 0's emb_grad bytes a step (round 1's accounting): {sent['fp32-grads']} in fp32, "
          f"{sent['bf16-grads']} in bf16 ({sent['bf16-grads'] / sent['fp32-grads']:.2f}x).")
    acc, seeds = out / "accuracy-codecs", plan_evidence().seeds
    first3 = {d: statistics.fmean(100 * (r[s] / b[s] - 1) for s in (1, 2, 3))
              for d in ("z1.0_a0.75", "z1.0_a0.85", "z1.3_a0.75", "z1.3_a0.85")
              for b, r in [(seeds(acc, f"{d}_fp32-replicated"), seeds(acc, f"{d}_embbf16"))]}
    worst = max(first3, key=first3.get)
    print(f"\nThe bf16 gradients' first three seeds alone: the worst set {worst} at {first3[worst]:+.3f} %.")
    by = next(iter(ab_runs(runs).values()))
    pairs = list(zip(by["fp32-grads"], by["bf16-grads"], by["defaults"]))
    print(f"\nRound by round, bf16 against fp32 gradients: {', '.join(f'{b / f:.2f}x' for f, b, _ in pairs)} "
          f"(median {statistics.median(b / f for f, b, _ in pairs):.2f}x); the defaults against the bf16 plan: "
          f"{', '.join(f'{d / b:.2f}x' for _, b, d in pairs)} (median {statistics.median(d / b for _, b, d in pairs):.2f}x).")
    if (out / "cluster4-trial-bf16").is_dir():
        trial_tables(out / "cluster4-trial-bf16")
        for runs, when in (("cluster4-check-bf16-200", ""), ("cluster4-check-bf16-200-again", ", the next 5 rounds")):
            check_rounds(out / runs, out / "cluster4-sweep-units",
                         f" (sparq plan --trial, the bf16 gradients in its space: cluster4-trial-bf16{when}), "
                         "200 steps a run")


def planning_time(out):
    """sparq plan at 8 ranks, timed: with the bf16 gradients in its first pass (planning-time-bf16), as a
    leader's variant (planning-time-memo/deferred-*), and with the Memo too (planning-time-memo/memo-*); then
    the CPU's shares in the profiles of the deferred search before and after the Memo."""
    folder = out / "planning-time-memo"
    if not folder.is_dir():
        return
    logs = [(f"bf16 gradients in the first pass, 8 ranks, {net}", out / "planning-time-bf16" / f"p8-{net}.log")
            for net in ("10gbit", "25gbit")]
    logs += [(f"{what}, 8 ranks, {net}", folder / f"{stem}-p8-{net}.log")
             for stem, what in (("deferred", "bf16 gradients a leader's variant"), ("memo", "and the Memo"))
             for net in ("10gbit", "25gbit")]
    logs += [(f"and the Memo, {p} ranks, 10gbit", folder / f"memo-p{p}-10gbit.log") for p in (32, 128)]
    print("| sparq plan | plans run: first pass | longer runs | planned in, s | chosen |")
    print("|---|---|---|---|---|")
    for what, log in logs:
        text = log.read_text()
        first = len(re.findall(r"^ +\d+  ", text, re.M))
        longer = len(re.findall(r"^ +\d+\* ", text, re.M))
        chosen = re.search(r"^chosen: (.*) — .*planned in ([\d.]+) s", text, re.M)
        print(f"| {what} | {first} | {longer} | {chosen[2]} | {chosen[1]} |")
    for name in ("perf-before", "perf-memo"):
        shares = re.findall(r"^ ([\d.]+)% \S+ \[.\] (\S+)", (folder / f"{name}.txt").read_text(), re.M)
        jit = re.search(r"^ ([\d.]+)% \[JIT\]", (folder / f"{name}.txt").read_text(), re.M)[1]
        print(f"\n{name}.txt: {', '.join(f'{float(x):.1f} % {sym}' for x, sym in shares[:6])}; JIT code {float(jit):.1f} %.")


def refit_searches(out):
    """sparq plan search by search: the fastest longer run of each placement and what it chose, with the
    kernel costs of each shape's first 64 calls (the stored 8-rank searches of deferred-check and
    planning-time-memo, build 9b0b83c and before) and fixed anew from the first pass (refit/, KernelCosts::refit)."""
    folder = out / "refit"
    if not folder.is_dir():
        return
    print("| ranks, network | kernel costs for the longer runs | search | fastest replicated, ms/step | fastest "
          "table-wise | table-wise / replicated | chosen | planned in, s |")
    print("|---|---|---|---|---|---|---|---|")
    for p, net in ((8, "10gbit"), (8, "25gbit"), (32, "10gbit"), (32, "25gbit")):
        old = [] if p != 8 else ([out / "deferred-check" / f"p8-{net}_{m}.log" for m in ("pruned", "exhaustive")]
                                 + [out / "planning-time-memo" / f"{stem}-p8-{net}.log" for stem in ("deferred", "memo")])
        for costs, logs in (("first 64 calls", old), ("the first pass's calls", sorted(folder.glob(f"p{p}-{net}_r*.log")))):
            for log in logs:
                text = log.read_text()
                best = {}
                for label, ms in re.findall(r"^ +\d+\* (\S.*?\S) {2,}([\d.]+) ", text, re.M):
                    placement = "table-wise" if "table-wise" in label else "replicated"
                    best[placement] = min(best.get(placement, float("inf")), float(ms))
                chosen = re.search(r"^chosen: (.*) — .*planned in ([\d.]+) s", text, re.M)
                cell = lambda k: f"{best[k]:.2f}" if k in best else "no leader"
                ratio = f"{best['table-wise'] / best['replicated']:.3f}" if len(best) == 2 else "-"
                print(f"| {p}, {net} | {costs} | {log.parent.name}/{log.name} | {cell('replicated')} | "
                      f"{cell('table-wise')} | {ratio} | {chosen[1]} | {chosen[2]} |")


def mlp_bf16_evidence(out):
    """bf16 MLPs against fp32 MLPs, the final test loss seed by seed: data/synth (seeds 1-3 on the 4-host
    cluster, docs/data/time; 4-5 on in-process ranks, accuracy-mlp-bf16) and each of the DP/MP maps' four
    sets (accuracy-codecs, 3 epochs); and seed 1 on in-process ranks against the cluster's run."""
    more = out / "accuracy-mlp-bf16"
    if not more.is_dir():
        return
    pe, time, acc = plan_evidence(), out.parent / "time", out / "accuracy-codecs"
    sets = [("data/synth, one epoch", {**pe.seeds(more, "synth_fp32-mlps"), **pe.seeds(time / "1gbit", "fp32-tablewise")},
             {**pe.seeds(more, "synth_bf16-mlps"), **pe.seeds(time / "1gbit-bf16", "fp32-tablewise")})]
    sets += [(f"map set {d}, 3 epochs", pe.seeds(acc, f"{d}_fp32"), pe.seeds(acc, f"{d}_mlpbf16"))
             for d in ("z1.0_a0.75", "z1.0_a0.85", "z1.3_a0.75", "z1.3_a0.85")]
    print("| data | seeds | bf16 MLPs against fp32 MLPs, final test loss, seed by seed | mean |")
    print("|---|---|---|---|")
    for what, base, runs in sets:
        got = pe.changes(base, runs)
        print(f"| {what} | {len(got)} | {', '.join(f'{x:+.3f} %' for x in got)} | {statistics.fmean(got):+.3f} % |")
    cluster = pe.seeds(time / "1gbit-bf16", "fp32-tablewise")[1]
    here = pe.seeds(more, "synth_bf16-mlps")[1]
    print(f"\nSeed 1 with bf16 MLPs, final test loss: {cluster!r} on the cluster, {here!r} on in-process ranks"
          f"{' (the same bits)' if cluster == here else ''}.")


def resweeps(out):
    for name, what, rounds in (("cluster4-spin5ms", "With the 5 ms spin", "rounds"),
                               ("cluster4-eager", "With the 5 ms spin and 4 MiB eager", "rounds-eager")):
        resweep(out, name, what, out / "models" / rounds)
    refit = out / "net-eager" / "net_cluster4"
    if refit.exists():
        before = out.parent / "emulation" / "fidelity" / "net_cluster4"
        print(f"\nThe cluster's network fitted again on this build (scripts/fit-net.py over net-eager's benchmarks, the "
              f"stack's CPU as before): {refit.read_text().strip()}, against {before.read_text().strip()}.")


def resweep(out, name, what, model_rounds):
    """The cluster sweep again on a later build (docs/data/plan/NAME, 4 rounds): the cluster against
    itself, and the clock's models (the exhaustive run's and scripts/plan-model-rounds') against it."""
    runs = out / name
    if not runs.is_dir():
        return
    measured = measured_by_flags(runs)
    half = [(statistics.median(v[:2]), statistics.median(v[2:])) for v in measured.values() if len(v) == 4]
    if not half:
        return
    print(f"\n{what}, {len(measured)} plans, {min(map(len, measured.values()))} rounds each: rounds 1-2 "
          f"against rounds 3-4, Spearman {spearman([a for a, _ in half], [b for _, b in half]):.3f}, ratio "
          f"{min(a / b for a, b in half):.2f}-{max(a / b for a, b in half):.2f}.")
    old = measured_by_flags(out / "cluster4")
    r = [statistics.median(measured[k]) / statistics.median(old[k]) for k in measured if k in old]
    print(f"Against the first sweep (100 us spin, 64 KiB eager; another hour): new/old {statistics.median(r):.3f} "
          f"(median of {len(r)} plans; {min(r):.2f}-{max(r):.2f}).")
    meas = {k: statistics.median(v) for k, v in measured.items()}
    sweep = {plan_key(p["flags"]): p for p in admitted_runs(out / "cluster4-1gbit_exhaustive.jsonl")}
    models = [(f"one core a host at half speed, the exhaustive run ({planned_net(out / 'cluster4-1gbit_exhaustive.log')})",
               [sweep])]
    for name, what in (("hostcores1", "one core a host at half speed"), ("shared2", "2 cores shared at full speed")):
        logs = sorted(model_rounds.glob(f"{name}_r*.log"))
        if logs:
            what = f"{what}, {len(logs)} rounds' median (models/{model_rounds.name}, {planned_net(logs[0])})"
            models.append((what, [{plan_key(p["flags"]): p for p in load(f)}
                              for f in sorted(model_rounds.glob(f"{name}_r*.jsonl"))]))
    print("\n| the clock's model | Spearman, modelled and measured | modelled / measured | within 15 % "
          "| hybrid plans | the rest |")
    print("|---|---|---|---|---|---|")
    for what, rounds in models:
        mod = median_modelled(rounds, meas)
        keys = list(mod)
        e = {k: mod[k] / meas[k] for k in keys}
        hyb = [e[k] for k in keys if rounds[0][k]["flags"].get("mp-splits")]
        rest = [e[k] for k in keys if not rounds[0][k]["flags"].get("mp-splits")]
        print(f"| {what} | {spearman([mod[k] for k in keys], [meas[k] for k in keys]):.3f} "
              f"| {min(e.values()):.2f}-{max(e.values()):.2f} | {sum(abs(x - 1) <= 0.15 for x in e.values())} of {len(keys)} "
              f"| {min(hyb):.2f}-{max(hyb):.2f} | {min(rest):.2f}-{max(rest):.2f} |")
    what, rounds = models[-1]
    fused_against_unfused(meas, median_modelled(rounds, meas), what, rounds[0])


def replanned(out):
    """The plan made again for today's transport (cluster4-eager-1gbit: the eager fit, 2 cores shared) in
    the eager sweep's measured steps, and that planner run's exhaustive sweep as a model of them."""
    runs, name = out / "cluster4-eager", "cluster4-eager-1gbit"
    if not (out / f"{name}_pruned.plan.json").exists() or not runs.is_dir():
        return
    measured = measured_by_flags(runs)
    meas = {k: statistics.median(v) for k, v in measured.items()}
    chosen = plan_key(json.loads((out / f"{name}_pruned.plan.json").read_text())["flags"], ("threads",))
    mine = next(ms for k, ms in meas.items() if plan_key(json.loads(k), ("threads",)) == chosen)
    best = min(meas, key=meas.get)
    defaults = statistics.median(measured_ms(f) for f in sorted(runs.glob("defaults_r*.jsonl")))
    sweep = {plan_key(p["flags"]): p["modelled_ms_per_step"] for p in admitted_runs(out / f"{name}_exhaustive.jsonl")}
    keys = [k for k in meas if k in sweep]
    e = [sweep[k] / meas[k] for k in keys]
    print(f"\nThe plan made again ({name}) in the eager sweep ({min(map(len, measured.values()))} "
          f"rounds, median): {mine:.2f} ms/step, {mine / meas[best]:.3f}x the fastest measured plan "
          f"({flag_text(json.loads(best), ('threads',))}, {meas[best]:.2f}); the default flags (--threads 2) "
          f"{defaults:.2f}: {defaults / mine:.2f}x the plan's. Its exhaustive run against the same {len(keys)} "
          f"plans: Spearman {spearman([sweep[k] for k in keys], [meas[k] for k in keys]):.3f}, modelled/measured "
          f"{min(e):.2f}-{max(e):.2f}, {sum(abs(x - 1) <= 0.15 for x in e)} of {len(keys)} within 15 %.")


def planned_net(log):
    """The network a sparq plan run planned for (its log's first line)."""
    return re.search(r" ranks on (\S+),", log.read_text()).group(1)


def median_modelled(rounds, measured):
    """{plan: its modelled step, the median over ROUNDS ({plan: JSON line} each)} for the plans measured and in
    every round."""
    return {k: statistics.median(x[k]["modelled_ms_per_step"] for x in rounds)
            for k in measured if all(k in x for x in rounds)}


def fused_against_unfused(meas, mod, what, labels):
    """Fusion by 4 MiB against none, plan by plan (the data-parallel plans with a --dp-codec), measured and on
    the clock (MOD: a model's steps; LABELS: its JSON lines)."""
    pairs = fusion_pairs(mod)
    m = [meas[b] / meas[a] for a, b in pairs]
    c = [mod[b] / mod[a] for a, b in pairs]
    a, b = pairs[0]
    print(f"Fused by 4 MiB against unfused, the {len(pairs)} data-parallel plans with a --dp-codec: measured "
          f"{min(m):.2f}-{max(m):.2f} (median {statistics.median(m):.2f}), on the clock ({what}) {min(c):.2f}-{max(c):.2f} "
          f"(median {statistics.median(c):.2f}); e.g. {labels[a]['label']}: measured {meas[a]:.2f}, fused "
          f"{meas[b]:.2f}; modelled {mod[a]:.2f}, {mod[b]:.2f}.")


def clock_variants(out):
    """The shared-cores model against the eager sweep, as run (models/rounds-eager, models/rounds-steps32)
    and with the costs tried and not kept (models/tried-eager and models/tried-delay, their provenance.txt):
    each variant's rounds against each other, their median against the cluster, and fusion's effect on the
    clock."""
    runs = out / "cluster4-eager"
    if not (out / "models" / "tried-eager").is_dir() or not runs.is_dir():
        return
    meas = measured_medians(runs)
    variants = [("rounds-eager", "shared2", "as built, 8 steps a plan (the planner's)"),
                ("rounds-steps32", "shared2", "as built, 32 steps a plan"),
                ("rounds-steps32-msg10us", "shared2", "32 steps, 10 us of CPU a message (the communication thread's "
                 "on the cluster) instead of 4.30"),
                ("tried-eager", "job130us-steps32", "32 steps, + 130 us of CPU a job of the communication thread"),
                ("rounds-steps32-coll130us", "shared2", "32 steps, the network's CPU a collective at 130 us "
                 "(--net ...,4.30us,130us, the fifth field's earlier CPU form), an hour later"),
                ("rounds-steps32-coll130us", "base", "as built, 32 steps, right after it"),
                ("rounds-steps32-coll-ab", "coll-shared2", "32 steps, CPU a collective 130 us, rounds interleaved with the next, "
                 "a quiet hour"),
                ("rounds-steps32-coll-ab", "base-shared2", "as built, 32 steps, interleaved with it"),
                ("rounds-steps32-latency", "lat100-shared2", "32 steps, a latency of 100 us a message, rounds "
                 "interleaved with the 300 us and the as-built rounds"),
                ("rounds-steps32-latency", "lat200-shared2", "32 steps, a latency of 200 us a message, right after"),
                ("rounds-steps32-latency", "lat300-shared2", "32 steps, a latency of 300 us a message"),
                ("rounds-steps32-latency", "base-shared2", "as built, 32 steps, interleaved with them"),
                ("tried-delay", "delay300us-shared2", "32 steps, + 300 us a job of the communication thread "
                 "before its end, no core busy"),
                ("tried-delay", "none-shared2", "as built, 32 steps, interleaved with it"),
                ("rounds-steps32-coll-latency", "lat-shared2", "32 steps, the latency a collective (`--net` "
                 "...,4.30us,370us: what fusion saves on the cluster an allreduce), rounds interleaved with the next"),
                ("rounds-steps32-coll-latency", "base-shared2", "32 steps, no latency a collective, interleaved with it"),
                ("tried-eager", "none", "as built, 8 steps"),
                ("tried-eager", "handoff500us", "+ 0.5 ms a hand-off"),
                ("tried-eager", "handoff1000us", "+ 1 ms a hand-off"),
                ("tried-eager", "handoff2000us", "+ 2 ms a hand-off"),
                ("tried-eager", "spin1000us", "+ a wait's first 1 ms on a core"),
                ("tried-eager", "spin5000us", "+ a wait's first 5 ms on a core"),
                ("tried-eager", "none-ciload", "as built, 8 steps, beside CI"),
                ("tried-eager", "commfirst-ciload", "+ the communication thread first, beside CI"),
                ("tried-eager", "spin200us-ciload", "+ a wait's first 0.2 ms on a core, beside CI"),
                ("tried-eager", "spin500us-ciload", "+ a wait's first 0.5 ms on a core, beside CI"),
                ("tried-eager", "spin5000usx0.03-ciload", "+ 3 % of a wait's first 5 ms on a core, beside CI"),
                ("tried-eager", "spin5000usx0.1-ciload", "+ 10 % of a wait's first 5 ms on a core, beside CI")]
    print("\n| the clock (2 cores shared) | folder | rounds | rounds against each other (Spearman) "
          "| Spearman, modelled and measured | within 15 % | fused 4 MiB / unfused, median |")
    print("|---|---|---|---|---|---|---|")
    for folder, name, what in variants:
        files = sorted((out / "models" / folder).glob(f"{name}_r*.jsonl"))
        if not files:
            continue
        rounds = [{plan_key(p["flags"]): p for p in load(f)} for f in files]
        mod = median_modelled(rounds, meas)
        keys = list(mod)
        pairs = [spearman([a[k]["modelled_ms_per_step"] for k in keys], [b[k]["modelled_ms_per_step"] for k in keys])
                 for i, a in enumerate(rounds) for b in rounds[i + 1:]]
        e = [mod[k] / meas[k] for k in keys]
        print(f"| {what} | {folder} | {len(rounds)} | {f'{min(pairs):.3f}-{max(pairs):.3f}' if pairs else '-'} "
              f"| {spearman([mod[k] for k in keys], [meas[k] for k in keys]):.3f} "
              f"| {sum(abs(x - 1) <= 0.15 for x in e)} of {len(keys)} "
              f"| {statistics.median(mod[b] / mod[a] for a, b in fusion_pairs(mod)):.2f} |")


def unfused_by_collective(out):
    """The latency rounds (models/rounds-steps32-latency): modelled / measured of the unfused data-parallel
    plans with a dense codec, by the collective their dense gradients take, as built and at 300 us a message."""
    folder, runs = out / "models" / "rounds-steps32-latency", out / "cluster4-eager"
    if not folder.is_dir() or not runs.is_dir():
        return
    meas = measured_medians(runs)
    kinds = {"DCT-DP": lambda f: f["dp-codec"].startswith("dct"), "q4 on the ring": lambda f: f["dp-allreduce"] == "ring",
             "q4 by recursive doubling": lambda f: f["dp-allreduce"] == "recursive-doubling"}
    unfused = [k for k in meas if (f := json.loads(k))["fuse-bytes"] == "0" and not f.get("mp-splits")
               and f["dp-codec"] != "none"]
    models = [median_modelled([{plan_key(p["flags"]): p for p in load(f)} for f in sorted(folder.glob(f"{name}_r*.jsonl"))],
                              meas) for name in ("base-shared2", "lat300-shared2")]
    parts = []
    for kind, test in kinds.items():
        cells = []
        for mod in models:
            e = [mod[k] / meas[k] for k in unfused if k in mod and test(json.loads(k))]
            cells.append(f"{min(e):.2f}-{max(e):.2f}")
        parts.append(f"{kind} {cells[0]} as built, {cells[1]} at 300 us")
    print(f"\nUnfused data-parallel plans, modelled / measured (models/rounds-steps32-latency): {'; '.join(parts)}.")


def fusion_pairs(plans):
    """(unfused, fused by 4 MiB) of each data-parallel plan with a --dp-codec among PLANS (plan keys)."""
    by = {}
    for k in plans:
        f = json.loads(k)
        if not f.get("mp-splits") and f["dp-codec"] != "none":
            by.setdefault(plan_key({**f, "fuse-bytes": "0"}), {})[f["fuse-bytes"]] = k
    return [(v["0"], v["4MiB"]) for v in by.values() if "0" in v and "4MiB" in v]


def thread_cpu(out):
    """scripts/cluster-thread-cpu: each thread kind's CPU time a step and rank on the cluster, a plan unfused
    and fused, its dense allreduce on the ring (thread-cpu/) and by recursive doubling (thread-cpu-rd/),
    beside the runs' step; then what the communication thread pays a message and an allreduce."""
    # Unfused, each of the model's 14 dense views (7 layers' weights and biases) is an allreduce of its own,
    # fused by 4 MiB all are one: 13 more a step. On 4 ranks the ring takes 2 (4 - 1) = 6 hops, recursive
    # doubling 2; a message sent and one received a hop and rank.
    extra = {}  # algorithm: (more messages sent and received, more comm CPU ms) a step and rank
    for folder, algo, hops in (("thread-cpu", "ring", 6), ("thread-cpu-rd", "recursive doubling", 2)):
        path = out / folder / "runs.jsonl"
        if not path.exists():
            continue
        comm_ms = {}
        print(f"\n| plan ({algo}) | round | ms/it (median of the prints after the first) | CPU ms a step and rank: "
              "training thread (its start-up included) | communication thread | the rest |")
        print("|---|---|---|---|---|---|")
        for (plan, rnd), threads in sorted(runs_by_plan_round(path).items(), key=lambda kv: (kv[0][1], kv[0][0] != "unfused")):
            steps = 10 * len(threads[0]["ms_per_it"])
            ranks = len({t["pid"] for t in threads})
            cpu = lambda pick: 1e3 * sum(t["cpu_s"] for t in threads if pick(t)) / steps / ranks
            main = lambda t: t["tid"] == t["pid"]
            comm = lambda t: t["thread"] == "sparq-comm"
            print(f"| {plan} | {rnd} | {statistics.median(threads[0]['ms_per_it'][1:]):.1f} | {cpu(main):.1f} "
                  f"| {cpu(comm):.1f} | {cpu(lambda t: not main(t) and not comm(t)):.1f} |")
            comm_ms.setdefault(plan, []).append(cpu(comm))
        u, f = statistics.median(comm_ms["unfused"]), statistics.median(comm_ms["fused4MiB"])
        extra[algo] = (2 * 13 * hops, u - f)
        print(f"\nThe communication thread's CPU a step and rank ({algo}), median of the rounds: unfused {u:.2f} ms, "
              f"fused {f:.2f} ms; the difference over the {extra[algo][0]} more messages sent and received: "
              f"{1e3 * (u - f) / extra[algo][0]:.1f} us a message and side.")
    if len(extra) == 2:
        (m1, d1), (m2, d2) = extra["ring"], extra["recursive doubling"]
        per_msg = (d1 - d2) / (m1 - m2)
        print(f"Both as a cost a message and side and one an allreduce: {1e3 * per_msg:.1f} us a message, "
              f"{1e3 * (d2 - m2 * per_msg) / 13:.0f} us an allreduce.")


COLL_PLANS = ("ring-unfused", "ring-fused4MiB", "rd-unfused", "rd-fused4MiB")


def coll_latency_fit(folder):
    """scripts/coll-latency-runs: ({plan: cluster's median ms/step}, {latency us: {plan: the clock's}},
    {collective: fused/unfused on the cluster}, {latency us: {collective: on the clock}}, the fitted latency
    in us), or None. A ratio is the median of a round's (a repetition's) own: the runs of one round are
    minutes apart, the rounds are not. The latency is the one at which the clock's ratios of both
    collectives come closest to the cluster's (least squares, linear between the latencies run): what fusing
    14 allreduces into one saves on the cluster beyond what the clock charges."""
    if not (folder / "machine.txt").exists():
        return None
    runs = {}  # (where, plan) -> {round: ms}
    for f in folder.glob("*_r*.jsonl"):
        where, plan, rnd = re.fullmatch(r"(cluster|clock\d+us)-(.+)_r(\d+)\.jsonl", f.name).groups()
        key = "ms_per_it" if where == "cluster" else "modeled_ms_per_it"
        runs.setdefault((where, plan), {})[int(rnd)] = measured_ms(f, key)

    def ratios(where):
        return {c: statistics.median(runs[where, f"{c}-fused4MiB"][r] / runs[where, f"{c}-unfused"][r]
                                     for r in runs[where, f"{c}-unfused"]) for c in ("ring", "rd")}
    med = lambda where: {p: statistics.median(runs[where, p].values()) for p in COLL_PLANS}
    lats = sorted({int(re.fullmatch(r"clock(\d+)us", w).group(1)) for w, _ in runs if w != "cluster"})
    clock = {l: med(f"clock{l}us") for l in lats}
    clock_ratio = {l: ratios(f"clock{l}us") for l in lats}
    meas_ratio = ratios("cluster")

    def misfit(lat):  # the clock's ratios linear between the latencies run
        i = min(max(j for j in range(len(lats)) if lats[j] <= lat), len(lats) - 2)
        w = (lat - lats[i]) / (lats[i + 1] - lats[i])
        return sum(((1 - w) * clock_ratio[lats[i]][c] + w * clock_ratio[lats[i + 1]][c] - meas_ratio[c]) ** 2
                   for c in meas_ratio)
    return med("cluster"), clock, meas_ratio, clock_ratio, min(range(lats[0], lats[-1] + 1), key=misfit)


def coll_latency(out):
    """The latency a collective fitted on the cluster (coll-latency/), the four plans measured and modelled."""
    fit = coll_latency_fit(out / "coll-latency")
    if not fit:
        return
    meas, clock, meas_ratio, clock_ratio, lat = fit
    print("\n| plan (table-wise q4/q2, q4 dense, 1 thread) | cluster, median ms/step | "
          + " | ".join(f"clock at {l} us a collective" for l in clock) + " |")
    print("|---|---|" + "---|" * len(clock))
    for p in COLL_PLANS:
        print(f"| {p} | {meas[p]:.2f} | " + " | ".join(f"{clock[l][p]:.2f}" for l in clock) + " |")
    saved = {c: 1e3 * (meas[f"{c}-unfused"] - meas[f"{c}-fused4MiB"]) / 13 for c in ("ring", "rd")}
    print(f"\nOn the cluster fusion saves, an allreduce it removes (13 a step; the medians' difference): ring "
          f"{saved['ring']:.0f} us, recursive doubling {saved['rd']:.0f} us, their mean "
          f"{(saved['ring'] + saved['rd']) / 2:.0f} us.")
    print(f"\nFused by 4 MiB / unfused, the median of the rounds' own: on the cluster ring {meas_ratio['ring']:.3f}, "
          f"recursive doubling {meas_ratio['rd']:.3f}; on the clock " + "; ".join(
              f"{l} us {r['ring']:.3f} and {r['rd']:.3f}" for l, r in clock_ratio.items())
          + (f". The latency a collective that fits both: {lat} us." if lat < max(clock) else
             f". The latency a collective that fits both (least squares) is the largest run, {lat} us, or more.")
          + " Where the clock's ratio first reaches the cluster's: " + "; ".join(
              f"{name} {reach(clock_ratio, meas_ratio[c], c)}" for c, name in (("ring", "ring"),
                                                                             ("rd", "recursive doubling"))) + ".")


def reach(clock_ratio, target, c):
    """The latency (us, linear between those run) at which the clock's fused/unfused ratio of collective c
    first falls to target, or that it does not within the runs."""
    lats = sorted(clock_ratio)
    for a, b in zip(lats, lats[1:]):
        ra, rb = clock_ratio[a][c], clock_ratio[b][c]
        if ra > target >= rb:
            return f"{a + (b - a) * (ra - target) / (ra - rb):.0f} us"
    return f"not up to {lats[-1]} us"


def runs_by_plan_round(path):
    """scripts/cluster-thread-cpu's threads ({(plan, round): [thread lines]})."""
    runs = {}
    for t in load(path):
        runs.setdefault((t["plan"], t["round"]), []).append(t)
    return runs


def admitted_flags(sweep):
    """Each admitted plan an exhaustive run ran (its JSON lines), as train flags but --threads: what the
    cluster sweeps train, each at --threads 1 (an empty value, no --mp-splits, is the flag's default)."""
    for p in admitted_runs(sweep):
        print(flag_text(p["flags"], ("threads",)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--admitted-flags"]:  # SWEEP: an exhaustive run's --metrics
        admitted_flags(pathlib.Path(sys.argv[2]))
        sys.exit()
    if sys.argv[1:2] == ["--coll-latency"]:  # RUNS: scripts/coll-latency-runs' folder; prints the fitted latency
        *_, clock_ratio, lat = coll_latency_fit(pathlib.Path(sys.argv[2]))
        if lat == max(clock_ratio):
            sys.exit(f"summarize-plan.py: the fit is at the largest latency run, {lat} us; run larger ones")
        print(f"{lat}us")
        sys.exit()
    if sys.argv[1:2] == ["--fastest-measured"]:  # [RUNS [ADMITTED]]: a sweep's runs folder; an exhaustive run's metrics
        print(fastest_measured(pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "docs/data/plan/cluster4"),
                               pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else None))
        sys.exit()
    if sys.argv[1:2] == ["--clock"]:  # DIR [CHECK]: scripts/reproduce-plan DIR and plan-clock-check with PLANS=DIR alone
        main(pathlib.Path(sys.argv[2]))
        clock_check(pathlib.Path(sys.argv[2]), *sys.argv[3:4])
        sys.exit()
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/data/plan")
    for table in (main, check, clock_check, accuracy, measure, unshaped, budget, cluster, transport_abs, resweeps,
                  emb_bf16_ab, planning_time, refit_searches, mlp_bf16_evidence, replanned, same_day, trial, wait_counted, units_day, codec_units_day, collat, dct_variants, clock_variants, unfused_by_collective, thread_cpu,
                  coll_latency):
        table(out)
