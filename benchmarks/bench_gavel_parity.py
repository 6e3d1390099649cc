"""Our ``gavel`` policy against Gavel's own simulator, run by run (tests/fixtures/gavel).

For each of Gavel's reference runs (4 traces x FIFO, FIFO_Perf, LAS = ``max_min_fairness``,
Gavel = ``max_min_fairness_perf``, and finish-time fairness agnostic and ``_perf``, on the
``gavel-108`` profile) prints: the average JCT beside Gavel's, the share of jobs within 5 %
and within 1e-6 of Gavel's JCT, and the simulation's CPU seconds. The LP policies run three
ways: with ECOS (the default, Gavel's solver), with HiGHS (``lp="highs"``), and with Gavel's
own allocations replayed, which isolates the rounds from the solver; for the first two it
prints the first allocation reset that differs from Gavel's by more than 1e-3 (the jobs
concerned, both sides). Finish-time fairness runs with ECOS, and replayed where Gavel's
allocations were recorded (``_perf``). Beside Gavel's agnostic FIFO it also runs ``yarn-cs``
(the YARN-CS of Tiresias's simulator, which Gavel does not have): how far the nearest Gavel
policy is from it.
Jobs Gavel drops (5 failed rounds) are left out, as its own average does. Run from the
project root:
``python benchmarks/bench_gavel_parity.py``.

``--more`` compares instead every run of ``tests/fixtures/gavel/more`` (traces Gavel's
generator made, three cluster shapes, six policies; its README): per run, our average JCT
over the jobs we kept against Gavel's over the jobs it kept, whether we dropped the same
jobs, the share of jobs within 5 % and exactly (1e-6) Gavel's, and, for the solved policies,
the share exact with Gavel's allocations replayed. ``--csv FILE`` also writes that table
(docs/fidelity/gavel.md shows it). ``--makespan`` prints the same table for the runs of
``tests/fixtures/gavel/makespan`` (Gavel's ``min_total_duration`` and ``_perf`` on the
traces of both sets), ``--max-sum`` for those of ``tests/fixtures/gavel/maxsum`` (its
``max_sum_throughput_perf``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.gavel import (  # noqa: E402  (after the path is set)
    FIXTURES,
    MAKESPAN,
    MAX_SUM,
    MORE,
    POLICIES,
    TRACES,
    TYPES,
    GavelsAllocations,
    Run,
    gavels_allocations,
    more_runs,
    recording,
    reference,
    twins_sorted,
    workload,
)


def run(trace: str, policy: Any) -> tuple[np.ndarray, float, list[tuple[float, dict[int, Any]]]]:
    """JCTs, CPU seconds and the allocations computed at each reset (Gavel's policies)."""
    from simulator import load_profile, simulate

    seen = recording(policy) if hasattr(policy, "allocate") else []
    wl = workload(trace)
    t0 = time.process_time()
    res = simulate(wl, load_profile("gavel-108"), policy)
    return np.asarray(res.finish_s) - wl.arrival_s, time.process_time() - t0, seen


def first_difference(trace: str, name: str, ours: list[tuple[float, dict[int, Any]]],
                     jobs: int = 3) -> str:
    """The first reset whose allocation differs by more than 1e-3, both sides."""
    gavel = gavels_allocations(FIXTURES / f"{trace}__{name}.alloc.jsonl.gz")
    for (t, x), (then, theirs) in zip(ours, gavel, strict=False):
        if abs(t - then) > 1e-6:
            return (f"    resets part: ours at {t:.3f} s, Gavel at {then:.3f} s (every "
                    "allocation until then within 1e-3 of Gavel's)")
        gap = {j: np.abs(x[j] - theirs[j]).max() for j in x if j in theirs}
        if max(gap.values(), default=0.0) > 1e-3:
            worst = sorted(gap, key=lambda j: -gap[j])[:jobs]
            lines = [f"    first differing reset at {t:.1f} s ({len(x)} jobs, "
                     f"{sum(g > 1e-3 for g in gap.values())} differ by > 1e-3); x on "
                     f"{'/'.join(TYPES)}:"]
            lines += [f"      job {j:>3}: ours {np.round(x[j], 3)}  Gavel {np.round(theirs[j], 3)}"
                      for j in worst]
            return "\n".join(lines)
    return "    every allocation agrees within 1e-3"


def compare(ref: pd.DataFrame, jct: np.ndarray) -> tuple[float, float, float]:
    kept = ref.jct_s.notna().to_numpy()
    theirs = ref.jct_s.to_numpy()[kept]
    rel = np.abs(jct[kept] - theirs) / theirs
    return (100 * (jct[kept].mean() / theirs.mean() - 1), 100 * (rel <= 0.05).mean(),
            100 * (rel <= 1e-6).mean())


def more_row(run: Run) -> dict[str, Any]:
    """Our run of one of ``more/``'s against Gavel's (module docstring)."""
    from policies.hetero.gavel import Gavel
    from simulator import load_profile, simulate, summary

    wl, profile = workload(run.trace, run.traces), load_profile(run.cluster)
    ref = reference(run.trace, run.policy, run.where)
    params = run.params
    t0 = time.process_time()
    res = simulate(wl, profile, Gavel(**params))
    cpu = time.process_time() - t0
    kept = ref.jct_s.notna().to_numpy()
    theirs = twins_sorted(ref, ref.jct_s)
    ours = twins_sorted(ref, np.asarray(res.finish_s) - wl.arrival_s)
    rel = np.abs(ours - theirs)[kept] / theirs[kept]
    row = {"trace": run.trace, "cluster": run.cluster, "policy": run.policy, "jobs": len(wl),
           "dropped": int((~kept).sum()), "same_dropped": bool((res.kept == kept).all()),
           "avg_jct_s": summary(res, ("avg",))["jct"]["avg"], "gavel_avg_jct_s": run.avg_jct_s,
           "within_5pct": 100 * float((rel <= 0.05).mean()),
           "exact": 100 * float((rel <= 1e-6).mean()), "worst_pct": 100 * float(rel.max()),
           "replayed_exact": np.nan, "cpu_s": cpu}
    row["avg_diff_pct"] = 100 * (row["avg_jct_s"] / run.avg_jct_s - 1)
    source = run.where / f"{run.trace}__{run.policy}.alloc.jsonl.gz"
    if params["objective"] != "fifo":
        again = simulate(wl, profile, GavelsAllocations(**params, source=str(source)))
        got = twins_sorted(ref, np.asarray(again.finish_s) - wl.arrival_s)
        row["replayed_exact"] = 100 * float(
            (np.abs(got - theirs)[kept] <= 1e-6 * theirs[kept]).mean())
    return row


def more(csv: Path | None, where: Path = MORE) -> None:
    """The ``--more`` table (module docstring)."""
    print(f"{'trace':<5} {'cluster':<22} {'Gavel policy':<26} {'jobs':>4} {'drop':>4} "
          f"{'avg JCT s':>9} {'Gavel s':>9} {'diff %':>7} {'<=5 %':>6} {'exact':>6} "
          f"{'worst %':>7} {'replay':>6} {'CPU s':>6}")
    rows = []
    for run in more_runs(where):
        r = more_row(run)
        rows.append(r)
        drop = f"{r['dropped']}{'' if r['same_dropped'] else '!'}"
        print(f"{r['trace']:<5} {r['cluster']:<22} {r['policy']:<26} {r['jobs']:>4} {drop:>4} "
              f"{r['avg_jct_s']:>9.1f} {r['gavel_avg_jct_s']:>9.1f} {r['avg_diff_pct']:>+7.3f} "
              f"{r['within_5pct']:>6.1f} {r['exact']:>6.1f} {r['worst_pct']:>7.2f} "
              f"{r['replayed_exact']:>6.1f} {r['cpu_s']:>6.2f}", flush=True)
    if csv is not None:
        pd.DataFrame(rows).to_csv(csv, index=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--more", action="store_true", help="the runs of tests/fixtures/gavel/more")
    ap.add_argument("--makespan", action="store_true",
                    help="the runs of tests/fixtures/gavel/makespan (Gavel's makespan policy)")
    ap.add_argument("--max-sum", action="store_true",
                    help="the runs of tests/fixtures/gavel/maxsum (Gavel's throughput policy)")
    ap.add_argument("--csv", type=Path,
                    help="with --more, --makespan or --max-sum: also write the table")
    args = ap.parse_args()
    if args.more or args.makespan or args.max_sum:
        more(args.csv, MAKESPAN if args.makespan else MAX_SUM if args.max_sum else MORE)
        return
    from policies.hetero.gavel import Gavel
    from policies.hetero.yarn import YarnCS

    print(f"{'trace':<18} {'Gavel policy':<26} {'what':<9} {'avg JCT s':>10} {'Gavel s':>10} "
          f"{'diff %':>7} {'<=5 %':>6} {'exact':>6} {'CPU s':>6}")
    for trace in TRACES:
        for name, params in POLICIES.items():
            ref = reference(trace, name)
            theirs = ref.jct_s.mean()
            solved = params["objective"] != "fifo"
            variants: list[tuple[str, Any]] = [("ECOS" if solved else "ours", Gavel(**params))]
            if params["objective"] == "max_min":
                variants.append(("HiGHS", Gavel(**params, lp="highs")))
            if name == "fifo":
                variants.append(("yarn-cs", YarnCS()))
            source = FIXTURES / f"{trace}__{name}.alloc.jsonl.gz"
            if solved and source.exists():
                variants.append(("replayed", GavelsAllocations(**params, source=str(source))))
            notes = []
            for what, policy in variants:
                jct, cpu, seen = run(trace, policy)
                diff, near, exact = compare(ref, jct)
                kept = ref.jct_s.notna().to_numpy()
                print(f"{trace:<18} {name:<26} {what:<9} {jct[kept].mean():>10.1f} "
                      f"{theirs:>10.1f} {diff:>+7.2f} {near:>6.1f} {exact:>6.1f} {cpu:>6.2f}")
                if what in ("ECOS", "HiGHS") and source.exists():
                    notes.append(f"  {what}:\n" + first_difference(trace, name, seen))
            for note in notes:
                print(note)


if __name__ == "__main__":
    main()
