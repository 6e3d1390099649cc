"""Search quality and speed on PCS's set-up for trace 0e4a51 (PCS §5.4, Fig. 9c).

(a) Our default search (370 evaluations; ``--pcs``: PCS's settings, population 70, offspring
    105) on a 2001-job workload generated from ``cdf-*-workload_0e4a51.csv`` at load 0.8 on
    64 GPUs, objectives avg JCT vs avg prediction error, on a 2-worker Dask LocalCluster:
    wall time, and the hypervolume of our front against PCS's stored front, both simulated
    by our simulator on the same workload sample, with one reference point for both.
(b) SPEA2 against random search with the same budget (hypervolume, same reference point).
(c) Evaluation throughput serially and on Dask with 1 and 2 workers: speed-up and overhead.

Run from the project root: ``python benchmarks/bench_search.py`` (``--budget`` to shorten).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from distributed import Client, LocalCluster
from pymoo.indicators.hv import HV
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from paretosearch.objectives import parse_objectives
from paretosearch.search.evaluation import SearchSpace, Task
from paretosearch.search.runners import DaskRunner, SerialRunner
from paretosearch.search.spea2 import SearchSettings, run_spea2
from simulator import generate_from_cdfs, load_profile, parametric_table

PCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "pcs"
OBJECTIVES = parse_objectives(["jct:avg", "pred_err:avg"])


def _F(records: list[dict[str, float]]) -> np.ndarray:
    return np.array([[r[o.label] for o in OBJECTIVES] for r in records])


def _cluster(workers: int) -> tuple[LocalCluster, Client]:
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    return cluster, Client(cluster)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--budget", type=int, default=370)
    p.add_argument("--pcs", action="store_true",
                   help="PCS's search settings (population 70, offspring 105)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", default="1,2", help="worker counts for (c), e.g. 1,2,4,8,16")
    p.add_argument("--evaluations", type=int, default=48, help="evaluations timed in (c)")
    p.add_argument("--only-scaling", action="store_true", help="run (c) only")
    args = p.parse_args()
    workload = generate_from_cdfs(PCS / "workloads", "workload_0e4a51",
                                  scaling=parametric_table(64), n_jobs=2001, load=0.8, gpus=64,
                                  seed=4567, models=("linear",))
    task = Task("wfq", load_profile("pcs-64"))
    space = SearchSpace.of("wfq")
    counts = [int(w) for w in args.workers.split(",")]
    if args.only_scaling:
        _scaling(task, space, workload, counts, args.evaluations)
        return
    stored = json.loads((PCS / "fronts" / "WFQ_trace_0e4a51_avg_pred_error_vs_avg_jct.json")
                        .read_text())
    pcs_params = [dict(zip(("T", "W", "zeta_min", "delta"), s["variables"], strict=True))
                  for s in stored["population"]]

    cluster, client = _cluster(2)
    with cluster, client:
        runner = DaskRunner(client, [workload], workload)
        t0 = time.perf_counter()
        settings = (SearchSettings.pcs(args.budget, args.seed) if args.pcs
                    else SearchSettings(budget=args.budget, seed=args.seed))
        out = run_spea2(task, space, OBJECTIVES, runner, settings)
        wall = time.perf_counter() - t0
        ours = _F([r for _, r in out.front])
        theirs = _F(runner.map(task, pcs_params))
        rng = np.random.default_rng(args.seed)
        random_pts = [space.decode(x) for x in rng.random((len(out.evaluations), len(space)))]
        rand = _F(runner.map(task, random_pts))
    # one reference point for all: 10 % beyond the worst point of the three fronts' non-dominated
    # members (a far point such as a 8000 % error would flatten every difference)
    fronts = [F[NonDominatedSorting().do(F, only_non_dominated_front=True)]
              for F in (ours, theirs, rand)]
    both = np.vstack(fronts)
    ideal, ref = both.min(axis=0), both.max(axis=0) * 1.1
    box = float(np.prod(ref - ideal))
    hv = {name: float(HV(ref_point=ref)(F)) / box for name, F in
          zip(("ours", "pcs", "random"), fronts, strict=True)}
    print("(a) PCS set-up, trace 0e4a51: 2001 jobs from the CDFs, load 0.8, 64 GPUs, "
          "avg JCT vs avg pred_err")
    print(f"    SPEA2 {len(out.evaluations)} evaluations on 2 Dask workers: {wall:.1f} s wall "
          f"(PCS's run: {stored['computing_time_s']:.0f} s computing time; target <= 600 s)")
    print(f"    hypervolume (fraction of the box from the ideal point to the reference point "
          f"{ref[0]:.4g} s, {ref[1]:.4g} %): ours {hv['ours']:.4f}, "
          f"PCS's stored front re-simulated {hv['pcs']:.4f} "
          f"-> ratio {hv['ours'] / hv['pcs']:.3f} (target >= 1)")
    print(f"(b) random search, {len(random_pts)} evaluations: hypervolume {hv['random']:.4f} "
          f"-> SPEA2 / random = {hv['ours'] / hv['random']:.3f}")
    _scaling(task, space, workload, counts, args.evaluations)


def _scaling(task: Task, space: SearchSpace, workload: Any, counts: list[int],
             evaluations: int) -> None:
    rng = np.random.default_rng(1)
    batch = [space.decode(x) for x in rng.random((evaluations, len(space)))]
    t0 = time.perf_counter()
    serial = SerialRunner([workload], workload).map(task, batch)
    t_serial = time.perf_counter() - t0
    print(f"(c) {evaluations} evaluations: serial {t_serial:.2f} s", flush=True)
    walls = {}
    for workers in counts:
        cluster, client = _cluster(workers)
        with cluster, client:
            runner = DaskRunner(client, [workload], workload)
            runner.map(task, batch[:workers])  # warm the workers (imports, compiled kernels)
            t0 = time.perf_counter()
            records = runner.map(task, batch)
            walls[workers] = time.perf_counter() - t0
        assert [r["jct:avg"] for r in records] == [r["jct:avg"] for r in serial]
        print(f"    {workers} worker{'s' if workers > 1 else ''}: {walls[workers]:.2f} s "
              f"({t_serial / walls[workers]:.2f}x serial)", flush=True)
    if 1 in walls and 2 in walls:
        print(f"    speed-up 1 -> 2 workers {walls[1] / walls[2]:.2f}x (target >= 1.7x); Dask "
              f"overhead per evaluation {100 * (walls[1] - t_serial) / t_serial:.1f} % "
              f"(target < 5 %); identical records on every runner")


if __name__ == "__main__":
    main()
