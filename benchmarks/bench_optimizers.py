"""Our search against what an operator would run instead, at equal evaluations.

Each problem is searched, per seed, by our default search and by five alternatives: pymoo's
NSGA-II (its defaults: population 100, SBX η=15, PM η=20), Optuna's NSGA-II, TPE and random
samplers (``optuna.create_study(directions=...)`` with the sampler's defaults) and plain
uniform random search. All search the same space (``SearchSpace.decode`` of the unit cube;
choices by index) on the same training sample, serially, and every evaluation is counted.

Problems (``--problems``):
  wfq       the embedded default as it was when these figures were measured: WFQ,
            generated 1,000-job workload at load 0.9, pcs-64, avg JCT vs avg prediction error
  wfq-pcs   PCS's set-up of ``bench_search.py``: WFQ, 2,001 jobs drawn from trace 0e4a51's
            CDFs at load 0.8 on pcs-64, avg JCT vs avg prediction error
  unisched  UniSched, generated 200-job workload (load 0.9) with SLO mix MIX2, pcs-64, SLO
            miss rate vs avg best-effort JCT
  unified   the unified policy, generated 300-job workload (load 0.9), ojpp-1080ti, sharing,
            MIX2: avg JCT, SLO miss rate and GPUs in use (three objectives)

Hypervolume: per problem and seed, every method's points are normalised by the front of all
the points any method evaluated (its ideal point 0, its nadir 1), reference point 1.1 on each
objective. Where one point dominates all the others, that front has no nadir: each objective
it does not span is scaled to the worst value on any method's own front instead.
Our search is scored by the front it publishes (its archive, run once per budget); the
others by the non-dominated set of their first N evaluations (Optuna's ``best_trials``).
Printed: median and range over seeds per budget, each method against random search, and a
plot of the median hypervolume against evaluations (``--plot``).

Run from the project root: ``python benchmarks/bench_optimizers.py`` (``--quick``: one
problem, 3 seeds, budgets 100 and 370). ``--runs FILE`` keeps every run's points
(``--first-seed``: add later seeds in another run);
``--rescore FILE...`` scores kept runs together without searching again (e.g. after
re-running only ``--methods ours``).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.problem import Problem
from pymoo.indicators.hv import HV
from pymoo.problems.static import StaticProblem
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from paretosearch.search.runners import SerialRunner
from paretosearch.search.spea2 import SearchSettings, run_spea2
from paretosearch.service.api import PolicySearch, SearchConfig
from simulator import generate_from_cdfs, load_profile, parametric_table

PCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "pcs"
METHODS = ("ours", "pymoo-nsga2", "optuna-nsga2", "optuna-tpe", "optuna-random", "random")
PROBLEMS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {  # objectives, PolicySearch
    # one generated sample each (replicates 1) at load 0.9, as the figures quoted were measured
    "wfq": (("jct:avg", "pred_err:avg"), {"policy": "wfq", "jobs": 1000, "load": 0.9,
                                          "replicates": 1}),
    "wfq-pcs": (("jct:avg", "pred_err:avg"), {"policy": "wfq"}),
    "unisched": (("slo_miss:avg", "be_jct:avg"),
                 {"policy": "unisched", "jobs": 200, "slo_mix": "MIX2", "load": 0.9,
                  "replicates": 1}),
    "unified": (("jct:avg", "slo_miss:avg", "gpus_used:avg"),
                {"policy": "unified", "jobs": 300, "profile": "ojpp-1080ti", "sharing": True,
                 "slo_mix": "MIX2", "load": 0.9, "replicates": 1}),
}


@functools.cache
def _problem(name: str, seed: int) -> PolicySearch:
    """The problem's search (its task, space, objectives and training sample) for a seed."""
    objectives, spec = PROBLEMS[name]
    if name == "wfq-pcs":  # one fixed sample, as bench_search.py draws it
        workload = generate_from_cdfs(PCS / "workloads", "workload_0e4a51",
                                      scaling=parametric_table(64), n_jobs=2001, load=0.8,
                                      gpus=64, seed=4567, models=("linear",))
        search = PolicySearch(workload, SearchConfig(profile=load_profile("pcs-64"),
                                                     settings=SearchSettings(seed=seed)))
    else:
        search = PolicySearch(config=SearchConfig(**spec, settings=SearchSettings(seed=seed)))
    search.SetPreference(*objectives)
    return search


