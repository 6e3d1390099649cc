"""Warm start vs cold start for the nightly retune, on windows of trace 6c71a0.

For each day (``--rows``: night 1 sees the first that many rows) and each search seed
(``--seeds``): night 1 publishes a run on the newest ``--window`` jobs (PCS's scaling tables,
pcs-64, WFQ, avg JCT vs avg prediction error, PCS's SPEA2 settings); overnight the trace grows
by ``--grow`` jobs; night 2 retunes on the new window twice with the same seed and budget,
warm-started from night 1 and cold. A curve is the hypervolume of everything a night evaluated
so far (what an operator would get if the night ended there) against evaluations, objectives
scaled between the ideal point and the nadir of that day's final fronts (every seed, warm and
cold), reference point (1.1, 1.1), so that a day's curves compare across seeds.

The target: the warm night reaches the cold night's final hypervolume within half the budget.
Printed per pair of nights (one seed): the cold night's final hypervolume, the warm night's at
half the budget and at the end, when it first reaches the cold one's final, and the
hypervolume of night 1's seeds alone on the new window (how much of night 1 carried over).
Per day, over the seeds: the median cold final, and when the median warm curve reaches it.

Nights run side by side in ``--processes`` processes, each evaluating serially (the same
results as on Dask: evaluations are pure and seeded). Run from the project root:
``python benchmarks/bench_retune.py`` (about 75 s a night per process on a 2-core machine:
the default 8 days x 3 seeds x 3 nights took 45 minutes). Writes ``bench_retune.png``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pymoo.indicators.hv import HV
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from paretosearch.service.retune import RetuneSpec, retune

PCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "pcs"
TRACE = PCS / "traces" / "trace_6c71a0.csv"
LABELS = ("jct:avg", "pred_err:avg")
FloatArray = np.ndarray


def _night(folder: Path, rows: int, *, args: argparse.Namespace, seed: int,
           warm: bool) -> Path:
    """One retune on the first ``rows`` rows of the trace, published in ``folder/out``."""
    lines = TRACE.read_text().splitlines()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.csv").write_text("\n".join(lines[:1 + rows]) + "\n")
    spec = {"trace": "trace.csv", "scaling_table": str(PCS / "scaling_tables.csv"),
            "window": {"seconds": 1e9, "min_jobs": 100, "max_jobs": args.window},
            "profile": "pcs-64", "policy": "wfq", "objectives": list(LABELS),
            "search": {"budget": args.budget, "pop_size": 70, "offspring": args.offspring,
                       "seed": seed},
            "warm_start": warm, "out": "out", "workers": 0}
    (folder / "retune.yaml").write_text(yaml.safe_dump(spec))
    return retune(RetuneSpec.load(folder / "retune.yaml")).run


def _evaluations(run: Path, budget: int) -> FloatArray:
    rows = [json.loads(line)["record"]
            for line in (run / "evaluations.jsonl").read_text().splitlines()]
    return np.array([[r[label] for label in LABELS] for r in rows])[:budget]


def _pair(rows: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Night 1, then night 2 warm and cold: each night's evaluations in order."""
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep / f"rows{rows}-seed{seed}" if args.keep else Path(tmp)
        _night(base / "warm", rows, args=args, seed=seed, warm=True)  # night 1: nothing before
        warm = _night(base / "warm", rows + args.grow, args=args, seed=seed, warm=True)
        cold = _night(base / "cold", rows + args.grow, args=args, seed=seed, warm=False)
        seeds = json.loads((warm / "retune-start.json").read_text())["warm_start"]["configs"]
        assert seeds > 0, "night 2 did not start from night 1"
        return {"rows": rows, "seed": seed, "warm": _evaluations(warm, args.budget),
                "cold": _evaluations(cold, args.budget), "seeds": seeds}


def _nondominated(F: FloatArray) -> FloatArray:
    return np.asarray(F[NonDominatedSorting().do(F, only_non_dominated_front=True)])


def _curve(F: FloatArray, lo: FloatArray, span: FloatArray, steps: list[int]) -> FloatArray:
    """Hypervolume of the non-dominated set of the first n evaluations, for n in steps."""
    hv = HV(ref_point=np.full(F.shape[1], 1.1))
    return np.array([float(hv(_nondominated((F[:n] - lo) / span))) for n in steps])


def _first(steps: list[int], curve: FloatArray, target: float) -> int | None:
    return next((n for n, h in zip(steps, curve, strict=True) if h >= target), None)


