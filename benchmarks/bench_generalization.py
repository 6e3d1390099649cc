"""Do published fronts hold up on unseen data? (issue 40)

Each problem is searched per seed exactly as ``PolicySearch.run`` does (train on the training
sample, re-evaluate the front and the baselines on the test sample) and scored on the test
sample by three figures:

  dom%    share of the published entries that some baseline dominates on the test sample
  train%  share that some baseline dominates already on the training sample: there the family,
          as searched, loses to the baseline (it is not a failure to generalise)
  HV      test hypervolume of the front and of the baselines (their non-dominated set), in
          one box per problem and seed: from 0 (one span below the best, for a maximised
          metric) to 10 % beyond the worst test value of either, as a share of it
          (``HypervolumeBox``); ``HV>=`` says whether the front's is at least the baselines'
  rho     Spearman rank correlation, over the front, of each objective's training and test
          values (NaN with fewer than 3 distinct entries)

Problems (``--problems``):
  wfq       the embedded default: WFQ on generated jobs (``--jobs``, 1,000 by default),
            independent draws for training and test (``--replicates`` of each; the
            search's default where not given)
  0e4a51    PCS trace 0e4a51 (first half trains, second half tests; ``--trace-jobs`` from
  b436b2    its start, all by default) and trace b436b2, with PCS's scaling table; any other
            PCS trace by its id (6214e9, 6c71a0, ee9e8c) the same way
  unified   the unified problem of ``bench_optimizers.py`` (three objectives; replicates
            as for wfq)

Targets (issue 40), median over seeds: dom% <= 20, rho >= 0.8 for each objective, HV>=.

With ``--run-dir DIR`` each search keeps its run in ``DIR/PROBLEM-SEED`` (journal, front) and
every evaluation, test-sample ones included, in ``DIR/cache.sqlite``: the same command run
again resumes each unfinished search where it stopped and re-scores finished ones from the
cache, so a run longer than one sitting (the whole b436b2: about 2 CPU-hours a seed) can be
done in several.

Searches run in parallel, one per process (``--workers``; each evaluates serially). Small,
on a shared laptop: ``python benchmarks/bench_generalization.py --problems wfq --seeds 0
--budget 60 --jobs 400``; full, on 16 cores: ``python benchmarks/bench_generalization.py
--workers 14``.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from paretosearch.objectives import dominates
from paretosearch.runs.records import BaselineWarning
from paretosearch.search.cache import EvaluationCache
from paretosearch.search.spea2 import HypervolumeBox, SearchSettings
from paretosearch.service.api import PolicySearch, SearchConfig
from simulator import ScalingTable, Workload, read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_optimizers import PROBLEMS as OPTIMIZER_PROBLEMS

PCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "pcs"
PROBLEMS = ("wfq", "0e4a51", "b436b2", "unified")


def _search(problem: str, seed: int, args: argparse.Namespace) -> PolicySearch:
    """The problem's search for ``seed``, kept under ``--run-dir`` if given."""
    config, workload = _problem(problem, seed, args)
    if args.run_dir is None:
        return PolicySearch(workload, config)
    return PolicySearch(workload, config, store=args.run_dir / f"{problem}-{seed}",
                        cache=EvaluationCache(args.run_dir / "cache.sqlite"))


def _problem(problem: str, seed: int, args: argparse.Namespace
             ) -> tuple[SearchConfig, Workload | None]:
    settings = SearchSettings(budget=args.budget, seed=seed)
    objectives = tuple(args.objective) if args.objective else None
    if problem == "unified":
        default, spec = OPTIMIZER_PROBLEMS["unified"]
        return SearchConfig(**{**spec, "replicates": args.replicates},
                            objectives=objectives or default, settings=settings), None
    config = SearchConfig(objectives=objectives or SearchConfig.objectives, settings=settings,
                          jobs=args.jobs, load=args.load,
                          replicates=args.replicates if problem == "wfq" else None)
    if problem == "wfq":
        return config, None
    trace = read_trace(PCS / "traces" / f"trace_{problem}.csv",
                       scaling=ScalingTable.from_csv(PCS / "scaling_tables.csv"))
    return config, trace.head(args.trace_jobs) if args.trace_jobs else trace