def _losses(search: PolicySearch, records: Sequence[dict[str, float]]) -> list[list[float]]:
    return [[o.loss(r[o.label]) for o in search.objectives] for r in records]


def _unit(search: PolicySearch, u: Sequence[float]) -> dict[str, Any]:
    """The parameters at a point of the unit cube."""
    return search.space.decode(search.space.unit_codes(u))


def run_one(problem: str, seed: int, method: str, budget: int) -> dict[str, Any]:
    """One search: the losses of every evaluation in order, and for ours its published front."""
    logging.getLogger("distributed").setLevel(logging.ERROR)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search = _problem(problem, seed)
    runner = SerialRunner(search.train, search.train[0])

    def evaluate(batch: list[dict[str, Any]]) -> list[list[float]]:
        return _losses(search, runner.map(search.task, batch))

    start = time.perf_counter()
    front: list[list[float]] | None = None
    if method == "ours":
        out = run_spea2(search.task, search.space, search.objectives, runner,
                        SearchSettings(budget=budget, seed=seed))
        points = _losses(search, [r for _, r in out.evaluations])
        front = _losses(search, [r for _, r in out.front])
    elif method == "random":
        rng = np.random.default_rng(seed)
        points = evaluate([_unit(search, u) for u in rng.random((budget, len(search.space)))])
    elif method == "pymoo-nsga2":
        points = _pymoo(search, seed, budget, evaluate)
    else:
        points = _optuna(search, seed, budget, method, evaluate)
    return {"problem": problem, "seed": seed, "method": method, "budget": budget,
            "points": points, "front": front, "wall_s": time.perf_counter() - start}


def _pymoo(search: PolicySearch, seed: int, budget: int,
           evaluate: Callable[[list[dict[str, Any]]], list[list[float]]]) -> list[list[float]]:
    algorithm = NSGA2()
    problem = Problem(n_var=len(search.space), n_obj=len(search.objectives), xl=0.0, xu=1.0)
    algorithm.setup(problem, termination=("n_eval", budget), seed=seed, verbose=False)
    points: list[list[float]] = []
    while algorithm.has_next() and len(points) < budget:
        pop = algorithm.ask()
        F = evaluate([_unit(search, x) for x in pop.get("X")])
        points += F
        algorithm.evaluator.eval(StaticProblem(problem, F=np.array(F)), pop)
        algorithm.tell(infills=pop)
    return points[:budget]


def _optuna(search: PolicySearch, seed: int, budget: int, method: str,
            evaluate: Callable[[list[dict[str, Any]]], list[list[float]]]) -> list[list[float]]:
    sampler = {"optuna-nsga2": optuna.samplers.NSGAIISampler,
               "optuna-tpe": optuna.samplers.TPESampler,
               "optuna-random": optuna.samplers.RandomSampler}[method](seed=seed)
    study = optuna.create_study(directions=["minimize"] * len(search.objectives),
                                sampler=sampler)
    points: list[list[float]] = []

    def objective(trial: optuna.Trial) -> list[float]:
        codes = {n: trial.suggest_categorical(n, list(range(len(d.choices))))
                 if d.kind == "choice" else trial.suggest_float(n, 0.0, 1.0)
                 for n, d in zip(search.space.names, search.space.domains, strict=True)}
        points.append(evaluate([search.space.decode(codes)])[0])
        return points[-1]

    study.optimize(objective, n_trials=budget)
    return points


def _nondominated(points: np.ndarray) -> np.ndarray:
    points = points[np.isfinite(points).all(axis=1)]
    keep = NonDominatedSorting().do(points, only_non_dominated_front=True)
    return np.asarray(points[keep], dtype=np.float64)


