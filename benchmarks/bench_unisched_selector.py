"""UniSched's selector: the exact knapsack method with HiGHS behind it, against HiGHS alone.

Runs UniSched on the first jobs of Chronus's Philly MIX1 trace on C96 (96 x 8 V100; ``--nodes``
for fewer) and, at every BE lease boundary that needs the selector, solves the instance both
ways: the selector as the policy runs it (:func:`policies.unisched.milp.solve_selector`) and
the HiGHS MILP alone (:func:`policies.unisched.milp.solve_milp`, relative gap ``--highs-gap``:
0, the oracle, by default; 1e-6 was the selector's gap before the exact method). Printed per
size:
boundaries, the share the exact method answered, the CPU per boundary of each (mean, median,
p99) and their ratio, the largest objective difference, then the whole run's CPU seconds with
each selector. With
``--dump DIR`` each instance is also saved (``DIR/NNNNN.npz``: the :class:`SelectorInput`
fields and HiGHS's choice and objective); ``--replay DIR`` only times both selectors on such
saved instances.

Run from the project root: ``python benchmarks/bench_unisched_selector.py`` (``--jobs
1000,5000``; ``--jobs 0`` is the whole trace, 30,940 jobs; ``--no-whole`` skips the two
whole runs, one with each selector, which at 5,000 jobs take minutes).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import scipy

from policies.unisched.milp import Selection, SelectorInput, solve_milp, solve_selector
from policies.unisched.policy import UniSched
from simulator import load_profile, read_chronus, simulate
from simulator.inputs.profile import NodeGroup
from simulator.metrics import METRICS

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "chronus" / "trace_job_Philly_MIX1.csv"
RECORDED = ROOT / "tests" / "fixtures" / "unisched" / "selector_instances.npz"
UNBUDGETED = 10_000.0
"""``milp_nodes_per_job`` at its top, for a run that must never stop asking HiGHS."""


@dataclass
class Tally:
    """CPU seconds per boundary of both selectors, and their objectives' largest gap."""

    new_s: list[float]
    old_s: list[float]
    fast: int = 0
    worst_rel: float = 0.0
    dump: Path | None = None
    highs_gap: float = 0.0
    compare: bool = True


TALLY = Tally([], [])


@dataclass(frozen=True)
class Compared(UniSched):
    """UniSched that solves each instance both ways (deciding by the new selector) and
    tallies the CPU each took."""

    name: ClassVar[str] = "unisched-compared"

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        t0 = time.process_time()
        new = solve_selector(inp, node_limit=node_limit)
        t1 = time.process_time()
        TALLY.new_s.append(t1 - t0)
        TALLY.fast += int(new.exact)
        if not TALLY.compare:
            return new
        old = solve_milp(inp, node_limit=self.milp_node_limit, rel_gap=TALLY.highs_gap)
        TALLY.old_s.append(time.process_time() - t1)
        if new.usable and old.usable:
            rel = abs(new.objective - old.objective) / max(1.0, abs(old.objective))
            TALLY.worst_rel = max(TALLY.worst_rel, rel)
        if TALLY.dump is not None:
            np.savez_compressed(
                TALLY.dump / f"{len(TALLY.new_s):05d}.npz",
                **{f.name: getattr(inp, f.name) for f in fields(inp)},
                choice=old.choice, objective=old.objective)
        return new


@dataclass(frozen=True)
class HighsOnly(UniSched):
    """UniSched as it was: every instance to HiGHS (no budget per run: its default would run
    out within the first thousand boundaries, each solve counting at least one node)."""

    name: ClassVar[str] = "unisched-highs"
    milp_nodes_per_job: float = UNBUDGETED

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        return solve_milp(inp, node_limit=node_limit, rel_gap=TALLY.highs_gap)


def run(policy: UniSched, wl: Any, profile: Any) -> tuple[float, float, float]:
    """CPU seconds of one simulation, its SLO miss rate and best-effort JCT (s)."""
    t0 = time.process_time()
    r = simulate(wl, profile, policy)
    return (time.process_time() - t0, float(np.nanmean(METRICS["slo_miss"].compute(r))),
            float(np.nanmean(METRICS["be_jct"].compute(r))))


