"""Simulator speed and memory: prints a table of CPU/wall seconds, events/s and peak RSS.

Each scenario runs in a fresh child process (so its peak RSS is its own) after a warm-up run
that loads the compiled kernels; compile time is reported separately. Run from the project
root: ``python benchmarks/bench_simulate.py`` (``--quick`` skips trace_6214e9).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PCS = ROOT.parent / "shared" / "data" / "pcs"
SIZES = (1000, 2000, 5000, 10000)


def _workload(kind: str, n: int):  # type: ignore[no-untyped-def]
    from simulator import ScalingTable, generate, read_pcs_trace

    if kind == "generated":
        return generate(n, load=0.9, gpus=64, seed=1)
    table = ScalingTable.from_csv(PCS / "scaling_tables.csv")
    wl = read_pcs_trace(PCS / "traces" / f"trace_{kind}.csv", scaling=table)
    return wl.head(n) if n > 0 else wl


def _policy(kind: str, wl):  # type: ignore[no-untyped-def]
    from policies import WFQ

    if kind == "generated":
        return WFQ(T=1.0, W=1.0, zeta_min=0.5, delta=0.1).fit(wl)
    configs = json.loads((PCS / "configs" / "pcs_configs.json").read_text())["configs"]
    key = f"{kind}_bal"
    return WFQ.from_pcs_config(configs[key])


def one(kind: str, n: int, predict: bool) -> dict[str, float]:
    """Measure one scenario in this process (called in a child)."""
    from simulator import load_profile, simulate

    t0 = time.perf_counter()
    profile = load_profile("pcs-64")
    wl = _workload(kind, n)
    policy = _policy(kind, wl)
    simulate(wl.head(50), profile, policy, predict=predict)  # load compiled kernels
    warm = time.perf_counter() - t0
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    c0, w0 = time.process_time(), time.perf_counter()
    r = simulate(wl, profile, policy, predict=predict)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"jobs": len(wl), "cpu_s": cpu, "wall_s": wall, "events": r.events,
            "playout_events": r.playout_events,
            "events_per_s": (r.events + r.playout_events) / max(cpu, 1e-9),
            "setup_s": warm, "rss_before_mb": rss0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(kind: str, n: int, predict: bool) -> dict[str, float]:
    args = [sys.executable, __file__, "--one", kind, str(n), "1" if predict else "0"]
    out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _row(label: str, predict: bool, m: dict[str, float]) -> str:
    return (f"{label:<26} {'yes' if predict else 'no':>7} {m['jobs']:>7,.0f} {m['cpu_s']:>8.3f} "
            f"{m['wall_s']:>8.3f} {m['events']:>9,.0f} {m['playout_events']:>11,.0f} "
            f"{m['events_per_s']:>12,.0f} {m['peak_rss_mb']:>8.0f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="skip trace_6214e9")
    p.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        kind, n, predict = args.one
        print(json.dumps(one(kind, int(n), predict == "1")))
        return
    print(f"{'scenario':<26} {'predict':>7} {'jobs':>7} {'CPU s':>8} {'wall s':>8} "
          f"{'events':>9} {'playout ev':>11} {'events/CPU-s':>12} {'RSS MB':>8}")
    for predict in (False, True):
        print(_row("trace_0e4a51 _bal", predict, _child("0e4a51", 1000, predict)))
    for predict in (False, True):
        cpu = []
        for n in SIZES:
            m = _child("generated", n, predict)
            cpu.append(m["cpu_s"])
            print(_row("generated load 0.9", predict, m))
        slope = np.polyfit(np.log(SIZES), np.log(cpu), 1)[0]
        print(f"{'':<26} {'':>7} growth: CPU time ~ N^{slope:.2f}")
    if not args.quick:
        print(_row("trace_6214e9 (all jobs)", False, _child("6214e9", -1, False)))
        # all jobs with prediction: playout events grow as N^2 (about 2 hours); 5,000 of them
        print(_row("trace_6214e9 (first 5,000)", True, _child("6214e9", 5000, True)))
    print("targets: 0e4a51 _bal with prediction <= 1.8 CPU-s (PCS: ~184 CPU-s), without <= 0.1 s;"
          " 6214e9 without prediction < 500 MB peak RSS")


if __name__ == "__main__":
    main()
