"""SLO scheduling: UniSched against its baselines, and the selector MILP's latency.

Two workloads (papers/unisched.md §IV-B, §V-B): the first jobs of Chronus's Philly MIX1 trace
(strict SLO and best-effort jobs, deadlines as Chronus generated them) and a MIX2 mix
(strict, soft and best-effort) drawn with ``add_slos`` over PCS's Philly trace b436b2. Each
runs on a cluster of 8-GPU V100 nodes like UniSched's C96 (restart 30 s, inter-node factor
0.9), with fewer nodes so that jobs queue. Printed per policy: ``slo_miss`` (eq. 15) and
``be_jct``. Then the latency of one UniSched decision with 500 pending jobs (Fig. 10(d): under
10 s with Gurobi). Run from the project root: ``python benchmarks/bench_slo.py``
(``--quick`` for a smaller run).

Chronus's trace counts time in minutes (see ``read_chronus``); ``--chronus-unit-s`` (default
60) is the seconds per unit.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import scipy

from policies import make_policy
from policies.unisched.milp import NODE_LIMIT
from policies.unisched.policy import F_PROF, G_FALLBACKS, G_SOLVE_S, UniSched
from simulator import ScalingTable, Workload, load_profile, read_chronus, simulate
from simulator.inputs.generate import add_slos
from simulator.inputs.profile import ClusterProfile, NodeGroup
from simulator.inputs.workload import read_pcs_trace
from simulator.metrics import METRICS
from simulator.rounds import Cluster, RoundState
from simulator.rounds.arrays import cluster_arrays
from simulator.rounds.python_path import job_arrays_from
from simulator.rounds.view import N_ACTIVE

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SOLVES: list[tuple[int, float]] = []  # (active jobs, solver seconds) per MILP solve
FALLBACKS: list[int] = []
BIG = 500  # "500 pending jobs" (Fig. 10(d) scale)


@dataclass(frozen=True)
class TimedUniSched(UniSched):
    """UniSched that reports each MILP solve time to :data:`SOLVES` and each reuse of the
    cached solution (no usable solution within the node limit) to :data:`FALLBACKS`."""

    name: ClassVar[str] = "unisched-timed"

    def host_step(self, cluster: Any, jobs: Any, memory: Any, state: Any, now: float) -> None:
        cached = memory.g[G_FALLBACKS]
        super().host_step(cluster, jobs, memory, state, now)
        SOLVES.append((int(state.cnt[N_ACTIVE]), float(memory.g[G_SOLVE_S])))
        FALLBACKS.extend([1] * int(memory.g[G_FALLBACKS] - cached))


def cluster_profile(nodes: int) -> ClusterProfile:
    """UniSched's C96 node type (8 x V100, restart 30 s, inter-node 0.9) with ``nodes`` nodes."""
    base = load_profile("unisched-c96")
    return replace(base, name=f"c{nodes}", description=f"{nodes} nodes x 8 GPUs",
                   node_groups=(NodeGroup(nodes, 8, "v100", 32),))


def chronus(jobs: int, unit_s: float) -> Workload:
    return read_chronus(SHARED / "chronus" / "trace_job_Philly_MIX1.csv",
                        time_unit_s=unit_s).head(jobs)


def pcs(trace: str, jobs: int, mix: str, seed: int) -> Workload:
    table = ScalingTable.from_csv(SHARED / "pcs" / "scaling_tables.csv")
    wl = read_pcs_trace(SHARED / "pcs" / "traces" / f"trace_{trace}.csv", scaling=table)
    return add_slos(wl.head(jobs), mix, seed=seed)


def build(spec: str, node_limit: int) -> Any:
    """``name`` or ``name:key=value;key=value``; UniSched gets the run's MILP node limit."""
    name, _, rest = spec.partition(":")
    params: dict[str, Any] = {}
    for item in filter(None, rest.split(";")):
        key, _, value = item.partition("=")
        params[key] = float(value)
    if name == "unisched":
        return TimedUniSched(milp_node_limit=node_limit, **params)
    return make_policy(name, params)


def compare(label: str, wl: Workload, nodes: int, specs: list[str], node_limit: int) -> None:
    profile = cluster_profile(nodes)
    slo = wl.slos.is_slo if wl.slos is not None else np.zeros(len(wl), bool)
    print(f"\n{label}: {len(wl)} jobs ({int(slo.sum())} with SLOs), span "
          f"{(wl.arrival_s[-1] - wl.arrival_s[0]) / 3600:.1f} h, on {profile.name} = {nodes} "
          f"nodes x 8 GPUs = {profile.total_gpus} GPUs")
    print(f"  {'policy':<24}{'slo_miss':>9}{'be_jct h':>10}{'jct h':>9}{'preempt':>9}"
          f"{'milps':>7}{'milp p50':>10}{'milp max':>10}{'cached':>8}{'wall s':>8}")
    for spec in specs:
        SOLVES.clear()
        FALLBACKS.clear()
        policy = build(spec, node_limit)
        t0 = time.perf_counter()
        r = simulate(wl, profile, policy)
        wall = time.perf_counter() - t0
        m = {k: float(np.nanmean(METRICS[k].compute(r)))
             for k in ("slo_miss", "be_jct", "jct", "preemptions")}
        solve = [t for _, t in SOLVES]
        milp = (f"{len(solve):>7}{np.median(solve):>10.3f}{max(solve):>10.3f}"
                f"{len(FALLBACKS):>8}" if solve else f"{'-':>7}{'-':>10}{'-':>10}{'-':>8}")
        print(f"  {spec:<24}{m['slo_miss']:>9.3f}{m['be_jct'] / 3600:>10.2f}"
              f"{m['jct'] / 3600:>9.2f}{m['preemptions']:>9.2f}{milp}{wall:>8.1f}", flush=True)
        big = [t for n, t in SOLVES if n >= BIG]
        if big:
            print(f"  {'':<24}cycles with >= {BIG} active jobs: {len(big)}, solver p50 "
                  f"{np.median(big):.3f} s, max {max(big):.3f} s")