def score(runs: list[dict[str, Any]], budgets: Sequence[int]) -> list[dict[str, Any]]:
    """Hypervolume per problem, seed, method and budget (normalised per problem and seed),
    and the curve of hypervolume against evaluations."""
    rows = []
    for problem, seed in sorted({(r["problem"], r["seed"]) for r in runs}):
        mine = [r for r in runs if (r["problem"], r["seed"]) == (problem, seed)]
        union = _nondominated(np.vstack([np.array(r["points"]) for r in mine]))
        lo, hi = union.min(axis=0), union.max(axis=0)
        if (hi <= lo).any():  # one point dominates every other: span the methods' own fronts
            fronts = np.vstack([_nondominated(np.array(r["points"])) for r in mine])
            hi = np.where(hi > lo, hi, fronts.max(axis=0))
        span = np.where(hi > lo, hi - lo, 1.0)
        hv = HV(ref_point=np.full(len(lo), 1.1))

        def volume(points: np.ndarray, lo: np.ndarray = lo, span: np.ndarray = span,
                   hv: HV = hv) -> float:
            front = _nondominated(points)
            return float(hv((front - lo) / span)) if len(front) else 0.0

        for r in mine:
            pts = np.array(r["points"])
            if r["method"] == "ours":  # one run per budget, scored by its published front
                rows.append({**_key(r), "budget": r["budget"], "evaluations": len(pts),
                             "hv": volume(np.array(r["front"]))})
                continue
            rows += [{**_key(r), "budget": b, "evaluations": min(b, len(pts)),
                      "hv": volume(pts[:b])} for b in budgets]
        for r in mine:  # the curve, from the longest run of each method
            if r["budget"] == max(budgets):
                pts = np.array(r["points"])
                grid = range(10, len(pts) + 1, 10)
                rows.append({**_key(r), "budget": "curve",
                             "curve": [[n, volume(pts[:n])] for n in grid]})
    return rows


def _key(run: dict[str, Any]) -> dict[str, Any]:
    return {"problem": run["problem"], "seed": run["seed"], "method": run["method"]}


