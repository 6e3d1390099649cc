"""Every policy's simulation cost as the workload grows: a table of CPU-s, events, decisions,
skipped rounds, playout events and peak RSS per policy x jobs, with and without JCT
prediction, and the growth exponent of CPU time in the number of jobs.

Each family runs on its README example workload (:data:`EXAMPLES`). Each measurement is a
fresh child process (its peak RSS is its own) that first loads the compiled kernels on 50 jobs
(``setup s``: imports, kernel loading, and compiling them if the cache is cold) and then times
the simulation alone (``CPU s``). ``n_avg`` is the mean number of active jobs each job saw
(PCS's fair-share denominator): a queue that grows with the number of jobs makes any policy
that looks at its queue super-linear, whatever the engine.

Run from the project root: ``python benchmarks/bench_families.py`` (``--sizes``,
``--policies``, ``--budget-s`` to bound the time a size may take; ``--json`` keeps the rows).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GAVEL = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
SIZES = (250, 1000, 5000, 20000)


def _generated(n: int, gpus: int, load: float = 0.9) -> Any:
    from simulator import generate

    return generate(n, load=load, gpus=gpus, seed=0)


def _shared(n: int, gpus: int, memory: float) -> Any:
    from simulator.inputs.generate import add_sharing

    return add_sharing(_generated(n, gpus), device_memory_gib=memory, seed=0)


def _gavel(n: int, per_hr: float) -> Any:
    from simulator.inputs.throughput import ThroughputTable, generate_gavel

    return generate_gavel(ThroughputTable.from_gavel_json(GAVEL), n, jobs_per_hr=per_hr, seed=0)


def _slos(wl: Any) -> Any:
    from simulator.inputs.generate import add_slos

    return add_slos(wl, "MIX2", seed=0)


def _unified(n: int) -> Any:
    from simulator.inputs.generate import add_sharing

    return _slos(add_sharing(_gavel(n, HETERO_PER_HR), device_memory_gib=12.0, seed=0))


HETERO_PER_HR = 0.6
"""Gavel's continuous-multiple jobs per hour on gavel-hetero-60 that keep its queue bounded
(YARN-CS's head-of-line blocking included): at 6 jobs/h the queue grows with every job."""

EXAMPLES: dict[str, tuple[str, Callable[[int], Any], tuple[str, ...]]] = {
    "pcs": ("pcs-64", lambda n: _generated(n, 64),
            ("wfq", "fifo", "srsf", "srtf", "las", "maxmin", "themis", "afs")),
    "unisched": ("unisched-c96", lambda n: _slos(_generated(n, 768)),
                 ("unisched", "llf", "hydra")),
    "hetero": ("gavel-hetero-60", lambda n: _gavel(n, HETERO_PER_HR),
               ("hadar", "gavel", "yarn-cs", "wfq-hetero")),
    "horus": ("horus-128x8", lambda n: _shared(n, 1024, 8.0),
              ("horus", "fifo-exclusive", "obp", "pab")),
    "ojpp": ("ojpp-1080ti", lambda n: _shared(n, 64, 11.0),
             ("ojpp", "ojpp-greedy", "best-fit", "c-greedy", "i-greedy", "b-greedy")),
    "unified": ("gavel-hetero-60", _unified, ("unified",)),
}
"""Family -> (profile, workload of n jobs, policies): the README's example workloads."""


def _family(policy: str) -> str:
    return next(f for f, (_, _, names) in EXAMPLES.items() if policy in names)


def one(policy: str, n: int, predict: bool) -> dict[str, Any]:
    """Measure one run in this process (called in a child)."""
    t0 = time.perf_counter()
    from policies import make_policy
    from simulator import load_profile, simulate

    profile_name, make, _ = EXAMPLES[_family(policy)]
    profile = load_profile(profile_name)
    wl = make(n)
    pol = make_policy(policy).fit(wl)
    simulate(wl.head(50), profile, pol, predict=predict)
    setup = time.perf_counter() - t0
    c0 = time.process_time()
    r = simulate(wl, profile, pol, predict=predict)
    cpu = time.process_time() - c0
    return {"policy": policy, "jobs": len(wl), "predict": predict, "cpu_s": cpu,
            "setup_s": setup, "events": r.events, "decisions": r.decisions or r.events,
            "skipped": r.skipped_rounds, "playout_events": r.playout_events,
            "n_avg": float(np.mean(r.seen_avg)),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(policy: str, n: int, predict: bool, timeout: float) -> dict[str, Any] | None:
    args = [sys.executable, __file__, "--one", policy, str(n), "1" if predict else "0"]
    try:
        out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _row(m: dict[str, Any]) -> str:
    return (f"{m['policy']:<15} {'yes' if m['predict'] else 'no':>7} {m['jobs']:>7,} "
            f"{m['cpu_s']:>9.3f} {m['setup_s']:>7.1f} {m['events']:>10,} {m['decisions']:>10,} "
            f"{m['skipped']:>10,} {m['playout_events']:>12,} {m['n_avg']:>7.1f} "
            f"{m['peak_rss_mb']:>7.0f}")


def growth(rows: list[dict[str, Any]]) -> float:
    """Exponent k of CPU-s ~ N^k, fitted over the sizes from 1,000 jobs on (or all)."""
    use = [m for m in rows if m["jobs"] >= 1000] if len(rows) > 2 else rows
    if len(use) < 2:
        return float("nan")
    return float(np.polyfit(np.log([m["jobs"] for m in use]),
                            np.log([max(m["cpu_s"], 1e-4) for m in use]), 1)[0])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--policies", default="",
                   help="comma-separated (default: every policy of every family)")
    p.add_argument("--predict", choices=("both", "off", "on"), default="both")
    p.add_argument("--budget-s", type=float, default=300.0,
                   help="skip a size whose run would exceed this (extrapolated), s")
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        policy, n, predict = args.one
        print(json.dumps(one(policy, int(n), predict == "1")))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [s for s in args.policies.split(",") if s] or [
        name for _, _, family in EXAMPLES.values() for name in family]
    modes = {"both": (False, True), "off": (False,), "on": (True,)}[args.predict]
    print(f"{'policy':<15} {'predict':>7} {'jobs':>7} {'CPU s':>9} {'setup':>7} {'events':>10} "
          f"{'decisions':>10} {'skipped':>10} {'playout ev':>12} {'n_avg':>7} {'RSS MB':>7}",
          flush=True)
    rows: list[dict[str, Any]] = []
    for policy in names:
        for predict in modes:
            done: list[dict[str, Any]] = []
            for n in sizes:
                if done and done[-1]["cpu_s"] * (n / done[-1]["jobs"]) ** 1.3 > args.budget_s:
                    print(f"{policy:<15} {'yes' if predict else 'no':>7} {n:>7,}  skipped: "
                          f"over the {args.budget_s:g} s budget by extrapolation", flush=True)
                    break
                m = _child(policy, n, predict, timeout=4 * args.budget_s + 120)
                if m is None:
                    print(f"{policy:<15} {'yes' if predict else 'no':>7} {n:>7,}  timed out",
                          flush=True)
                    break
                done.append(m)
                print(_row(m), flush=True)
            if done:
                print(f"{'':<15} {'':>7} growth: CPU-s ~ N^{growth(done):.2f}", flush=True)
            rows += done
    if args.json:
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(rows, indent=1))
        tmp.replace(args.json)


if __name__ == "__main__":
    main()