def _day(pairs: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    """One day's curves on one scale: the ideal and nadir of its final fronts."""
    fronts = np.vstack([_nondominated(p[k]) for p in pairs for k in ("warm", "cold")])
    lo, hi = fronts.min(axis=0), fronts.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    steps = sorted({*range(10, budget + 1, 10), budget // 2, budget})
    for p in pairs:
        p["steps"] = steps
        p["warm_hv"], p["cold_hv"] = (_curve(p[k], lo, span, steps) for k in ("warm", "cold"))
        p["target"] = p["cold_hv"][-1]
        p["half"] = p["warm_hv"][steps.index(budget // 2)]
        p["reached"] = _first(steps, p["warm_hv"], p["target"])
        p["carried"] = _curve(p["warm"], lo, span, [p["seeds"]])[0]
    warm = np.median([p["warm_hv"] for p in pairs], axis=0)
    cold = np.median([p["cold_hv"] for p in pairs], axis=0)
    return {"rows": pairs[0]["rows"], "pairs": pairs, "steps": steps, "warm": warm,
            "cold": cold, "target": float(cold[-1]), "reached": _first(steps, warm, cold[-1])}


def _fraction(n: int | None, budget: int) -> str:
    return "never" if n is None else f"{n} ({n / budget:.0%})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="3000,4500,6000,7500,9000,10500,12000,13500",
                   help="trace rows on night 1, comma-separated: one day each")
    p.add_argument("--seeds", default="0,1,2", help="search seeds, comma-separated")
    p.add_argument("--grow", type=int, default=300, help="jobs the trace gains overnight")
    p.add_argument("--window", type=int, default=2000, help="jobs in a window")
    p.add_argument("--budget", type=int, default=370, help="evaluations per night")
    p.add_argument("--offspring", type=int, default=105,
                   help="offspring per generation (population 70; PCS's setting: 105)")
    p.add_argument("--processes", type=int, default=2, help="pairs of nights run side by side")
    p.add_argument("--png", type=Path, default=Path("bench_retune.png"))
    p.add_argument("--keep", type=Path, help="keep the runs in this (new) folder")
    args = p.parse_args()
    todo = [(int(r), int(s)) for r in args.rows.split(",") for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.processes) as pool:
        done = list(pool.map(_pair, *zip(*todo, strict=True), [args] * len(todo)))
    days = [_day([d for d in done if d["rows"] == rows], args.budget)
            for rows in dict.fromkeys(r for r, _ in todo)]
    half = args.budget // 2
    print(f"{len(done)} pairs of nights in {time.perf_counter() - t0:.0f} s wall; curves: "
          f"hypervolume of all evaluations so far, each day on its own scale")
    print(f"\n{'rows':>6} {'seed':>4} {'night-1 seeds':>13} {'warm at half':>12} "
          f"{'cold final':>10} {'warm final':>10}  warm reaches cold's final after")
    for day in days:
        for r in day["pairs"]:
            print(f"{r['rows']:>6} {r['seed']:>4} {r['carried']:>13.4f} {r['half']:>12.4f} "
                  f"{r['target']:>10.4f} {r['warm_hv'][-1]:>10.4f}  "
                  f"{_fraction(r['reached'], args.budget)}")
    print(f"\nmedian over the seeds:\n{'rows':>6} {'cold final':>10} {'warm at half':>12} "
          f"{'warm final':>10}  median warm reaches median cold final after")
    for day in days:
        print(f"{day['rows']:>6} {day['target']:>10.4f} "
              f"{day['warm'][day['steps'].index(half)]:>12.4f} {day['warm'][-1]:>10.4f}  "
              f"{_fraction(day['reached'], args.budget)}")
    pairs = [r for day in days for r in day["pairs"]]
    within = sum(r["reached"] is not None and r["reached"] <= half for r in pairs)
    days_within = [day["rows"] for day in days
                   if day["reached"] is not None and day["reached"] <= half]
    print(f"\nwithin half the budget: {within} of {len(pairs)} pairs of nights; on the median, "
          f"{len(days_within)} of {len(days)} days ({', '.join(map(str, days_within)) or 'none'})")
    _plot(days, args.png)
    print(f"curves plotted to {args.png}")


def _plot(days: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    cols = min(len(days), 4)
    rows = -(-len(days) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.5 * rows), squeeze=False)
    for ax in axes.flat[len(days):]:
        ax.set_visible(False)
    for ax, day in zip(axes.flat, days, strict=False):
        for r in day["pairs"]:
            ax.plot(r["steps"], r["cold_hv"], color="tab:gray", lw=0.6, alpha=0.5)
            ax.plot(r["steps"], r["warm_hv"], color="tab:blue", lw=0.6, alpha=0.5)
        ax.plot(day["steps"], day["cold"], color="tab:gray", lw=2, label="cold start (median)")
        ax.plot(day["steps"], day["warm"], color="tab:blue", lw=2, label="warm start (median)")
        ax.axhline(day["target"], ls=":", color="tab:gray")
        ax.axvline(day["steps"][-1] // 2, ls="--", color="black", lw=0.8)
        ax.set(title=f"night 2 after night 1 on {day['rows']:,} rows",
               xlabel="evaluations (count)",
               ylabel="hypervolume (higher is better)")
        ax.grid(alpha=0.3)
    handles, _ = axes.flat[0].get_legend_handles_labels()
    handles += [Line2D([], [], ls=":", color="tab:gray", label="cold final (median)"),
                Line2D([], [], ls="--", color="black", lw=0.8, label="half the budget")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
    fig.suptitle("Hypervolume of everything evaluated so far; objectives scaled per day "
                 "between the ideal point (0) and the nadir (1) of its final fronts")
    fig.tight_layout(rect=(0, 0.06 / rows, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
