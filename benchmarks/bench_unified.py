"""The unified policy's front against each single family's, same objectives and budget.

The issue's must-hold (SPEC §3.7, §4): on a mixed workload - best-effort and SLO jobs,
co-locatable jobs, a heterogeneous cluster - search ``unified`` and each single family
(``wfq-hetero``: WFQ classes + per-type weights, ``unisched``: leases + rewards, ``hadar``:
heterogeneity, ``horus`` and ``ojpp``: interference bounds) with SPEA2 under the same
objectives, budget and seed, then compare the fronts: hypervolume of each (all fronts
normalised by the union's min / max, one reference point at 1.1 in every coordinate),
the share of each family's front weakly dominated by some unified point and vice versa,
and whether the unified front dominates each family's front and their union. The same on
the held-out test half.

Workload: Gavel's continuous-multiple generator over its measured throughputs (per-type
speeds and the measured pairwise co-location matrix attached), arrivals and durations
divided by ``--time-scale`` (Gavel's jobs run up to ~7 days; the round engine's cost grows
with makespan / round length; at 25 the longest job runs ~6.5 h on a V100 and one
simulation of the 80-job train half takes 0.1-6 s), SYNTHETIC sharing requirements
(``add_sharing``, device memory of the smallest GPU of the profile) and UniSched's MIX2 SLO
mix (strict + soft + best-effort), on ``gavel-hetero-60`` (20 V100 + 20 P100 + 20 K80).
160 jobs at 8 jobs/h (Gavel time) arrive in a burst of ~0.75 h offering ~5x the cluster,
so jobs queue and the cluster then drains for 6-40 h. PolicySearch splits it: the first
half of the arrivals trains, the second half tests.

Objectives (minimisation form for every comparison): ``be_jct:avg`` (best-effort JCT),
``slo_miss:avg`` (UniSched eq. 15: 1 - reward obtained / 100 over SLO jobs) and
``gpu_util_sum:avg`` (maximised: time-average GPU utilization with co-located jobs' summed,
capped at 1 per GPU; exclusive policies get it from their jobs' utilizations too). It is
averaged over the makespan, so it also rewards draining the burst quickly (a job left on a
slow GPU at the end lowers it).

On the 2-core development machine the full run took 200-230 s with 2 Dask workers (one
LocalCluster shared by all searches) and 330 s serially (``--workers 0``); ``--quick`` ~45 s
either way.

Every figure is printed, none asserted. Run from the project root:
``python benchmarks/bench_unified.py`` (``--quick``: smaller workload and budget).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pymoo.indicators.hv import HV
from rich.console import Console
from rich.table import Table

from paretosearch.objectives import Objective, parse_objectives
from paretosearch.runs.records import FrontEntry
from paretosearch.search.spea2 import Progress, SearchSettings
from paretosearch.service.api import PolicySearch, SearchConfig, split_workload
from simulator import Workload, load_profile
from simulator.inputs.generate import add_sharing, add_slos
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.slo import BEST_EFFORT, SOFT, STRICT
from simulator.inputs.throughput import ThroughputTable, generate_gavel

ROOT = Path(__file__).resolve().parents[1]
GAVEL = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
CONSOLE = Console(width=170, highlight=False)
FloatArray = npt.NDArray[np.float64]

FAMILIES = ("unified", "wfq-hetero", "unisched", "hadar", "horus", "ojpp")
WHAT = {"unified": "all four families", "wfq-hetero": "WFQ classes + per-type weights",
        "unisched": "leases + rewards", "hadar": "heterogeneity",
        "horus": "interference bounds", "ojpp": "interference bounds"}
OBJECTIVES = ("be_jct:avg", "slo_miss:avg", "gpu_util_sum:avg")
REF = 1.1
"""The reference point in every normalised coordinate."""


# ---------------------------------------------------------------- workload


def build_workload(profile: ClusterProfile, jobs: int, rate: float, scale: float,
                   seed: int) -> Workload:
    """Gavel continuous-multiple, time-compressed by ``scale``, + sharing + MIX2 SLOs.

    Durations are divided before the SLOs are drawn, so deadlines follow the scaled
    durations. ``replace`` keeps ``type_speed`` and ``interference`` (``from_frame`` would
    drop them).
    """
    table = ThroughputTable.from_gavel_json(GAVEL)
    wl = generate_gavel(table, jobs, jobs_per_hr=rate, seed=seed)
    wl = replace(wl, arrival_s=wl.arrival_s / scale, service_s=wl.service_s / scale,
                 estimated_service_s=wl.estimated_service_s / scale,
                 source=f"{wl.source} / {scale:g}")
    memory = min(g.gpu_memory_gib for g in profile.node_groups)
    wl = add_sharing(wl, device_memory_gib=memory, seed=seed + 1)
    return add_slos(wl, "MIX2", seed=seed + 2)


def describe_workload(wl: Workload, profile: ClusterProfile) -> None:
    """Size, offered load, and what the train / test split keeps."""
    run_s = wl.duration_s
    gpu_s = run_s * wl.gpus
    assert wl.type_speed is not None
    # capacity in V100-equivalents: each type's median speed over the models
    speeds = dict(zip(wl.type_speed.types, np.median(wl.type_speed.speed, axis=0),
                      strict=True))
    capacity = sum(n * speeds.get(t, 1.0) for t, n in profile.gpus_by_type.items())
    span = float(wl.arrival_s[-1] - wl.arrival_s[0])
    print(f"workload: {wl.source}; {len(wl)} jobs over {span / 3600:.2f} h of arrivals; "
          f"run time at full demand on V100 median {np.median(run_s) / 60:.1f} min, "
          f"p90 {np.percentile(run_s, 90) / 3600:.2f} h, max {run_s.max() / 3600:.2f} h; "
          f"GPUs 1/2/4/8: {'/'.join(str(int((wl.gpus == g).sum())) for g in (1, 2, 4, 8))}")
    print(f"  offered load over the arrival span: {gpu_s.sum() / (profile.total_gpus * span):.2f}"
          f" of {profile.total_gpus} GPUs at V100 speed, "
          f"{gpu_s.sum() / (capacity * span):.2f} of their {capacity:.1f} V100-equivalents "
          f"(median per-type speeds {', '.join(f'{t} {s:.2f}' for t, s in speeds.items())})")
    train, test = split_workload(wl)
    half = len(train)
    checks = []
    for name, part, rows in (("train", train, slice(0, half)), ("test", test, slice(half, None))):
        slos, sharing, orig_slos, orig_sh = part.slos, part.sharing, wl.slos, wl.sharing
        assert orig_slos is not None and orig_sh is not None
        same_slo = (slos is not None and np.array_equal(slos.job_class, orig_slos.job_class[rows])
                    and np.allclose(slos.deadlines_s, orig_slos.deadlines_s[rows],
                                    rtol=1e-12, equal_nan=True)
                    and np.allclose(slos.rewards, orig_slos.rewards[rows], equal_nan=True))
        same_share = sharing is not None and all(
            np.allclose(a, b[rows], rtol=1e-12) for a, b in
            zip(sharing.columns().values(), orig_sh.columns().values(), strict=True))
        same_types = part.type_speed is wl.type_speed
        same_inter = part.interference is wl.interference
        cls = slos.job_class if slos is not None else np.zeros(0)
        checks.append(all((same_slo, same_share, same_types, same_inter)))
        print(f"  {name}: {len(part)} jobs, strict/soft/best-effort "
              f"{int((cls == STRICT).sum())}/{int((cls == SOFT).sum())}/"
              f"{int((cls == BEST_EFFORT).sum())}; SLOs kept {_yn(same_slo)}, sharing columns "
              f"kept {_yn(same_share)}, type speeds kept {_yn(same_types)}, interference "
              f"matrix kept {_yn(same_inter)}")
    if not all(checks):
        print("  WARNING: the train/test split lost part of the workload (see above)")


def _yn(ok: bool) -> str:
    return "yes" if ok else "NO"


# ---------------------------------------------------------------- searching


@dataclass
class Outcome:
    """One family's search: its front (train and test objective vectors) and its costs."""

    family: str
    names: tuple[str, ...]
    dropped: dict[str, str]
    front: list[FrontEntry]
    baselines: dict[str, dict[str, float]]
    evaluations: int = 0
    simulated: int = 0
    wall_s: float = 0.0
    search_s: float = 0.0
    sim_s: list[float] = field(default_factory=list)

    def vectors(self, objectives: Sequence[Objective], test: bool = False) -> FloatArray:
        """The front's objective vectors in minimisation form (rows with NaN dropped)."""
        F = np.array([[o.loss((e.test_metrics or {} if test else e.metrics).get(o.label,
                                                                                 np.nan))
                       for o in objectives] for e in self.front],
                     dtype=np.float64).reshape(-1, len(objectives))
        return F[~np.isnan(F).any(axis=1)]


