"""How well a search keeps a Dask cluster busy: generational vs asynchronous mode.

(a) Worker utilisation and speed-up for 1 to 64 workers, replaying evaluation times drawn
from a real run's ``records.parquet`` (its ``wall_s``, times ``--time-scale``; by default a
first generation of the unified policy at 1,000 jobs) and scoring candidates with a cheap
stand-in (ZDT1 over the encoded parameters). Evaluations run on a virtual clock
(:class:`VirtualCluster`): each lasts its recorded time, while the search's own work between
hearing a result and starting the next is measured in real time and delays new starts. So 64
workers are simulated honestly on 2 cores. Utilisation = time spent evaluating / (workers x
wall time); speed-up = time spent evaluating / wall time (against one worker that never
waits); hypervolume of the final ZDT1 front (reference (1.1, 1.1)), and that per wall-clock
minute. A cross-check runs both modes on a real Dask ``LocalCluster`` of ``--dask-workers``
in-process workers whose tasks sleep (past about 16, Dask's own work on 2 cores sets the
pace there, not the search).

(b) The front each mode reaches at equal evaluations, with real evaluations (the embedded
default problem: WFQ on a generated workload, pcs-64, avg JCT vs avg prediction error),
``--hv-seeds`` seeds: the asynchronous mode with ``--hv-slots`` candidates started at once,
finishing in the order they started (32: what 16 equally fast Dask workers hold). Hypervolume
with each seed's two final fronts scaled between their joint ideal and nadir, reference
(1.1, 1.1).

(c) With ``--real-workers N`` (for a machine with N cores or more): real evaluations of the
unified policy at ``--real-jobs`` jobs (the problem whose times (a) replays), ``--real-budget``
evaluations, first serially in the generational mode, then on a Dask ``LocalCluster`` of N
single-threaded worker processes in each mode. Speed-up = evaluations per second against the
serial run's (the generational mode evaluates the very same candidates at any worker count;
the asynchronous one other candidates of the same problem); utilisation = the workers' own
evaluation time / (N x wall time); hypervolume of each run's final front, the runs' fronts
scaled to their joint range, and that per wall-clock minute.

Run from the project root: ``python benchmarks/bench_scaling.py`` (about 10 minutes on a
2-core machine; ``--workers ''`` skips (a)).
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from paretosearch.objectives import parse_objectives
from paretosearch.search.runners import DaskRunner, SerialRunner
from paretosearch.search.spea2 import SearchSettings, run_spea2
from paretosearch.service.api import PolicySearch, SearchConfig

OBJECTIVES = ("jct:avg", "pred_err:avg")


def _replay(times: np.ndarray, scale: float, space: Any, *, sleep: bool) -> Any:
    """A task body that takes a recorded evaluation time (chosen by the candidate's content,
    so a candidate always takes the same time; slept if ``sleep``) and scores it with ZDT1."""
    def work(task: Any, batch: list[dict[str, Any]], workloads: Any, train: Any
             ) -> list[dict[str, float]]:
        out = []
        for params in batch:
            digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).digest()
            wall = float(times[int.from_bytes(digest[:8], "little") % len(times)]) * scale
            if sleep:
                time.sleep(wall)
            x = np.clip(np.array(space.encode(params), dtype=float), 0.0, 1.0)
            g = 1 + 9 * x[1:].mean() if len(x) > 1 else 1.0
            out.append({OBJECTIVES[0]: float(x[0]),
                        OBJECTIVES[1]: float(g * (1 - np.sqrt(x[0] / g))), "wall_s": wall})
        return out
    return work


class VirtualCluster:
    """``workers`` workers on a virtual clock: a started evaluation finishes its recorded
    duration later; the search's own work between hearing a result and starting the next
    (survival, breeding, journaling) is measured in real time and moves the clock on, during
    which nothing new starts. So 64 workers run on one core, and only the search's waiting and
    its own cost show."""

    def __init__(self, workers: int, work: Any) -> None:
        self.workers, self.work = workers, work
        self.clock = self.busy = 0.0
        self._left: float | None = None  # when the search last got control back (real time)

    @property
    def slots(self) -> int:
        return self.workers

    def _run(self, params: dict[str, Any]) -> tuple[dict[str, float], float]:
        record = self.work(None, [params], None, None)[0]
        self.busy += record["wall_s"]
        return record, record["wall_s"]

    def _charge(self) -> None:
        """Move the clock on by the search's own time since it last got control back."""
        if self._left is not None:
            self.clock += time.perf_counter() - self._left

    def map(self, task: Any, batch: Any, on_result: Any = None) -> list[dict[str, float]]:
        self._charge()
        free = [self.clock] * self.workers  # list scheduling: each takes the next when free
        out = []
        for i, params in enumerate(batch):
            start = heapq.heappop(free)
            record, wall = self._run(params)
            heapq.heappush(free, start + wall)
            out.append(record)
            if on_result is not None:
                on_result(i, record)
        self.clock = max(free)  # the generation ends with its last evaluation
        self._left = time.perf_counter()
        return out

    def stream(self, task: Any, first: Any, on_result: Any) -> None:
        self._charge()
        running: list[tuple[float, int, dict[str, Any], dict[str, float]]] = []
        seq = 0
        for params in first:
            record, wall = self._run(params)
            heapq.heappush(running, (self.clock + wall, seq, params, record))
            seq += 1
        while running:
            end, _, params, record = heapq.heappop(running)
            self.clock = max(self.clock, end)
            began = time.perf_counter()
            more = on_result(params, record)
            self.clock += time.perf_counter() - began
            for params in more:
                record, wall = self._run(params)
                heapq.heappush(running, (self.clock + wall, seq, params, record))
                seq += 1
        self._left = time.perf_counter()


