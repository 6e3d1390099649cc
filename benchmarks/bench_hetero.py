"""Heterogeneity-aware policies: Hadar vs Gavel vs YARN-CS on Gavel's continuous workload.

Gavel's "continuous-multiple" generator (26 job types with Gavel's measured per-type
throughputs, ``../shared/data/gavel/simulation_throughputs.json``) on the ``gavel-hetero-60``
profile (Hadar §IV-A: 15 nodes, 20 V100 + 20 P100 + 20 K80, 10 s checkpoint-restart, 6-minute
rounds). Prints avg JCT, makespan, avg finish-time fairness, utilization and preemptions per
policy, and the Gavel / Hadar avg-JCT ratio (Hadar reports 1.5-1.8x for its continuous trace).
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
    p.add_argument("--jobs", type=int, default=300, help="jobs to generate (default 300)")
    p.add_argument("--rate", type=float, default=4.0, help="arrivals per hour (default 4)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--eta", type=float, default=1.0, help="Hadar's eta (default 1, the paper's "
                   "eq. 7 without a stated value)")
    p.add_argument("--profile", default="gavel-hetero-60", help="cluster profile")
    args = p.parse_args()

    from policies.gavel import Gavel
    from policies.hadar import Hadar
    from policies.yarn import YarnCS
    from simulator import load_profile
    from simulator.throughput import ThroughputTable, generate_gavel

    table = ThroughputTable.from_gavel_json(GAVEL)
    wl = generate_gavel(table, args.jobs, jobs_per_hr=args.rate, seed=args.seed)
    profile = load_profile(args.profile)
    print(f"settings: --jobs {args.jobs} --rate {args.rate:g} --seed {args.seed} "
          f"--eta {args.eta:g} --profile {args.profile}; {profile.total_gpus} GPUs "
          f"{profile.gpus_by_type}, restart {profile.restart_overhead_s:g} s, inter-node "
          f"factor {profile.inter_node_factor:g}")
    policies: list[tuple[str, Any]] = [
        ("hadar (utility=jct)", Hadar(eta=args.eta)),
        ("gavel (max_min = LAS, its testbed)", Gavel()),
        ("gavel (max_sum throughput)", Gavel(objective="max_sum")),
        ("yarn-cs (FIFO, head-of-line)", YarnCS()),
    ]
    print(f"{'policy':<34} {'avg JCT h':>9} {'makespan h':>10} {'ftf':>7} {'util':>6} "
          f"{'preempt':>8} {'CPU s':>7}")
    results = {}
    for label, policy in policies:
        results[label] = run(policy, wl, profile)
        print(_row(label, results[label]), flush=True)
    hadar = results["hadar (utility=jct)"]["jct_h"]
    for label in ("gavel (max_min = LAS, its testbed)", "gavel (max_sum throughput)"):
        print(f"avg JCT {label} / hadar: {results[label]['jct_h'] / hadar:.2f}x "
              f"(Hadar reports 1.5-1.8x over Gavel)")
    print(f"avg JCT yarn-cs / hadar: "
          f"{results['yarn-cs (FIFO, head-of-line)']['jct_h'] / hadar:.2f}x (Hadar reports 5-7x)")


if __name__ == "__main__":
    main()