def pending_state(wl: Workload, n: int, nodes: int, rng: np.random.Generator) -> RoundState:
    """``n`` jobs of ``wl``, all waiting, 20-100 % of their work left, past profiling."""
    rows = np.sort(rng.choice(len(wl), size=n, replace=False))
    cl = Cluster.from_profile(cluster_profile(nodes))
    left = wl.estimated_service_s[rows] * rng.uniform(0.2, 1.0, n)
    slos = wl.slos
    assert slos is not None
    now = float(rng.uniform(0.0, 600.0))
    state = RoundState(
        now=now, cluster=cl, rows=rows, arrival_s=np.zeros(n), demand=wl.gpus[rows],
        min_gpus=wl.min_gpus[rows], est_size=wl.estimated_service_s[rows], est_remaining=left,
        attained=wl.estimated_service_s[rows] - left, alloc=np.zeros((n, nodes), np.int64),
        model=wl.model[rows], job_class=slos.job_class[rows],
        deadlines_s=slos.deadlines_s[rows], rewards=slos.rewards[rows], scaling=wl.scaling,
        speeds=np.ones((len(wl.scaling.models), 1)), memo={})
    memory = UniSched().memory(cluster_arrays(state.cluster, state.speeds, state.scaling, None),
                               job_arrays_from(state, False))
    memory.f[rows, F_PROF] = 1e9  # past profiling
    state.memo["kernel_memory"] = memory
    return state


def latency(wl: Workload, n: int, nodes: int, cycles: int, limit: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    policy = UniSched(milp_node_limit=limit)
    solve, whole, gone = [], [], 0
    for _ in range(cycles):
        state = pending_state(wl, n, nodes, rng)
        t0 = time.perf_counter()
        plan = policy.plan(state)
        whole.append(time.perf_counter() - t0)
        memory = state.memo["kernel_memory"]
        solve.append(float(memory.g[G_SOLVE_S]))
        gone += int(memory.g[G_FALLBACKS])
        assert (plan.sum(axis=0) <= state.cluster.node_gpus).all()
    print(f"\nMILP latency, {cycles} cycles of {n} pending jobs ({wl.source}) on {nodes} x 8 GPUs,"
          f" node limit {limit}:")
    print(f"  solver     p50 {np.median(solve):7.3f} s   max {max(solve):7.3f} s")
    print(f"  whole plan p50 {np.median(whole):7.3f} s   max {max(whole):7.3f} s   "
          f"(cache fallbacks: {gone}; paper, Gurobi: max < 10 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chronus-jobs", type=int, default=2000)
    ap.add_argument("--chronus-nodes", type=int, default=48)
    ap.add_argument("--chronus-unit-s", type=float, default=60.0,
                    help="seconds per time unit of the Chronus trace (minutes: 60)")
    ap.add_argument("--pcs-trace", default="b436b2")
    ap.add_argument("--pcs-jobs", type=int, default=1000)
    ap.add_argument("--pcs-nodes", type=int, default=48)
    ap.add_argument("--mix", default="MIX2", help="SLO mix for the PCS trace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policies", default="unisched,unisched:profile_s=0,llf,hydra,themis,srsf,"
                    "fifo", help="comma-separated; name:key=value;key=value sets parameters")
    ap.add_argument("--milp-node-limit", type=int, default=NODE_LIMIT,
                    help="UniSched's HiGHS node budget per cycle in the simulations")
    ap.add_argument("--latency-jobs", type=int, default=BIG)
    ap.add_argument("--latency-nodes", type=int, default=32,
                    help="8-GPU nodes for the latency cycles (32: 256 GPUs, all busy)")
    ap.add_argument("--latency-cycles", type=int, default=5)
    ap.add_argument("--latency-node-limit", type=int, default=NODE_LIMIT)
    ap.add_argument("--quick", action="store_true", help="small workloads, 2 latency cycles")
    args = ap.parse_args()
    if args.quick:
        args.chronus_jobs, args.pcs_jobs, args.latency_cycles = 500, 300, 2
    specs = [s for s in args.policies.split(",") if s]
    print("bench_slo:", " ".join(f"{k}={v}" for k, v in vars(args).items()))
    print(f"scipy {scipy.__version__} (HiGHS), numpy {np.__version__}. fifo, srsf, themis run on "
          "the fluid engine (instant reallocation); unisched, llf, hydra on the round engine "
          "(300 s rounds; unisched also fills idle GPUs at arrivals and completions)")
    t0 = time.perf_counter()
    wl = chronus(args.chronus_jobs, args.chronus_unit_s)
    compare("Chronus Philly MIX1", wl, args.chronus_nodes, specs, args.milp_node_limit)
    compare(f"PCS {args.pcs_trace} + {args.mix} (seed {args.seed})",
            pcs(args.pcs_trace, args.pcs_jobs, args.mix, args.seed), args.pcs_nodes, specs,
            args.milp_node_limit)
    latency(wl, args.latency_jobs, args.latency_nodes, args.latency_cycles,
            args.latency_node_limit, args.seed)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