def report(rows: list[dict[str, Any]], budgets: Sequence[int]) -> list[str]:
    """The table, and each target's verdict (returned as lines, printed)."""
    lines, verdicts = [], []
    for problem in dict.fromkeys(r["problem"] for r in rows):
        seeds = sorted({r["seed"] for r in rows if r["problem"] == problem})
        lines.append(f"\n{problem} ({len(seeds)} seeds: median hypervolume [min, max])")
        lines.append(f"{'method':>14} " + " ".join(f"{b:>22}" for b in budgets))
        med: dict[tuple[str, int], float] = {}
        for method in METHODS:
            cells = []
            for b in budgets:
                hv = [r["hv"] for r in rows if (r["problem"], r["method"], r["budget"])
                      == (problem, method, b)]
                if not hv:
                    cells.append(f"{'-':>22}")
                    continue
                med[method, b] = float(np.median(hv))
                cells.append(f"{med[method, b]:.3f} [{min(hv):.3f}, {max(hv):.3f}]".rjust(22))
            lines.append(f"{method:>14} " + " ".join(cells))
        for b in budgets:
            others = [v for (m, bb), v in med.items() if bb == b and m != "ours"]
            if ("ours", b) not in med or ("random", b) not in med or not others:
                continue
            ours, rand = med["ours", b], med["random", b]
            gain = f"{100 * (ours / rand - 1):+.1f} %" if rand > 0 else "n/a"
            verdicts.append(f"{problem} @ {b}: ours {ours:.3f}, best other {max(others):.3f}, "
                            f"random {rand:.3f} (ours {gain} vs random)")
    return [*lines, "", *verdicts]


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig, axes = plt.subplots(1, len(problems), figsize=(5 * len(problems), 4), squeeze=False)
    for ax, problem in zip(axes[0], problems, strict=True):
        for method in METHODS:
            curves = [r["curve"] for r in rows if (r["problem"], r["method"], r["budget"])
                      == (problem, method, "curve")]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            x = [c[0] for c in curves[0][:n]]
            y = np.median([[v for _, v in c[:n]] for c in curves], axis=0)
            ax.plot(x, y, label=method, lw=2.5 if method == "ours" else 1.2)
        ax.set(title=problem, xlabel="evaluations", ylabel="hypervolume (median over seeds)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="lower right")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--problems", default="wfq,wfq-pcs,unisched,unified",
                   help=f"comma-separated, of: {', '.join(PROBLEMS)}")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0,
                   help="search seeds FIRST to FIRST+SEEDS-1 (to add seeds to kept --runs)")
    p.add_argument("--budgets", default="100,370,1000", help="evaluations, comma-separated")
    p.add_argument("--max-budget", default="",
                   help="per-problem cap on the budgets, e.g. unisched=370,unified=370")
    p.add_argument("--processes", type=int, default=2, help="searches side by side")
    p.add_argument("--quick", action="store_true", help="wfq only, 3 seeds, budgets 100, 370")
    p.add_argument("--json", type=Path, help="write every run's scores here")
    p.add_argument("--runs", type=Path, help="write every run's points here (JSON lines)")
    p.add_argument("--rescore", type=Path, nargs="+", metavar="RUNS",
                   help="search nothing: score the runs these --runs files hold (of the "
                        "problems, methods and seeds asked for), together")
    p.add_argument("--plot", type=Path, default=Path("docs/bench_optimizers.png"),
                   help="hypervolume against evaluations (default: docs/bench_optimizers.png, "
                        "the README's)")
    args = p.parse_args()
    if args.quick:
        args.problems, args.seeds, args.budgets = "wfq", 3, "100,370"
    budgets = sorted(int(b) for b in args.budgets.split(","))
    caps = {k: int(v) for k, v in (c.split("=") for c in args.max_budget.split(",") if c)}
    jobs = []
    for problem in args.problems.split(","):
        mine = [b for b in budgets if b <= caps.get(problem, max(budgets))]
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for method in args.methods.split(","):
                for b in (mine if method == "ours" else mine[-1:]):
                    jobs.append((problem, seed, method, b))
    jobs.sort(key=lambda j: -j[3])  # longest first, for an even finish
    runs = _saved(args.rescore, set(jobs)) if args.rescore else _search(jobs, args)
    rows = []
    for problem in args.problems.split(","):
        mine = [b for b in budgets if b <= caps.get(problem, max(budgets))]
        rows += score([r for r in runs if r["problem"] == problem], mine)
    print("\n".join(report(rows, budgets)))
    plot(rows, args.plot)
    print(f"\nplot: {args.plot}")
    if args.json:
        tmp = args.json.with_name(f".{args.json.name}.tmp")
        tmp.write_text(json.dumps(rows))
        tmp.replace(args.json)


def _search(jobs: list[tuple[str, int, str, int]], args: argparse.Namespace
            ) -> list[dict[str, Any]]:
    runs = []
    with ProcessPoolExecutor(args.processes) as pool:
        for run in pool.map(run_one, *zip(*jobs, strict=True)):
            print(f"{run['problem']:>9} seed {run['seed']} {run['method']:>13} "
                  f"budget {run['budget']:>5}: {len(run['points'])} evaluations in "
                  f"{run['wall_s']:6.1f} s", flush=True)
            runs.append(run)
            if args.runs:
                with args.runs.open("a") as f:
                    f.write(json.dumps(run) + "\n")
    return runs


def _saved(files: Sequence[Path], jobs: set[tuple[str, int, str, int]]
           ) -> list[dict[str, Any]]:
    """The saved runs of ``jobs`` (the last of each where a run was saved twice); every job
    must be there."""
    found = {}
    for path in files:
        for line in path.read_text().splitlines():
            run = json.loads(line)
            job = (run["problem"], run["seed"], run["method"], run["budget"])
            if job in jobs:
                found[job] = run
    missing = sorted(jobs - found.keys())
    if missing:
        raise SystemExit(f"{len(missing)} runs asked for are in no --rescore file, e.g. "
                         f"{missing[0]}: run them with --runs FILE first")
    return list(found.values())


if __name__ == "__main__":
    main()