def search_family(family: str, workload: Workload, profile: ClusterProfile,
                  objectives: Sequence[Objective], settings: SearchSettings,
                  client: Any) -> Outcome:
    """Run one family's search on the shared workload (the same split, budget and seed)."""
    t0 = time.perf_counter()
    search = PolicySearch(workload, SearchConfig(profile=profile, policy=family,
                                                 settings=settings), client=client, workers=0)
    search.SetPreference(*objectives)
    last: list[Progress] = []
    t1 = time.perf_counter()

    def report(progress: Progress) -> None:
        last.append(progress)
        print(f"    {family}: generation {progress.generation}, {progress.evaluations} / "
              f"{settings.budget} evaluations, front {len(progress.front)}, "
              f"{time.perf_counter() - t1:.0f} s", flush=True)

    front = search.run(on_generation=report)
    search_s = time.perf_counter() - t1
    progress = last[-1]
    return Outcome(family, tuple(search.space.names), dict(search.space.dropped), front,
                   search.baselines, progress.evaluations, len(progress.evaluated),
                   time.perf_counter() - t0, search_s,
                   [r["wall_s"] for _, r in progress.evaluated])


@contextmanager
def dask_client(workers: int) -> Iterator[Any]:
    """One LocalCluster shared by every family's search (None: serial evaluation)."""
    if workers <= 0:
        yield None
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1,  # type: ignore[no-untyped-call]
                      processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:  # type: ignore[no-untyped-call]
        yield client


