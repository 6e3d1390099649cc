"""Warm start vs cold start for the nightly retune, on windows of trace 6c71a0.

Night 1 publishes a run on the newest ``--window`` jobs of the first ``--rows`` rows of
trace 6c71a0 (PCS's scaling tables, pcs-64, WFQ, avg JCT vs avg prediction error, PCS's SPEA2
settings). Overnight the trace grows by ``--grow`` jobs. Night 2 retunes on the new window
twice, with the same seed and budget: warm-started from night 1's front, and cold. Repeated
for each ``--rows`` (other days of the trace) and each of ``--seeds``. Both curves are the
hypervolume of everything evaluated so far (what an operator would get if the night ended
there) against evaluations, objectives scaled to [0, 1] between the ideal point and the nadir
of the two runs' final fronts together, reference point (1.1, 1.1). Printed: both curves, the
cold run's final hypervolume, the first evaluation count at which the warm run reaches it (the
target: at most half of the budget), the hypervolume of night 1's seeds alone on the new
window (how much of night 1's knowledge carried over), and how many distinct objective vectors
each run's evaluations found (the rest re-found a point already known).

Run from the project root: ``python benchmarks/bench_retune.py`` (4 to 8 minutes a pair of
nights on 2 cores, 23 minutes for the default four; ``--budget`` to shorten). Writes
``bench_retune.png`` (``--png``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pymoo.indicators.hv import HV
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from paretosearch.retune import RetuneOutcome, RetuneSpec, retune

PCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "pcs"
TRACE = PCS / "traces" / "trace_6c71a0.csv"
LABELS = ("jct:avg", "pred_err:avg")


def _night(folder: Path, rows: int, *, args: argparse.Namespace, seed: int,
           warm: bool) -> RetuneOutcome:
    """One retune on the first ``rows`` rows of the trace, published in ``folder/out``."""
    lines = TRACE.read_text().splitlines()
    (folder / "trace.csv").write_text("\n".join(lines[:1 + rows]) + "\n")
    spec = {"trace": "trace.csv", "scaling_table": str(PCS / "scaling_tables.csv"),
            "window": {"seconds": 1e9, "min_jobs": 100, "max_jobs": args.window},
            "profile": "pcs-64", "policy": "wfq", "objectives": list(LABELS),
            "search": {"budget": args.budget, "pop_size": 70, "offspring": args.offspring,
                       "seed": seed},
            "warm_start": warm, "out": "out", "workers": args.workers}
    (folder / "retune.yaml").write_text(yaml.safe_dump(spec))
    return retune(RetuneSpec.load(folder / "retune.yaml"))


def _evaluations(run: Path) -> np.ndarray:
    rows = [json.loads(line)["record"]
            for line in (run / "evaluations.jsonl").read_text().splitlines()]
    return np.array([[r[label] for label in LABELS] for r in rows])


def _nondominated(F: np.ndarray) -> np.ndarray:
    return np.asarray(F[NonDominatedSorting().do(F, only_non_dominated_front=True)])


def _curve(F: np.ndarray, lo: np.ndarray, span: np.ndarray, ref: np.ndarray,
           steps: list[int]) -> list[float]:
    """Hypervolume of the non-dominated set of the first n evaluations, for n in steps."""
    hv = HV(ref_point=ref)
    out = []
    for n in steps:
        out.append(float(hv(_nondominated((F[:n] - lo) / span))))
    return out


def _one(rows: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep / f"rows{rows}-seed{seed}" if args.keep else Path(tmp)
        warm_dir, cold_dir = base / "warm", base / "cold"
        warm_dir.mkdir(parents=True)
        cold_dir.mkdir()
        t0 = time.perf_counter()
        first = _night(warm_dir, rows, args=args, seed=seed, warm=True)
        t1 = time.perf_counter()
        warm = _night(warm_dir, rows + args.grow, args=args, seed=seed, warm=True)
        t2 = time.perf_counter()
        cold = _night(cold_dir, rows + args.grow, args=args, seed=seed, warm=False)
        t3 = time.perf_counter()
        assert warm.summary["warm_start"]["configs"] > 0
        Fw, Fc = _evaluations(warm.run)[:args.budget], _evaluations(cold.run)[:args.budget]
    # scaled by the ideal point and the nadir of the two final fronts together
    fronts = np.vstack([_nondominated(Fw), _nondominated(Fc)])
    lo, hi = fronts.min(axis=0), fronts.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    ref = np.full(2, 1.1)
    steps = list(range(10, args.budget + 1, 10))
    if steps[-1] != args.budget:
        steps.append(args.budget)
    cw, cc = _curve(Fw, lo, span, ref, steps), _curve(Fc, lo, span, ref, steps)
    target = cc[-1]
    seeds = warm.summary["warm_start"]["configs"]
    # how well night 1's knowledge carries over: its seeds, evaluated on the new window
    carried = _curve(Fw, lo, span, ref, [seeds])[0]
    reached = next((n for n, h in zip(steps, cw, strict=True) if h >= target), None)
    half = _curve(Fw, lo, span, ref, [args.budget // 2])[0]
    return {"rows": rows, "seed": seed, "steps": steps, "warm": cw, "cold": cc, "target": target,
            "reached": reached, "half": half, "seeds_from_night1": seeds, "carried": carried,
            "distinct": (len(np.unique(Fw, axis=0)), len(np.unique(Fc, axis=0))),
            "window": warm.summary["window"], "night1_front": first.summary["front_size"],
            "wall_s": (t1 - t0, t2 - t1, t3 - t2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", default="3000,6000,9000,12000",
                   help="trace rows on night 1, comma-separated: one pair of nights each")
    p.add_argument("--grow", type=int, default=300, help="jobs the trace gains overnight")
    p.add_argument("--window", type=int, default=2000, help="jobs in a window")
    p.add_argument("--budget", type=int, default=370, help="evaluations per night")
    p.add_argument("--offspring", type=int, default=105,
                   help="offspring per generation (population 70; PCS's setting: 105)")
    p.add_argument("--seeds", default="0", help="search seeds, comma-separated")
    p.add_argument("--workers", type=int, default=2, help="Dask LocalCluster workers")
    p.add_argument("--png", type=Path, default=Path("bench_retune.png"))
    p.add_argument("--keep", type=Path, help="keep the runs in this (new) folder")
    args = p.parse_args()
    results = [_one(int(rows), int(seed), args) for rows in args.rows.split(",")
               for seed in args.seeds.split(",")]
    for r in results:
        w, end = r["window"], r["rows"] + args.grow
        print(f"\nrows {r['rows']}, seed {r['seed']}: window of {w['jobs']} jobs (trace rows "
              f"{end - w['jobs']}..{end}); night 1 front "
              f"{r['night1_front']} configs -> {r['seeds_from_night1']} warm-start seeds; "
              f"wall s: night 1 {r['wall_s'][0]:.0f}, warm {r['wall_s'][1]:.0f}, "
              f"cold {r['wall_s'][2]:.0f}")
        print(f"{'evaluations':>12} {'cold HV':>9} {'warm HV':>9}")
        for n, c, h in zip(r["steps"], r["cold"], r["warm"], strict=True):
            print(f"{n:>12} {c:>9.4f} {h:>9.4f}")
        reached = r["reached"]
        verdict = ("never" if reached is None else
                   f"after {reached} evaluations ({reached / args.budget:.0%} of the budget)")
        print(f"cold final HV {r['target']:.4f}; warm reaches it {verdict}; night 1's "
              f"{r['seeds_from_night1']} seeds alone on the new window: HV {r['carried']:.4f}; "
              f"distinct objective vectors among the evaluations: warm {r['distinct'][0]}, "
              f"cold {r['distinct'][1]}")
    print(f"\n{'rows':>6} {'seed':>4} {'night-1 seeds':>13} {'warm at half':>12} "
          f"{'cold final':>10} {'warm final':>10}  warm reaches cold's final after")
    for r in results:
        reached = r["reached"]
        print(f"{r['rows']:>6} {r['seed']:>4} {r['carried']:>13.4f} {r['half']:>12.4f} "
              f"{r['target']:>10.4f} {r['warm'][-1]:>10.4f}  "
              + ("never" if reached is None else f"{reached} ({reached / args.budget:.0%})"))
    fractions = [r["reached"] / args.budget if r["reached"] else np.inf for r in results]
    print(f"\nwarm start reaches the cold run's final hypervolume within half the budget on "
          f"{sum(f <= 0.5 for f in fractions)} of {len(results)} pairs of nights "
          f"(fractions {', '.join(f'{f:.0%}' for f in fractions)})")
    _plot(results, args.png)
    print(f"curves plotted to {args.png}")


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(results), 4)
    rows = -(-len(results) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(results):]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, results, strict=False):
        ax.plot(r["steps"], r["cold"], label="cold start", color="tab:gray")
        ax.plot(r["steps"], r["warm"], label="warm start", color="tab:blue")
        ax.axhline(r["target"], ls=":", color="tab:gray")
        if r["reached"]:
            ax.axvline(r["reached"], ls=":", color="tab:blue")
        ax.set(title=f"rows {r['rows']}, seed {r['seed']}", xlabel="evaluations",
               ylabel="hypervolume")
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
