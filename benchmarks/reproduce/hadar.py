"""Hadar §V-A reproduced: its headlines against Gavel and YARN-CS on the paper's workload.

The workload is :func:`simulator.hadar_workload.hadar_workload`: 480 jobs of hours 3-10 (of
the day) of a Philly trace (default 6214e9), Table II's models by GPU-hour class, timed by
Gavel's measured throughputs; static (all at 0) and continuous (``--continuous trace``: the
jobs' times of day; ``poisson``: Poisson at ``--rate``, the paper's unstated λ). The
cluster is ``gavel-hetero-60`` (15 nodes, 20 V100 + 20 P100 + 20 K80, 10 s restart, 6-minute
rounds). Policies: ``hadar`` (utility ``jct``; ``makespan`` for the makespan headline, as
the paper "specifies [its] policy towards makespan minimization"), ``gavel`` in the two
variants the paper may have meant (objective ``max_min`` and ``max_sum``, both
heterogeneity-aware) and ``yarn-cs``. η is not stated by the paper: ``--eta`` (default 1)
sets it for the headlines and ``--etas`` sweeps it for the avg-JCT headline.

Prints per pattern every policy's avg and median JCT, makespan, avg finish-time fairness and
utilisation, then one table per headline: the paper's number, ours, ours / paper, with the
set-up in one line. Run from the project root:
``python benchmarks/reproduce/hadar.py`` (the paper's 480 jobs; ``--jobs 120`` for a quick look).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from policies.hetero.gavel import Gavel  # noqa: E402  (after the path is set)
from policies.hetero.hadar import Hadar  # noqa: E402
from policies.hetero.yarn import YarnCS  # noqa: E402
from simulator import Workload, load_profile, simulate, summary  # noqa: E402
from simulator.hadar_workload import hadar_workload  # noqa: E402
from simulator.throughput import ThroughputTable  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
GAVELS = {"gavel max_min": Gavel(), "gavel max_sum": Gavel(objective="max_sum")}
# (pattern, metric, baseline, hadar's utility, paper's baseline / hadar)
HEADLINES = (
    ("static", "jct", "gavel", "jct", 1.8),
    ("continuous", "jct", "gavel", "jct", 1.5),
    ("static", "p50", "gavel", "jct", 2.1),
    ("static", "makespan", "gavel", "makespan", 1.5),
    ("static", "ftf", "gavel", "jct", 1.5),
    ("static", "jct", "yarn-cs", "jct", 7.0),
    ("continuous", "jct", "yarn-cs", "jct", 5.0),
    ("static", "p50", "yarn-cs", "jct", 15.0),
)
NAMES = {"jct": "avg JCT", "p50": "median JCT", "makespan": "makespan", "ftf": "avg FTF"}


def run(policy: Any, wl: Workload, profile: Any) -> dict[str, float]:
    """One simulation reduced to the columns: hours for times, ratios for the rest."""
    t0 = time.perf_counter()
    s = summary(simulate(wl, profile, policy), ("avg", "p50"))
    return {"jct": s["jct"]["avg"] / 3600, "p50": s["jct"]["p50"] / 3600,
            "makespan": s["makespan"]["avg"] / 3600, "ftf": s["ftf"]["avg"],
            "util": s["utilization"]["avg"], "wall_s": time.perf_counter() - t0}


def policies(eta: float) -> dict[str, Any]:
    """Every policy of the tables, by label."""
    return {"hadar jct": Hadar(eta=eta), "hadar makespan": Hadar(eta=eta, utility="makespan"),
            **GAVELS, "yarn-cs": YarnCS()}


def headline_table(results: dict[str, dict[str, dict[str, float]]], setup: str) -> str:
    """One row per headline and baseline variant: the paper's ratio, ours, ours / paper."""
    lines = [f"## headlines ({setup})",
             f"{'headline':<42} {'paper':>6} {'ours':>6} {'ours/paper':>10}"]
    for pattern, metric, base, utility, paper in HEADLINES:
        hadar = results[pattern][f"hadar {utility}"][metric]
        for label in ([base] if base == "yarn-cs" else list(GAVELS)):
            ours = results[pattern][label][metric] / hadar
            what = f"{NAMES[metric]} {label} / hadar ({utility}), {pattern}"
            lines.append(f"{what:<42} {paper:>5g}x {ours:>5.2f}x {ours / paper:>10.2f}")
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
    p.add_argument("--etas", default="", help="comma-separated etas to sweep the static avg "
                   "JCT headline over (e.g. 1,100,1e4,1e6; default: none)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed")
    args = p.parse_args(argv)

    table = ThroughputTable.from_gavel_json(SHARED / "gavel" / "simulation_throughputs.json")
    trace = SHARED / "pcs" / "traces" / f"trace_{args.trace}.csv"
    kw: dict[str, Any] = {"n_jobs": args.jobs, "sampling": args.sampling, "seed": args.seed}
    static = hadar_workload(trace, table, **kw)
    continuous = hadar_workload(trace, table, arrivals=args.continuous, rate_per_h=args.rate,
                                **kw)
    profile = load_profile("gavel-hetero-60")
    setup = (f"{args.trace} --jobs {args.jobs} --sampling {args.sampling} --continuous "
             f"{args.continuous}{f' --rate {args.rate:g}' if args.continuous == 'poisson' else ''}"
             f" --eta {args.eta:g} --seed {args.seed}; gavel-hetero-60")
    print(f"workload: {static.source}; {np.sum(static.service_s) / 3600:.0f} V100 GPU-hours, "
          f"gangs {dict(zip(*np.unique(static.gpus, return_counts=True), strict=True))}")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for pattern, wl in (("static", static), ("continuous", continuous)):
        print(f"\n{pattern}: {wl.source}")
        print(f"{'policy':<16} {'avg JCT h':>9} {'p50 JCT h':>9} {'makespan h':>10} "
              f"{'avg FTF':>7} {'util':>5} {'wall s':>6}")
        results[pattern] = {}
        for label, policy in policies(args.eta).items():
            m = results[pattern][label] = run(policy, wl, profile)
            print(f"{label:<16} {m['jct']:>9.2f} {m['p50']:>9.2f} {m['makespan']:>10.1f} "
                  f"{m['ftf']:>7.2f} {m['util']:>5.2f} {m['wall_s']:>6.1f}", flush=True)
    print("\n" + headline_table(results, setup))
    if args.etas:
        print(f"\n## avg JCT gavel / hadar across eta (static; paper 1.8x; {setup})")
        print(f"{'eta':>8} {'hadar h':>8} {'max_min/hadar':>13} {'max_sum/hadar':>13}")
        for eta in (float(e) for e in args.etas.split(",")):
            h = run(replace(Hadar(), eta=eta), static, profile)["jct"]
            print(f"{eta:>8g} {h:>8.2f} {results['static']['gavel max_min']['jct'] / h:>12.2f}x "
                  f"{results['static']['gavel max_sum']['jct'] / h:>12.2f}x", flush=True)


if __name__ == "__main__":
    main()