# ---------------------------------------------------------------- comparing


def non_dominated(F: FloatArray) -> FloatArray:
    """The rows of ``F`` no other row dominates (duplicates kept once)."""
    F = np.unique(F, axis=0)
    keep = [i for i in range(len(F))
            if not any(np.all(F[j] <= F[i]) and np.any(F[j] < F[i])
                       for j in range(len(F)) if j != i)]
    return F[keep]


def covered(A: FloatArray, B: FloatArray) -> float:
    """Share of ``B``'s points weakly dominated by some point of ``A`` (Zitzler's C(A, B))."""
    if len(B) == 0:
        return math.nan
    if len(A) == 0:
        return 0.0
    hit = np.all(A[None, :, :] <= B[:, None, :], axis=2)
    return float(np.mean(np.any(hit, axis=1)))


def compare(fronts: dict[str, FloatArray], title: str) -> None:
    """HV of every front (common normalisation and reference) and dominance against unified."""
    fronts = {k: non_dominated(F) for k, F in fronts.items() if len(F)}
    if "unified" not in fronts:
        print(f"{title}: the unified front is empty (NaN objectives?); nothing to compare")
        return
    singles = [k for k in fronts if k != "unified"]
    union = non_dominated(np.vstack([fronts[k] for k in singles])) if singles else \
        np.zeros((0, fronts["unified"].shape[1]))
    allF = np.vstack(list(fronts.values()))
    lo, hi = allF.min(axis=0), allF.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    hv = HV(ref_point=np.full(allF.shape[1], REF))

    def norm(F: FloatArray) -> FloatArray:
        out: FloatArray = (F - lo) / span
        return out

    U = fronts["unified"]
    t = Table(title=f"{title}: hypervolume in the union-normalised box (ideal 0, reference "
              f"{REF:g} per coordinate; max {REF ** allF.shape[1]:.3f}); C(A, B) = share of B's "
              "points weakly dominated by some point of A", title_justify="left")
    for col in ("front", "points", "HV", "HV / unified", "C(unified, front)",
                "C(front, unified)", "unified dominates it", "best be_jct h",
                "best slo_miss", "best gpu_util_sum"):
        t.add_column(col, justify="left" if col == "front" else "right")
    hv_u = float(hv(norm(U)))
    rows = [("unified", U)] + [(k, fronts[k]) for k in singles]
    if len(singles) > 1:
        rows.append(("union of single families", union))
    for name, F in rows:
        h = float(hv(norm(F)))
        mine = name == "unified"
        c_uf, c_fu = covered(U, F), covered(F, U)
        t.add_row(name, str(len(F)), f"{h:.4f}", f"{h / hv_u:.3f}" if hv_u > 0 else "-",
                  "-" if mine else f"{100 * c_uf:.0f} %", "-" if mine else f"{100 * c_fu:.0f} %",
                  "-" if mine else _yn(c_uf == 1.0).lower(),
                  f"{F[:, 0].min() / 3600:.2f}", f"{F[:, 1].min():.3f}", f"{-F[:, 2].min():.3f}")
    CONSOLE.print(t)
    beaten = [k for k in singles if covered(U, fronts[k]) == 1.0]
    higher = [k for k in singles if float(hv(norm(fronts[k]))) > hv_u]
    print(f"  unified dominates {len(beaten)} of {len(singles)} single-family fronts"
          f"{' (' + ', '.join(beaten) + ')' if beaten else ''}; the union of them: "
          f"{_yn(covered(U, union) == 1.0).lower() if len(union) else '-'}; single families "
          f"with a larger HV than unified: {', '.join(higher) if higher else 'none'}")