def score(problem: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One search and its figures on the test sample."""
    logging.getLogger("distributed").setLevel(logging.ERROR)
    start = time.perf_counter()
    search = _search(problem, seed, args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BaselineWarning)  # the figures say it
        front = search.run(resume=search.store is not None
                           and (search.store.path / "run.json").exists())
    objectives = search.objectives

    def losses(records: list[Any]) -> np.ndarray[Any, Any]:
        return np.array([[o.loss(r[o.label]) for o in objectives] for r in records])

    F = losses([e.test_metrics for e in front])
    B = losses(list(search.baselines_test.values()))
    box = HypervolumeBox.of(np.vstack([F, B]))
    rho = []
    for o in objectives:
        train = [e.metrics[o.label] for e in front]
        test = [e.test_metrics[o.label] for e in front if e.test_metrics]
        distinct = len(set(train)) >= 3 and len(set(test)) >= 3
        rho.append(float(spearmanr(train, test).statistic) if distinct else float("nan"))
    on_train = [any(dominates(b, e.metrics, objectives) for b in search.baselines.values())
                for e in front]
    return {"problem": problem, "seed": seed, "front": len(front),
            "dominated": sum(e.dominated for e in front) / len(front),
            "train": sum(on_train) / len(front),
            "hv_front": box.share(F), "hv_base": box.share(B), "rho": rho,
            "objectives": [o.label for o in objectives], "wall_s": time.perf_counter() - start}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", default=",".join(PROBLEMS),
                   help=f"comma-separated, of {', '.join(PROBLEMS)} or another PCS trace's id "
                        "(default: the four named)")
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated (default: 0-4)")
    p.add_argument("--budget", type=int, default=SearchSettings.budget,
                   help="evaluations per search (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=SearchConfig.jobs,
                   help="jobs per generated sample of wfq (default: %(default)s)")
    p.add_argument("--load", type=float, default=SearchConfig.load,
                   help="offered load of wfq's generated samples (default: %(default)s)")
    p.add_argument("--replicates", type=int, default=SearchConfig.replicates,
                   help="generated samples per evaluation of wfq and unified (default: the "
                        "search's)")
    p.add_argument("--trace-jobs", type=int, default=0,
                   help="first N jobs of each PCS trace (default: all)")
    p.add_argument("--objective", action="append", metavar="METRIC:MEASURE",
                   help="objectives instead of each problem's (repeatable)")
    p.add_argument("--workers", type=int, default=1, help="searches run at once (default: 1)")
    p.add_argument("--run-dir", type=Path, metavar="DIR",
                   help="keep each search's run and every evaluation here; run again to "
                        "resume (default: nothing kept)")
    args = p.parse_args()
    runs = [(problem, int(seed)) for problem in args.problems.split(",")
            for seed in args.seeds.split(",")]
    import policies  # noqa: F401  # compiled (or loaded) once, before the workers fork

    _header(args)
    rows = []
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("fork")
                             ) if args.workers > 1 else nullcontext() as pool:
        done = (pool.map(score, *zip(*runs, strict=True), [args] * len(runs)) if pool
                else (score(problem, seed, args) for problem, seed in runs))
        for row in done:  # each seed's row as it comes: a long run stopped early keeps them
            rows.append(row)
            _row(row)
    _medians(rows)


def _header(args: argparse.Namespace) -> None:
    print(f"budget {args.budget}, wfq: {args.jobs} jobs at load {args.load} x "
          f"{args.replicates or 'default'} replicates, "
          f"traces: {args.trace_jobs or 'all'} jobs")
    print(f"{'problem':<9}{'seed':>5}{'front':>6}{'dom%':>6}{'train%':>7}{'HV front':>9}"
          f"{'HV base':>8}"
          f"{'HV>=':>5}  rho per objective{'':<14}{'wall s':>7}", flush=True)


def _row(r: dict[str, Any]) -> None:
    rho = " ".join(f"{v:5.2f}" for v in r["rho"])
    print(f"{r['problem']:<9}{r['seed']:>5}{r['front']:>6}{100 * r['dominated']:>6.0f}"
          f"{100 * r['train']:>7.0f}{r['hv_front']:>9.3f}{r['hv_base']:>8.3f}"
          f"{'yes' if r['hv_front'] >= r['hv_base'] else 'no':>5}  {rho:<31}"
          f"{r['wall_s']:>7.0f}", flush=True)


def _medians(rows: list[dict[str, Any]]) -> None:
    print("median over seeds (targets: dom% <= 20, rho >= 0.8 each, HV front >= HV base)")
    for problem in dict.fromkeys(r["problem"] for r in rows):
        mine = [r for r in rows if r["problem"] == problem]
        with warnings.catch_warnings():  # a problem whose fronts were all too small: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            rho = np.nanmedian(np.array([r["rho"] for r in mine]), axis=0)
        dom = float(np.median([r["dominated"] for r in mine]))
        lost = float(np.median([r["train"] for r in mine]))
        hv_f = float(np.median([r["hv_front"] for r in mine]))
        hv_b = float(np.median([r["hv_base"] for r in mine]))
        met = dom <= 0.2 and bool((rho >= 0.8).all()) and hv_f >= hv_b
        print(f"{problem:<9}{'med':>5}{'':>6}{100 * dom:>6.0f}{100 * lost:>7.0f}{hv_f:>9.3f}"
              f"{hv_b:>8.3f}"
              f"{'yes' if hv_f >= hv_b else 'no':>5}  "
              f"{' '.join(f'{v:5.2f}' for v in rho):<31}  "
              f"{' / '.join(mine[0]['objectives'])}: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
