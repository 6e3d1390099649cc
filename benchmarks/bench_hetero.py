"""Hadar's headline against the reference-matched Gavel (Hadar §V-A's set-up).

Gavel's "continuous-multiple" generator (26 job types with Gavel's measured per-type
throughputs, ``../shared/data/gavel/simulation_throughputs.json``; Hadar's own 480-job sample of
the Microsoft trace is not public) on the ``gavel-hetero-60`` profile (Hadar §V-A: 15 nodes,
20 V100 + 20 P100 + 20 K80, 10 s checkpoint-restart, 6-minute rounds), in Hadar's two arrival
patterns: static (every job at time 0) and continuous (Poisson at ``--rate``). Gavel is our
``gavel`` policy, which reproduces Gavel's own simulator (``bench_gavel_parity.py``), in its
testbed configuration (heterogeneity-aware max-min fairness, as Hadar configures it). Prints
avg JCT, makespan, avg finish-time fairness, utilization and preemptions per policy, and the
Gavel / Hadar and YARN-CS / Hadar ratios beside the paper's figures (avg JCT 1.8x and 7x
static, 1.5x and 5x continuous; makespan 1.5x over Gavel with Hadar's makespan utility).
Run from the project root: ``python benchmarks/bench_hetero.py [--jobs N --rate R --seed S]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GAVEL = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def _row(label: str, m: dict[str, float]) -> str:
    return (f"{label:<34} {m['jct_h']:>9.2f} {m['makespan_h']:>10.1f} {m['ftf']:>7.2f} "
            f"{m['util']:>6.2f} {m['preempt']:>8.1f} {m['cpu_s']:>7.1f}")


def run(policy: Any, wl: Any, profile: Any) -> dict[str, float]:
    """Simulate one policy and reduce its records to the table's columns."""
    from simulator import simulate, summary

    t0 = time.process_time()
    s = summary(simulate(wl, profile, policy), ("avg",))
    return {"jct_h": s["jct"]["avg"] / 3600, "makespan_h": s["makespan"]["avg"] / 3600,
            "ftf": s["ftf"]["avg"], "util": s["utilization"]["avg"],
            "preempt": s["preemptions"]["avg"], "cpu_s": time.process_time() - t0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=480, help="jobs to generate (default 480, "
                   "Hadar's)")
    p.add_argument("--rate", type=float, default=4.0, help="arrivals per hour of the "
                   "continuous pattern (default 4)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--eta", type=float, default=1.0, help="Hadar's eta (default 1, the paper's "
                   "eq. 7 without a stated value)")
    p.add_argument("--profile", default="gavel-hetero-60", help="cluster profile")
    args = p.parse_args()

    from dataclasses import replace

    import numpy as np

    from policies.hetero.gavel import Gavel
    from policies.hetero.hadar import Hadar
    from policies.hetero.yarn import YarnCS
    from simulator import load_profile
    from simulator.inputs.throughput import ThroughputTable, generate_gavel

    table = ThroughputTable.from_gavel_json(GAVEL)
    continuous = generate_gavel(table, args.jobs, jobs_per_hr=args.rate, seed=args.seed)
    static = replace(continuous, arrival_s=np.zeros(len(continuous)))
    profile = load_profile(args.profile)
    print(f"settings: --jobs {args.jobs} --rate {args.rate:g} --seed {args.seed} "
          f"--eta {args.eta:g} --profile {args.profile}; {profile.total_gpus} GPUs "
          f"{profile.gpus_by_type}, restart {profile.restart_overhead_s:g} s, inter-node "
          f"factor {profile.inter_node_factor:g}")
    policies: list[tuple[str, Any]] = [
        ("hadar (utility=jct)", Hadar(eta=args.eta)),
        ("hadar (utility=makespan)", Hadar(eta=args.eta, utility="makespan")),
        ("gavel (max-min, its testbed)", Gavel()),
        ("yarn-cs (FIFO, head-of-line)", YarnCS()),
    ]
    paper = {"static": (1.8, 7.0), "continuous": (1.5, 5.0)}
    for pattern, wl in (("static", static), ("continuous", continuous)):
        print(f"\n{pattern}: {len(wl)} jobs")
        print(f"{'policy':<34} {'avg JCT h':>9} {'makespan h':>10} {'ftf':>7} {'util':>6} "
              f"{'preempt':>8} {'CPU s':>7}")
        results = {}
        for label, policy in policies:
            results[label] = run(policy, wl, profile)
            print(_row(label, results[label]), flush=True)
        hadar, gavel = results["hadar (utility=jct)"], results["gavel (max-min, its testbed)"]
        yarn = results["yarn-cs (FIFO, head-of-line)"]
        print(f"avg JCT gavel / hadar: {gavel['jct_h'] / hadar['jct_h']:.2f}x (paper: "
              f"{paper[pattern][0]:g}x); yarn-cs / hadar: {yarn['jct_h'] / hadar['jct_h']:.2f}x "
              f"(paper: {paper[pattern][1]:g}x)")
        print(f"makespan gavel / hadar (utility=makespan): "
              f"{gavel['makespan_h'] / results['hadar (utility=makespan)']['makespan_h']:.2f}x "
              f"(paper: 1.5x)")


if __name__ == "__main__":
    main()