# ---------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--quick", action="store_true",
                   help="80 jobs and a budget of 24 (pop 8, offspring 8): a smoke run < 60 s")
    p.add_argument("--jobs", type=int, default=None, help="jobs, both halves (default 160; "
                   "--quick 80)")
    p.add_argument("--rate", type=float, default=8.0,
                   help="Gavel arrivals per hour before time scaling (default 8)")
    p.add_argument("--time-scale", type=float, default=25.0,
                   help="divide arrivals and durations by this (default 25)")
    p.add_argument("--budget", type=int, default=None,
                   help="evaluations per family (default 60; --quick 24)")
    p.add_argument("--pop", type=int, default=None, help="population (default 12; --quick 8)")
    p.add_argument("--offsprings", type=int, default=None,
                   help="offspring per generation (default 12; --quick 8)")
    p.add_argument("--seed", type=int, default=0, help="workload and search seed (default 0)")
    p.add_argument("--workers", type=int, default=2,
                   help="Dask LocalCluster workers shared by all searches; 0: serial "
                   "(default 2)")
    p.add_argument("--families", default=",".join(FAMILIES),
                   help=f"comma-separated, must include unified (default {','.join(FAMILIES)})")
    p.add_argument("--profile", default="gavel-hetero-60", help="cluster profile")
    args = p.parse_args()
    t_start = time.perf_counter()
    jobs = args.jobs or (80 if args.quick else 160)
    budget = args.budget or (24 if args.quick else 60)
    pop = args.pop or (8 if args.quick else 12)
    offsprings = args.offsprings or (8 if args.quick else 12)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if "unified" not in families:
        p.error("--families must include unified")
    objectives = parse_objectives(OBJECTIVES)
    settings = SearchSettings(budget=budget, pop_size=pop, n_offsprings=offsprings,
                              seed=args.seed)

    print("command: python benchmarks/bench_unified.py " + shlex.join(sys.argv[1:]))
    profile = load_profile(args.profile)
    print(f"cluster: {profile.name}, {profile.total_gpus} GPUs {dict(profile.gpus_by_type)}, "
          f"restart {profile.restart_overhead_s:g} s")
    wl = build_workload(profile, jobs, args.rate, args.time_scale, args.seed)
    describe_workload(wl, profile)
    print(f"objectives: {', '.join(o.label + (' (max)' if o.maximize else '') for o in objectives)}"
          f"; SPEA2 budget {budget} evaluations per family, population {pop}, offspring "
          f"{offsprings}, seed {args.seed}; "
          + (f"{args.workers} Dask workers (one LocalCluster for all families)"
             if args.workers > 0 else "serial evaluation"))
    print("(each search also re-simulates its front on the test half and PolicySearch's "
          "reference baselines on the train half)", flush=True)

    outcomes: dict[str, Outcome] = {}
    t0 = time.perf_counter()
    with dask_client(args.workers) as client:
        start_s = time.perf_counter() - t0
        if client is not None:
            print(f"LocalCluster started in {start_s:.1f} s", flush=True)
        for family in families:
            out = search_family(family, wl, profile, objectives, settings, client)
            outcomes[family] = out
            print(f"  {family:<11} done: {out.simulated} simulations in the search, front "
                  f"{len(out.front)}, {out.wall_s:.1f} s", flush=True)

    t = Table(title="searches (same workload, objectives, budget and seed); sim s: the search's "
              "own simulations of the train half (their sum is what a serial search spends)",
              title_justify="left")
    right = ("evals (unique)", "front", "wall s", "sim s sum", "sim s mean / max",
             "front makespan h", "dims searched", "dropped")
    for col in ("family", "what it searches", *right):
        t.add_column(col, justify="right" if col in right else "left")
    for f, o in outcomes.items():
        span = [e.metrics["makespan:avg"] / 3600 for e in o.front]
        t.add_row(f, WHAT.get(f, ""), f"{o.evaluations} ({o.simulated})", str(len(o.front)),
                  f"{o.wall_s:.1f}", f"{sum(o.sim_s):.1f}",
                  f"{np.mean(o.sim_s):.2f} / {np.max(o.sim_s):.2f}",
                  f"{min(span):.1f}-{max(span):.1f}", str(len(o.names)), str(len(o.dropped)))
    CONSOLE.print(t)
    for f, o in outcomes.items():
        why = "; ".join(f"{n} ({r})" for n, r in _grouped(o.dropped))
        print(f"  {f} searches {', '.join(o.names)}" + (f"; drops {why}" if why else
                                                          "; drops nothing"))

    compare({f: o.vectors(objectives) for f, o in outcomes.items()},
            "train half (the searched sample)")
    compare({f: o.vectors(objectives, test=True) for f, o in outcomes.items()},
            "test half (each front re-simulated on the held-out jobs)")
    baselines(outcomes, objectives)
    print(f"total wall time {time.perf_counter() - t_start:.1f} s (this machine: "
          f"{_cpus()} CPUs; other processes may share them)")


def _grouped(dropped: dict[str, str]) -> list[tuple[str, str]]:
    """Dropped parameters grouped by reason: ``("a, b", reason)``."""
    by: dict[str, list[str]] = {}
    for name, why in dropped.items():
        by.setdefault(why, []).append(name)
    return [(", ".join(names), why) for why, names in by.items()]


def baselines(outcomes: dict[str, Outcome], objectives: Sequence[Objective]) -> None:
    """PolicySearch's reference policies (same train half) against the unified front."""
    U = non_dominated(outcomes["unified"].vectors(objectives))
    verdict: dict[str, list[str]] = {}
    for name, rec in outcomes["unified"].baselines.items():
        v = np.array([o.loss(rec[o.label]) for o in objectives])
        nan = [o.label for o, x in zip(objectives, v, strict=True) if math.isnan(x)]
        key = (f"n/a ({', '.join(nan)} is NaN)" if nan else
               "dominated" if covered(U, v[None, :]) == 1.0 else "NOT dominated")
        verdict.setdefault(key, []).append(name)
    print("PolicySearch's reference baselines (train half) against the unified train front: "
          + "; ".join(f"{k}: {', '.join(v)}" for k, v in verdict.items()))


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)


if __name__ == "__main__":
    main()