def per_boundary(new_s: list[float], old_s: list[float], fast: int) -> None:
    """Print the selectors' CPU per boundary and how much cheaper the new one is."""
    new, old = np.array(new_s), np.array(old_s)
    print(f"  {new.size} selector boundaries, {fast} ({fast / max(new.size, 1):.1%}) answered "
          "exactly")
    if new.size:
        for label, v in (("HiGHS MILP", old), ("selector", new)):
            if not v.size:
                continue
            print(f"  {label:<11} per boundary: mean {v.mean() * 1e3:8.3f} ms, median "
                  f"{np.median(v) * 1e3:8.3f} ms, p99 {np.quantile(v, 0.99) * 1e3:8.3f} ms, "
                  f"total {v.sum():7.2f} s, slowest {v.max() * 1e3:.1f} ms")
    if old.size:
        print(f"  cheaper per boundary: {old.sum() / max(new.sum(), 1e-12):.2f}x (totals), "
              f"{np.median(old) / max(np.median(new), 1e-12):.1f}x (medians)")


def warm() -> None:
    """Solve the tests' 30 recorded instances once with each selector (untimed), so that
    loading the compiled code is not counted at the boundary that first needs it."""
    names = [f.name for f in fields(SelectorInput)]
    with np.load(RECORDED) as doc:
        arrays = {k: doc[k] for k in doc.files}
    for k in range(int(arrays["count"])):
        inp = SelectorInput(**{n: arrays[f"{k}/{n}"] for n in names})
        solve_selector(inp)
        if k == 0:
            solve_milp(inp)


def replay(folder: Path) -> None:
    """Time both selectors on instances saved by ``--dump`` (``folder/*.npz``)."""
    names = [f.name for f in fields(SelectorInput)]
    new_s: list[float] = []
    old_s: list[float] = []
    fast = 0
    for path in sorted(folder.glob("*.npz")):
        with np.load(path) as doc:
            inp = SelectorInput(**{n: doc[n] for n in names})
        if not new_s:
            solve_selector(inp)  # load the compiled code before timing
        t0 = time.process_time()
        new = solve_selector(inp)
        t1 = time.process_time()
        solve_milp(inp, rel_gap=TALLY.highs_gap)
        new_s.append(t1 - t0)
        old_s.append(time.process_time() - t1)
        fast += int(new.exact)
    print(f"\nreplay of {folder}:")
    per_boundary(new_s, old_s, fast)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="1000,5000", help="comma-separated; 0: the whole trace")
    ap.add_argument("--nodes", type=int, default=96, help="8-GPU V100 nodes (C96: 96)")
    ap.add_argument("--unit-s", type=float, default=60.0, help="seconds per trace time unit")
    ap.add_argument("--dump", type=Path, help="save every instance here")
    ap.add_argument("--no-whole", action="store_true", help="skip the whole-run comparison")
    ap.add_argument("--replay", type=Path, help="only time both selectors on saved instances")
    ap.add_argument("--highs-gap", type=float, default=0.0,
                    help="HiGHS's relative gap when it runs alone (the selector's own is 0)")
    ap.add_argument("--selector-only", action="store_true",
                    help="one run deciding by the selector, timed whole (no HiGHS-alone solves)")
    args = ap.parse_args()
    TALLY.highs_gap, TALLY.compare = args.highs_gap, not args.selector_only
    print("bench_unisched_selector:", " ".join(f"{k}={v}" for k, v in vars(args).items()))
    print(f"scipy {scipy.__version__} (HiGHS), numpy {np.__version__}; CPU = process time")
    if args.replay is not None:
        replay(args.replay)
        return
    warm()
    c96 = load_profile("unisched-c96")
    profile = c96 if args.nodes == 96 else replace(
        c96, name=f"c{args.nodes}", node_groups=(NodeGroup(args.nodes, 8, "v100", 32),))
    full = read_chronus(TRACE, time_unit_s=args.unit_s)
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
        TALLY.dump = args.dump
    for n in (int(v) for v in args.jobs.split(",")):
        wl = full if n == 0 else full.head(n)
        TALLY.new_s.clear()
        TALLY.old_s.clear()
        TALLY.fast, TALLY.worst_rel = 0, 0.0
        cpu, miss, jct = run(Compared(), wl, profile)
        print(f"\n{len(wl)} jobs on {profile.name}: slo_miss {miss:.4f}, be_jct {jct:.0f} s, "
              f"largest objective gap {TALLY.worst_rel:.1e} (relative)")
        per_boundary(TALLY.new_s, TALLY.old_s, TALLY.fast)
        if args.selector_only:
            print(f"  whole run: {cpu:7.1f} CPU-s with the selector")
        elif not args.no_whole:
            cpu_new, miss_new, _ = run(UniSched(), wl, profile)
            cpu_old, miss_old, _ = run(HighsOnly(), wl, profile)
            print(f"  whole run: {cpu_new:7.1f} CPU-s with the selector (slo_miss "
                  f"{miss_new:.4f}), {cpu_old:7.1f} CPU-s with HiGHS alone (slo_miss "
                  f"{miss_old:.4f}): {cpu_old / cpu_new:.1f}x")


if __name__ == "__main__":
    main()
