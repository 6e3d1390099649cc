"""Hadar §V-A reproduced: its headlines against Gavel, Tiresias and YARN-CS on the paper's
workload.

The workload is :func:`simulator.inputs.hadar_workload.hadar_workload`: 480 jobs of hours 3-10 (of
the day) of a Philly trace (default 6214e9), Table II's models by GPU-hour class, timed by
Gavel's measured throughputs; static (all at 0) and continuous (``--continuous trace``: the
jobs' times of day; ``poisson``: Poisson at ``--rate``, the paper's unstated λ). The
cluster is ``gavel-hetero-60`` (15 nodes, 20 V100 + 20 P100 + 20 K80, 10 s restart, 6-minute
rounds). Policies: ``hadar`` (utility ``jct``; ``makespan`` for the makespan headline, as
the paper "specifies [its] policy towards makespan minimization"), ``gavel`` in the
variants the paper may have meant (objective ``max_min`` and ``max_sum``, both
heterogeneity-aware: Gavel's ``max_min_fairness_perf`` and ``max_sum_throughput_perf``; and
``gavel las``, ``max_min`` agnostic: the policy Gavel's simulator names
``max_min_fairness``; for the makespan headline also Gavel's own makespan policy, objective
``makespan``: its ``min_total_duration_perf``), ``tiresias`` (two queues, PromoteKnob off; its
queue limit, not stated by the paper, is ``--threshold``, default the Tiresias simulator's
3250 GPU-seconds) and YARN-CS in two readings: ``yarn-cs`` (Tiresias's simulator's; the
order a static batch queues in, not stated by the paper, is ``--shuffle`` or ``--order``) and
Gavel's own heterogeneity-agnostic FIFO (``gavel`` with objective ``fifo``, as Gavel's
simulator runs it). η is not stated by the paper either: ``--eta`` (default 1)
sets it for the headlines and ``--etas`` sweeps it for the avg-JCT headline; nor is the GPU
type the trace's durations are on: ``--reference`` (default V100, as Gavel's generator).

Prints per pattern every policy's avg and median JCT, makespan, avg finish-time fairness and
utilisation, then one table per headline: the paper's number, ours, ours / paper, with the
set-up in one line. Run from the project root:
``python benchmarks/reproduce/hadar.py`` (the paper's 480 jobs; ``--jobs 120`` for a quick look).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from policies.hetero.gavel import Gavel  # noqa: E402  (after the path is set)
from policies.hetero.hadar import Hadar  # noqa: E402
from policies.hetero.tiresias import Tiresias  # noqa: E402
from policies.hetero.yarn import YarnCS  # noqa: E402
from simulator import Workload, load_profile, simulate, summary  # noqa: E402
from simulator.inputs.hadar_workload import hadar_workload  # noqa: E402
from simulator.inputs.throughput import ThroughputTable  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
# Gavel read three ways: its own policy (max-min, heterogeneity-aware), its throughput policy,
# and the policy its simulator calls max_min_fairness (LAS: heterogeneity-agnostic)
GAVELS = {"gavel max_min": Gavel(), "gavel max_sum": Gavel(objective="max_sum"),
          "gavel las": Gavel(aware=False)}
GAVEL_MAKESPAN = {"gavel makespan": Gavel(objective="makespan")}  # Gavel's min_total_duration
# YARN-CS: Tiresias's simulator's (the project's yarn-cs), and Gavel's agnostic FIFO
YARNS = {"yarn-cs": YarnCS(), "gavel fifo": Gavel(objective="fifo", aware=False)}
# (pattern, metric, baseline, hadar's utility, paper's baseline / hadar)
HEADLINES = (
    ("static", "jct", "gavel", "jct", 1.8),
    ("continuous", "jct", "gavel", "jct", 1.5),
    ("static", "p50", "gavel", "jct", 2.1),
    ("static", "makespan", "gavel", "makespan", 1.5),
    ("static", "ftf", "gavel", "jct", 1.5),
    ("static", "ftf_n", "gavel", "jct", 1.5),
    ("static", "jct", "tiresias", "jct", 2.5),
    ("continuous", "jct", "tiresias", "jct", 2.3),
    ("static", "p50", "tiresias", "jct", 3.0),
    ("static", "makespan", "tiresias", "makespan", 2.0),
    ("static", "ftf", "tiresias", "jct", 1.8),
    ("static", "ftf_n", "tiresias", "jct", 1.8),
    ("static", "jct", "yarn-cs", "jct", 7.0),
    ("continuous", "jct", "yarn-cs", "jct", 5.0),
    ("static", "p50", "yarn-cs", "jct", 15.0),
)
NAMES = {"jct": "avg JCT", "p50": "median JCT", "makespan": "makespan",
         "ftf": "avg FTF (1/N, N seen)", "ftf_n": "avg FTF (1/n, n jobs)"}
Results = dict[str, dict[str, dict[str, float]]]


def run(policy: Any, wl: Workload, profile: Any) -> dict[str, float]:
    """One simulation reduced to the columns: hours for times, ratios for the rest.

    Two finish-time fairness readings: ``ftf`` is the project's (Themis's: the share is
    1/N of the cluster, N the jobs active on average while the job was); ``ftf_n`` takes the
    paper's words, "1/n of the cluster, with n being the number of jobs executed on the
    cluster", as n = every job of the workload, the same for every policy.
    """
    t0 = time.perf_counter()
    r = simulate(wl, profile, policy)
    s = summary(r, ("avg", "p50"))
    share = np.minimum(r.total_gpus / len(wl), wl.gpus)
    alone = wl.service_s / wl.scaling.speed(wl.model, share)
    return {"jct": s["jct"]["avg"] / 3600, "p50": s["jct"]["p50"] / 3600,
            "makespan": s["makespan"]["avg"] / 3600, "ftf": s["ftf"]["avg"],
            "ftf_n": float(np.mean(r.jct_s[r.kept] / alone[r.kept])),
            "util": s["utilization"]["avg"], "wall_s": time.perf_counter() - t0}


def policies(eta: float, threshold: float) -> dict[str, Any]:
    """Every policy of the tables, by label."""
    return {"hadar jct": Hadar(eta=eta), "hadar makespan": Hadar(eta=eta, utility="makespan"),
            **GAVELS, **GAVEL_MAKESPAN, "tiresias": Tiresias(threshold_gpu_s=threshold),
            **YARNS}


def queued(wl: Workload, order: str) -> Workload:
    """A static batch queued by its work (``service_s``): ``least-work`` or ``most-work``
    first (ties in trace order; job ids stay in queue order); ``trace`` leaves it as it is."""
    if order == "trace":
        return wl
    key = wl.service_s if order == "least-work" else -wl.service_s
    idx = np.argsort(key, kind="stable")
    per_job = {f.name: getattr(wl, f.name)[idx] for f in fields(wl)
               if isinstance(getattr(wl, f.name), np.ndarray) and f.name != "job_id"}
    return replace(wl, **per_job, source=f"{wl.source}, queued {order} first")


def workloads(args: argparse.Namespace, seed: int) -> dict[str, Workload]:
    """The static and the continuous sample of ``seed`` (the same jobs)."""
    table = ThroughputTable.from_gavel_json(SHARED / "gavel" / "simulation_throughputs.json")
    trace = SHARED / "pcs" / "traces" / f"trace_{args.trace}.csv"
    kw: dict[str, Any] = {"n_jobs": args.jobs, "sampling": args.sampling, "seed": seed,
                          "reference": args.reference}
    static = hadar_workload(trace, table, shuffle=args.shuffle, **kw)
    return {"static": queued(static, args.order),
            "continuous": hadar_workload(trace, table, arrivals=args.continuous,
                                         rate_per_h=args.rate, **kw)}


def per_policy(wls: dict[str, Workload], eta: float, threshold: float, profile: Any,
               reference: str) -> Results:
    """Every policy on both patterns, printed as it goes (``reference``: the GPU type the
    jobs' work is counted on)."""
    wl = wls["static"]
    floor = np.max(wl.duration_s) / 3600
    gangs = dict(zip(*(a.tolist() for a in np.unique(wl.gpus, return_counts=True)), strict=True))
    ref = reference.upper()
    print(f"\n{wl.source}: {np.sum(wl.service_s) / 3600:.0f} {ref} GPU-hours, gangs {gangs}, "
          f"longest job alone on {ref} {floor:.1f} h (a floor under every makespan)")
    results: Results = {}
    for pattern, w in wls.items():
        print(f"{pattern}: {w.source}")
        print(f"{'policy':<16} {'avg JCT h':>9} {'p50 JCT h':>9} {'makespan h':>10} "
              f"{'FTF N':>7} {'FTF n':>7} {'util':>5} {'wall s':>6}")
        results[pattern] = {}
        for label, policy in policies(eta, threshold).items():
            m = results[pattern][label] = run(policy, w, profile)
            print(f"{label:<16} {m['jct']:>9.2f} {m['p50']:>9.2f} {m['makespan']:>10.1f} "
                  f"{m['ftf']:>7.2f} {m['ftf_n']:>7.2f} {m['util']:>5.2f} {m['wall_s']:>6.1f}",
                  flush=True)
    return results


def headline_table(runs: list[Results], setup: str) -> str:
    """One row per headline and baseline variant: the paper's ratio, ours (the mean over the
    seeds, their range beside it), ours / paper."""
    lines = [f"## headlines ({setup})",
             f"{'headline':<58} {'paper':>6} {'ours':>6} {'seeds':>13} {'ours/paper':>10}"]
    for pattern, metric, base, utility, paper in HEADLINES:
        labels = {"gavel": list(GAVELS), "yarn-cs": list(YARNS)}.get(base, [base])
        if base == "gavel" and metric == "makespan":
            labels += list(GAVEL_MAKESPAN)
        for label in labels:
            ours = np.array([r[pattern][label][metric] / r[pattern][f"hadar {utility}"][metric]
                             for r in runs])
            what = f"{NAMES[metric]} {label} / hadar ({utility}), {pattern}"
            span = f"{ours.min():.2f}-{ours.max():.2f}" if len(ours) > 1 else "-"
            lines.append(f"{what:<58} {paper:>5g}x {ours.mean():>5.2f}x {span:>13} "
                         f"{ours.mean() / paper:>10.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default="6214e9", help="Philly VC trace (default 6214e9)")
    p.add_argument("--jobs", type=int, default=480, help="jobs (default 480, the paper's)")
    p.add_argument("--sampling", default="random", choices=("random", "stratified"))
    p.add_argument("--continuous", default="trace", choices=("trace", "poisson"),
                   help="continuous arrivals: trace times of day, or Poisson at --rate")
    p.add_argument("--rate", type=float, default=480 / 7, help="Poisson arrivals per hour "
                   "(default 480/7: the window's own rate)")
    p.add_argument("--eta", type=float, default=1.0, help="Hadar's eta (default 1)")
    p.add_argument("--threshold", type=float, default=3250.0, help="Tiresias's queue limit in "
                   "GPU-seconds (default 3250, its simulator's)")
    p.add_argument("--etas", default="", help="comma-separated etas to sweep the static avg "
                   "JCT headline over (e.g. 1,100,1e4,1e6; default: none)")
    p.add_argument("--shuffle", action="store_true", help="queue the static jobs in a random "
                   "order, not the trace's (FIFO's figures depend on it)")
    p.add_argument("--order", default="trace", choices=("trace", "least-work", "most-work"),
                   help="queue the static jobs by their work, least or most first (the "
                        "range of a FIFO's figures; default: trace order)")
    p.add_argument("--reference", default="v100", choices=("v100", "p100", "k80"),
                   help="the GPU type the trace's durations are on (not stated by the paper; "
                        "default v100, as Gavel's generator times its jobs)")
    p.add_argument("--seeds", default="0", help="comma-separated sample seeds (default 0)")
    args = p.parse_args(argv)

    profile = load_profile("gavel-hetero-60")
    seeds = [int(x) for x in args.seeds.split(",")]
    rate = f" --rate {args.rate:g}" if args.continuous == "poisson" else ""
    order = f" --order {args.order}" if args.order != "trace" else ""
    if args.shuffle and args.order != "trace":
        p.error("--shuffle and --order are two queue orders: give one")
    setup = (f"{args.trace} --jobs {args.jobs} --sampling {args.sampling} --continuous "
             f"{args.continuous}{rate}{' --shuffle' if args.shuffle else ''}{order} "
             f"--eta {args.eta:g} "
             f"--threshold {args.threshold:g} --reference {args.reference} "
             f"--seeds {args.seeds}; gavel-hetero-60")
    samples = {seed: workloads(args, seed) for seed in seeds}
    runs = [per_policy(wls, args.eta, args.threshold, profile, args.reference)
            for wls in samples.values()]
    print("\n" + headline_table(runs, setup))
    if args.etas:
        print(f"\n## avg JCT gavel / hadar across eta (static, mean over the seeds; paper 1.8x; "
              f"{setup})")
        print(f"{'eta':>8} {'hadar h':>8}"
              + "".join(f"{k.split()[-1] + '/hadar':>14}" for k in GAVELS))
        gavel = {k: np.array([r["static"][k]["jct"] for r in runs]) for k in GAVELS}
        for eta in (float(e) for e in args.etas.split(",")):
            h = np.array([run(Hadar(eta=eta), wls["static"], profile)["jct"]
                          for wls in samples.values()])
            print(f"{eta:>8g} {h.mean():>8.2f}"
                  + "".join(f"{np.mean(g / h):>13.2f}x" for g in gavel.values()), flush=True)


if __name__ == "__main__":
    main()