def scaling(times: np.ndarray, args: argparse.Namespace) -> list[dict[str, Any]]:
    # only its task and space: the replay ignores the workload
    search = PolicySearch(config=SearchConfig(jobs=50))
    objectives = parse_objectives(OBJECTIVES)
    work = _replay(times, args.time_scale, search.space, sleep=False)
    rows = []
    for workers in args.workers:
        for mode in ("generational", "async"):
            settings = SearchSettings(budget=args.budget, seed=0, mode=mode)
            cluster = VirtualCluster(workers, work)
            out = run_spea2(search.task, search.space, objectives, cluster, settings)
            row = _row(workers, mode, len(out.evaluations), cluster.busy, cluster.clock)
            # ZDT1's own scale: its true front runs from (0, 1) to (1, 0)
            rows.append(_with_hv(row, _hypervolume(_losses(out), 0.0, 1.0)))
    return rows


def dask_check(times: np.ndarray, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The same on a real Dask ``LocalCluster`` whose tasks sleep (in-process workers: past
    16 or so, Dask's own work on 2 cores, not the search, sets the pace)."""
    from distributed import Client, LocalCluster

    search = PolicySearch(config=SearchConfig(jobs=50))
    objectives = parse_objectives(OBJECTIVES)
    work = _replay(times, args.time_scale, search.space, sleep=True)
    rows = []
    for mode in ("generational", "async"):
        settings = SearchSettings(budget=args.budget, seed=0, mode=mode)
        # in-process workers share this process's memory: no per-worker limit to pause at
        with LocalCluster(n_workers=args.dask_workers, threads_per_worker=1, processes=False,
                          memory_limit=0, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.wait_for_workers(args.dask_workers)
            runner = DaskRunner(client, search.train, search.train[0], work=work,
                                task_s=0.0)  # one evaluation a task, as a real one lasts
            start = time.perf_counter()
            out = run_spea2(search.task, search.space, objectives, runner, settings)
            wall = time.perf_counter() - start
        busy = sum(r["wall_s"] for _, r in out.evaluations)
        rows.append(_row(args.dask_workers, mode, len(out.evaluations), busy, wall))
    return rows


def _unified(jobs: int, settings: SearchSettings, run_dir: str | None = None) -> PolicySearch:
    """The realistic problem: the unified policy on ojpp-1080ti with sharing, SLO mix MIX2."""
    search = PolicySearch(config=SearchConfig(policy="unified", profile="ojpp-1080ti",
                                              sharing=True, slo_mix="MIX2", jobs=jobs,
                                              settings=settings), store=run_dir)
    search.SetPreference("jct:avg", "slo_miss:avg")
    return search


def _warm() -> None:
    """Run on each Dask worker before timing: import (and load the compiled kernels of) the
    simulator, as the serial run had before its clock started."""
    import paretosearch.search.evaluation  # noqa: F401


def real(args: argparse.Namespace) -> list[dict[str, Any]]:
    """(c) Real evaluations: serially, then on ``--real-workers`` Dask worker processes."""
    from distributed import Client, LocalCluster

    search = _unified(args.real_jobs, SearchSettings(budget=args.real_budget, seed=0))

    fronts: list[np.ndarray] = []

    def timed(runner: Any, mode: str) -> tuple[int, float, float]:
        settings = SearchSettings(budget=args.real_budget, seed=0, mode=mode)
        start = time.perf_counter()
        out = run_spea2(search.task, search.space, search.objectives, runner, settings)
        wall = time.perf_counter() - start
        fronts.append(_losses(out, search.objectives))
        return len(out.evaluations), sum(r["wall_s"] for _, r in out.evaluations), wall

    if args.real_serial_s:  # the generational mode evaluates the same candidates at any count
        rows, serial_rate = [], args.real_budget / args.real_serial_s
    else:
        n, busy, wall = timed(SerialRunner(search.train, search.train[0]), "generational")
        rows, serial_rate = [_row(1, "generational", n, busy, wall)], n / wall
    workers = args.real_workers
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        client.run(_warm)
        for mode in ("generational", "async"):
            n, busy, wall = timed(DaskRunner(client, search.train, search.train[0]), mode)
            rows.append(_row(workers, mode, n, busy, wall, speedup=n / wall / serial_rate))
    # every run's front scaled between the runs' joint ideal and nadir
    joint = np.vstack(fronts)
    return [_with_hv(row, _hypervolume(front, joint.min(axis=0), joint.max(axis=0)))
            for row, front in zip(rows, fronts, strict=True)]


def _row(workers: int, mode: str, evaluations: int, busy: float, wall: float,
         speedup: float | None = None) -> dict[str, Any]:
    """A figure: ``speedup`` defaults to busy / wall (against one worker that never waits)."""
    speedup = busy / wall if speedup is None else speedup
    print(f"{workers:>3} workers {mode:>12}: {evaluations} evaluations in {wall:7.1f} s, "
          f"utilisation {100 * busy / (workers * wall):5.1f} %, speed-up {speedup:.2f}x",
          flush=True)
    return {"workers": workers, "mode": mode, "evaluations": evaluations, "wall_s": wall,
            "utilisation": busy / (workers * wall), "speedup": speedup}


def _losses(out: Any, objectives: Any = OBJECTIVES) -> np.ndarray:
    """A search's final front as an array of losses."""
    objectives = parse_objectives(objectives)
    return np.array([[o.loss(r[o.label]) for o in objectives] for _, r in out.front],
                    dtype=float)


def _hypervolume(front: np.ndarray, lo: Any, hi: Any) -> float:
    """Hypervolume of ``front`` scaled so ``lo`` -> 0 and ``hi`` -> 1, reference 1.1."""
    from pymoo.indicators.hv import HV

    lo, hi = np.broadcast_to(lo, front.shape[1]), np.broadcast_to(hi, front.shape[1])
    span = np.where(hi > lo, hi - lo, 1.0)
    return float(HV(ref_point=np.full(front.shape[1], 1.1))((front - lo) / span))


def _with_hv(row: dict[str, Any], hv: float) -> dict[str, Any]:
    """``row`` with the hypervolume its search reached and that per wall-clock second."""
    return {**row, "hypervolume": hv, "hv_per_s": hv / row["wall_s"]}


def _table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'workers':>7} {'mode':>12} {'wall s':>8} {'utilisation':>11} {'speed-up':>8}"
          f" {'hypervolume':>11} {'hv / min':>8}")
    for r in rows:
        hv = f" {r['hypervolume']:>11.4f} {60 * r['hv_per_s']:>8.3f}" if "hypervolume" in r else ""
        print(f"{r['workers']:>7} {r['mode']:>12} {r['wall_s']:>8.1f} "
              f"{100 * r['utilisation']:>10.1f}% {r['speedup']:>7.2f}x{hv}")


def _front_of(seed: int, mode: str, budget: int, args: argparse.Namespace
              ) -> tuple[np.ndarray, int]:
    """The final front (losses) of one real search, evaluated serially, and how many
    evaluations it ran."""
    settings = SearchSettings(budget=budget, seed=seed, mode=mode)
    search = PolicySearch(config=SearchConfig(jobs=args.hv_jobs, settings=settings))
    search.SetPreference(*OBJECTIVES)
    slots = args.hv_slots if mode == "async" else 1
    runner = SerialRunner(search.train, search.train[0], slots=slots)
    out = run_spea2(search.task, search.space, search.objectives, runner, settings)
    return _losses(out), len(out.evaluations)


def fronts(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Both modes' fronts per seed: the asynchronous one given as many evaluations as the
    generational one ran (whole generations: 385 for a budget of 370)."""
    seeds = list(range(args.hv_seeds))
    with ProcessPoolExecutor(args.processes) as pool:
        gen = list(pool.map(_front_of, seeds, ["generational"] * len(seeds),
                            [args.hv_budget] * len(seeds), [args] * len(seeds)))
        asy = list(pool.map(_front_of, seeds, ["async"] * len(seeds), [n for _, n in gen],
                            [args] * len(seeds)))
    rows = []
    for seed, (g, _), (a, _) in zip(seeds, gen, asy, strict=True):
        lo, hi = np.vstack([g, a]).min(axis=0), np.vstack([g, a]).max(axis=0)
        hv = {mode: _hypervolume(front, lo, hi)
              for mode, front in (("generational", g), ("async", a))}
        rows.append({"seed": seed, **hv, "ratio": hv["async"] / hv["generational"]})
        print(f"seed {seed}: hypervolume generational {hv['generational']:.4f}, async "
              f"{hv['async']:.4f} ({100 * (hv['async'] / hv['generational'] - 1):+.2f} %)",
              flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=Path,
                   help="records.parquet of a real run (default: run 70 evaluations of the "
                        "unified policy first: 1,000 jobs, ojpp-1080ti, sharing, MIX2)")
    p.add_argument("--workers", type=lambda s: [int(w) for w in s.split(",") if w],
                   default=[1, 2, 4, 8, 16, 32, 64], help="replayed worker counts of (a)")
    p.add_argument("--budget", type=int, default=2000, help="evaluations per replayed search")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="replayed evaluation times are the recorded ones times this")
    p.add_argument("--dask-workers", type=int, default=16,
                   help="workers of the real Dask cross-check (0: skip it)")
    p.add_argument("--hv-seeds", type=int, default=5)
    p.add_argument("--hv-budget", type=int, default=370)
    p.add_argument("--hv-jobs", type=int, default=500, help="jobs per generated sample (b)")
    p.add_argument("--hv-slots", type=int, default=32,
                   help="candidates the async mode holds started in (b): 32 is what 16 Dask "
                        "workers get (one running and one waiting each)")
    p.add_argument("--processes", type=int, default=2, help="searches of (b) side by side")
    p.add_argument("--real-workers", type=int, default=0,
                   help="Dask worker processes of (c), real evaluations (0: skip it)")
    p.add_argument("--real-budget", type=int, default=385)
    p.add_argument("--real-jobs", type=int, default=1000)
    p.add_argument("--real-serial-s", type=float,
                   help="wall time of (c)'s serial run, measured before on the same machine "
                        "at the same budget and jobs (skips it)")
    p.add_argument("--json", type=Path, help="also write every figure here")
    args = p.parse_args()
    rows: list[dict[str, Any]] = []
    dask_rows: list[dict[str, Any]] = []
    if args.workers or args.dask_workers:
        times = _times(args.records)
        print(f"replaying {len(times)} recorded evaluation times: median "
              f"{np.median(times):.3f} s, p90 {np.percentile(times, 90):.3f} s, max "
              f"{times.max():.3f} s, times {args.time_scale}\n")
    if args.workers:
        print("virtual clock (the search's own time real, evaluations replayed):")
        rows = scaling(times, args)
        _table(rows)
    if args.dask_workers:
        print(f"\nreal Dask LocalCluster of {args.dask_workers} sleeping workers:")
        dask_rows = dask_check(times, args)
        _table(dask_rows)
    hv = []
    if args.hv_seeds:
        print(f"\nfronts at a budget of {args.hv_budget} real evaluations ({args.hv_jobs} jobs, "
              f"async with {args.hv_slots} started at once):")
        hv = fronts(args)
        ratios = [r["ratio"] for r in hv]
        print(f"median async / generational hypervolume: {statistics.median(ratios):.4f} "
              f"(spread {min(ratios):.4f} .. {max(ratios):.4f})")
    real_rows = []
    if args.real_workers:
        print(f"\nreal evaluations (unified policy, {args.real_jobs} jobs), serial and "
              f"{args.real_workers} Dask worker processes:")
        real_rows = real(args)
        _table(real_rows)
    if args.json:
        args.json.write_text(json.dumps({"scaling": rows, "dask": dask_rows, "hypervolume": hv,
                                         "real": real_rows}, indent=1))


def _times(records: Path | None) -> np.ndarray:
    """Evaluation times to replay: a real run's, or those of a first generation of the
    unified policy at realistic scale, run here."""
    if records is None:
        with tempfile.TemporaryDirectory() as tmp:
            _unified(1000, SearchSettings(budget=70, n_offsprings=35, seed=0), tmp).run()
            records = Path(tmp) / "records.parquet"
            return pd.read_parquet(records)["wall_s"].to_numpy()
    return pd.read_parquet(records)["wall_s"].to_numpy()


if __name__ == "__main__":
    main()
