"""Horus §6 reproduced: Table 6's makespan gains, Fig. 7's JCT cost, Fig. 8's utilization, Table 7.

The interference model is the calibrated one of ``cluster_profiles/horus-testbed-3x4.yaml``:
a worker on a device whose co-located workers sum to utilization ``u`` runs
``max(1, u) (1 + s u)`` times slower than alone (time-sharing the GPU once it is
over-committed, times an overhead linear in ``u``, as Horus §6.2 assumes for its own
simulation), ``s`` from ``--slope`` (``--slopes`` to sweep). On the testbed, ``--fit``
(``--fits`` to sweep) moves the JCT ratio of over-committed GPUs from time-sharing's toward
the quadratic Horus fitted to its own RTX 2080 measurements (§3.2, footnote 4), which is
harsher: 3x at ``u`` = 1.6, where time-sharing gives 2.1x; Table 7 keeps §6.2's assumption.
JCT is counted as Horus §5.2 defines it, "commencing from the start of job execution and
finishing at job completion"; the JCT from arrival is printed beside it.

Testbed (§5.1-5.2): 100 one-GPU jobs of 3 min-2 h, short (<= 800 s) / long and light (< 60 %
utilization) / heavy, on 3 nodes x 4 RTX 2080 (8 GiB), one batch at t = 0; W-Small has more
short and light jobs than W-Large. The paper gives neither the shares nor the jobs' GPU
memory, only each policy's makespan: FIFO's pins the shares of short jobs (printed beside the
paper's), ``--mixes`` and ``--mem-scales`` sweep the rest
(:mod:`simulator.inputs.horus_workload`).
Policies: ``fifo-exclusive``, ``pab``, ``obp``, ``horus`` (k = 1, beta = 15, as the testbed
ran).

Large scale (§6.2, Table 7): the first ``--large-jobs`` jobs of a Philly trace of the shared
data on ``--nodes`` nodes of ``horus-128x8`` (default 8 = 64 GPUs: the shared traces' jobs are
mostly one-GPU and short, and on the paper's 1,024 GPUs no policy ever waits, even with
arrivals compressed 10x over 5,000 jobs), the trace's GPU demands and durations, arrivals
divided by ``--compress``; utilizations and memory are
synthetic (:func:`simulator.inputs.generate.add_sharing`, fixed memory), averaged over
``--draws`` draws. Average wait per policy and its cut against FIFO.

The baselines' costs the paper names but does not size (§6.1, §4.2.3): ``--profile-waits``
sweeps PAB's profiling wait T_wait (``pab`` ``profile_s``), ``--oom-shares`` OBP's share of jobs
failing on OOM (``obp`` ``oom_share``), each failure losing ``--oom-after`` seconds of work
(``--skip-headlines``: only those sweeps). ``--heavy-shares`` sweeps W-Large's share of
heavy jobs (``--large-shorts`` its share of short ones).

Run from the project root: ``nice python benchmarks/reproduce/horus.py`` (20 job sets a mix,
Table 7 on 1,000 trace jobs, 5 draws); ``--slopes 0.1,0.2,0.3 --mem-scales 1.25,1.5,1.75`` for
the sweep, ``--large-jobs 0`` to skip Table 7.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from policies import make_policy  # noqa: E402  (after the path is set)
from simulator import (  # noqa: E402
    ScalingTable,
    Workload,
    load_profile,
    read_pcs_trace,
    simulate,
    summary,
)
from simulator.inputs.colocation import SlowdownCurve  # noqa: E402
from simulator.inputs.generate import add_sharing  # noqa: E402
from simulator.inputs.horus_workload import MIXES, horus_testbed  # noqa: E402
from simulator.inputs.profile import ClusterProfile  # noqa: E402
from simulator.metrics import METRICS  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
POLICIES = {"fifo-exclusive": {}, "pab": {}, "obp": {}, "horus": {"k_queues": 1, "buffer": 15}}
PAPER6 = {("W-Small", "horus"): 23.7, ("W-Small", "obp"): 15.7, ("W-Small", "pab"): 6.3,
          ("W-Large", "horus"): 30.7, ("W-Large", "obp"): 22.2, ("W-Large", "pab"): 9.5}
"""Table 6: makespan gain over FIFO (%)."""
PAPER6_MIN = {("W-Small", "fifo-exclusive"): 267.3, ("W-Small", "pab"): 250.4,
              ("W-Small", "obp"): 225.3, ("W-Small", "horus"): 204.0,
              ("W-Large", "fifo-exclusive"): 306.9, ("W-Large", "pab"): 277.6,
              ("W-Large", "obp"): 238.6, ("W-Large", "horus"): 212.8}
"""Table 6: average makespan (min). FIFO's runs one job at a time on a GPU, so it depends on
the jobs' lengths alone: the oracle for a mix's share of short jobs."""
FIG7 = {"W-Large": (8.2, 21.8), "W-Small": (10.3, 30.3)}
"""§6.1 on Fig. 7: the co-location policies' average JCT above FIFO's (%), lowest-highest."""
HORUS_UTIL = 69.6
"""§6.1 on Fig. 8: Horus's average GPU utilization over its testbed runs (%)."""
UTIL_GAIN = (32.0, 61.5)
"""§1: "a 32-61.5 percent increase in GPU cluster utilization" (§5.2: "by up to 61.5 percent
in comparison to FIFO, [OBP] and [PAB]") (%)."""
PAPER7 = {"obp": 25.4, "horus k=1": 66.4, "horus k=3": 68.3}
"""Table 7: average wait cut against FIFO (%); k = 3 is Horus-f."""


def time_share_curve(slope: float, fit: float = 0.0) -> SlowdownCurve:
    """``max(1, u) (1 + slope u) - 1`` as the project's curve: ``slope u`` up to u = 1 and
    ``slope u^2 + u - 1`` above (continuous at 1). With ``fit`` in (0, 1], the JCT ratio above
    u = 1 is that weight of Horus's own RTX 2080 fit (§3.2, footnote 4, as ``horus-128x8``
    carries it) and ``1 - fit`` of time-sharing's. The fit gives 1.164 at u = 1, so the ratio
    steps by ``fit (0.164 - slope)`` there, and it is milder than time-sharing's up to
    u = 1.04 at slope 0.2, harsher above."""
    a, b, c = load_profile("horus-128x8").slowdown_curves["rtx2080"].quadratic
    return SlowdownCurve(((1 - fit) * slope + fit * a, (1 - fit) + fit * b, fit * c),
                         (slope, 0.0))


def run_testbed(wl: Workload, profile: ClusterProfile, seed: int,
                policies: dict[str, dict[str, object]]) -> dict[str, dict[str, float]]:
    """Makespan (min), mean JCT from start and from arrival (min), mean slowdown and the
    time-average GPU utilization (%, ``gpu_util_sum``), per policy."""
    out = {}
    for name, params in policies.items():
        r = simulate(wl, profile, make_policy(name, params), seed=seed)
        out[name] = {"makespan": float(np.max(r.finish_s)) / 60,
                     "jct_exec": float(np.mean(r.finish_s - r.start_s)) / 60,
                     "jct_arrival": float(np.mean(r.finish_s - wl.arrival_s)) / 60,
                     "slowdown": float(np.mean(r.slowdown)),
                     "util": 100 * float(METRICS["gpu_util_sum"].compute(r)[0])}
    return out


def testbed(shares: tuple[float, float], curve: SlowdownCurve, mem_scale: float, reps: int,
            policies: dict[str, dict[str, object]] = POLICIES,
            restart_s: float = 0.0) -> dict[str, dict[str, float]]:
    """Means over ``reps`` job sets on ``horus-testbed-3x4`` with ``curve``, with each
    policy's gain over FIFO and JCT above it (%); ``policies`` must hold ``fifo-exclusive``;
    ``restart_s`` charged per restart."""
    prof = replace(load_profile("horus-testbed-3x4"), slowdown_curves={"rtx2080": curve},
                   restart_overhead_s=restart_s)
    runs = [run_testbed(horus_testbed(*shares, mem_scale, s), prof, s, policies)
            for s in range(reps)]
    mean = {p: {k: float(np.mean([r[p][k] for r in runs])) for k in runs[0][p]}
            for p in policies}
    fifo = mean["fifo-exclusive"]
    for m in mean.values():
        m["gain"] = 100 * (1 - m["makespan"] / fifo["makespan"])
        m["jct_up"] = 100 * (m["jct_exec"] / fifo["jct_exec"] - 1)
    return mean


def print_testbed(mix: str, setup: str, m: dict[str, dict[str, float]]) -> None:
    print(f"\n{mix} ({setup})")
    print(f"{'policy':<16} {'makespan min':>12} {'paper min':>9} {'gain %':>7} {'paper %':>7} "
          f"{'JCT(start) min':>14} {'vs FIFO %':>9} {'JCT(arrival) min':>16} {'slowdown':>8} "
          f"{'util %':>6}")
    for p, v in m.items():
        paper, minutes = PAPER6.get((mix, p)), PAPER6_MIN.get((mix, p))
        print(f"{p:<16} {v['makespan']:>12.1f} "
              f"{'-' if minutes is None else f'{minutes:.1f}':>9} {v['gain']:>7.1f} "
              f"{'-' if paper is None else f'{paper:.1f}':>7} {v['jct_exec']:>14.1f} "
              f"{v['jct_up']:>9.1f} {v['jct_arrival']:>16.1f} {v['slowdown']:>8.3f} "
              f"{v['util']:>6.1f}", flush=True)


def headlines(results: dict[str, dict[str, dict[str, float]]], setup: str) -> None:
    """One line per Table 6 headline, per Fig. 7 band and per Fig. 8 utilization headline."""
    print(f"\n## Table 6 headlines ({setup})")
    print(f"{'headline':<42} {'paper':>7} {'ours':>7} {'ours/paper':>10}")
    for (mix, p), paper in PAPER6.items():
        ours = results[mix][p]["gain"]
        print(f"{'makespan gain vs FIFO, ' + p + ', ' + mix:<42} {paper:>6.1f}% {ours:>6.1f}% "
              f"{ours / paper:>10.2f}")
    print(f"\n## Fig. 7: avg JCT (from start) above FIFO's, co-location policies ({setup})")
    for mix, (lo, hi) in FIG7.items():
        ups = ", ".join(f"{p} {results[mix][p]['jct_up']:.1f}" for p in ("pab", "obp", "horus"))
        print(f"{mix}: paper {lo}-{hi} %; ours {ups} %")
    util = {mix: m["horus"]["util"] for mix, m in results.items()}
    print(f"\n## Fig. 8: GPU utilization ({setup})")
    print(f"Horus's average: paper {HORUS_UTIL:.1f} %; ours {np.mean(list(util.values())):.1f} % "
          f"({', '.join(f'{mix} {u:.1f}' for mix, u in util.items())})")
    for p in ("fifo-exclusive", "obp", "pab"):
        ups = ", ".join(f"{mix} {100 * (util[mix] / m[p]['util'] - 1):.1f}"
                        for mix, m in results.items())
        print(f"Horus's over {p}'s: paper {UTIL_GAIN[0]:g}-{UTIL_GAIN[1]:g} % (over FIFO, OBP "
              f"and PAB); ours {ups} %")


def sweep(args: argparse.Namespace) -> None:
    """Gains across the slopes and memory scales (facts the paper does not give)."""
    print(f"\n## sweep: makespan gain vs FIFO % (JCT above FIFO %), fit {args.fit:g}, "
          f"{args.reps} job sets")
    print(f"{'slope':>5} {'mem x':>5} {'mix':<8} " + " ".join(f"{p:>16}" for p in
                                                            ("pab", "obp", "horus")))
    for slope in args.slopes:
        for mem in args.mem_scales:
            for mix, shares in args.shares.items():
                m = testbed(shares, time_share_curve(slope, args.fit), mem, args.reps)
                cells = " ".join(f"{m[p]['gain']:>7.1f} ({m[p]['jct_up']:>5.1f})"
                                 for p in ("pab", "obp", "horus"))
                print(f"{slope:>5g} {mem:>5g} {mix:<8} {cells}", flush=True)


def setup(args: argparse.Namespace) -> str:
    """The testbed runs' settings that the paper does not give."""
    return (f"slope {args.slope:g}, fit {args.fit:g}, mem x{args.mem_scale:g}, "
            f"{args.reps} job sets")


def gains_and_lead(m: dict[str, dict[str, float]], mix: str) -> str:
    """Each co-location policy's gain over FIFO (ours / paper) and JCT above it, then Horus's
    lead over OBP in points."""
    cells = " ".join(f"{m[p]['gain']:>5.1f} ({m[p]['gain'] / PAPER6[(mix, p)]:.2f}) "
                     f"{m[p]['jct_up']:>5.1f}" for p in ("pab", "obp", "horus"))
    return f"{cells} {m['horus']['gain'] - m['obp']['gain']:>11.1f}"


def overcommit(args: argparse.Namespace) -> None:
    """The JCT ratio of over-committed GPUs swept from time-sharing's (fit 0) to Horus's own
    fit (fit 1, §3.2): gains over FIFO (ours / paper), JCT above FIFO, and Horus's lead over
    OBP (the paper's: 8 and 8.5 points on W-Small and W-Large)."""
    print(f"\n## over-commitment: makespan gain vs FIFO % (ours / paper), JCT above FIFO %; "
          f"slope {args.slope:g}, mem x{args.mem_scale:g}, {args.reps} job sets")
    print(f"{'fit':>4} {'mix':<8} " + " ".join(f"{p:>20}" for p in ("pab", "obp", "horus"))
          + f" {'horus - obp':>11}")
    for fit in args.fits:
        for mix, shares in args.shares.items():
            m = testbed(shares, time_share_curve(args.slope, fit), args.mem_scale, args.reps)
            print(f"{fit:>4g} {mix:<8} {gains_and_lead(m, mix)}", flush=True)


def heavy_mix(args: argparse.Namespace) -> None:
    """W-Large's share of heavy jobs (and of short ones) swept: the paper says only "longer
    and heavier jobs" than W-Small's. Gains over FIFO and ours / paper, per policy, and
    Horus's lead over OBP (the paper's: 8.5 points)."""
    print(f"\n## W-Large by heavy-job share: makespan gain vs FIFO % (ours / paper), JCT above "
          f"FIFO %; {setup(args)}")
    fifo_paper = PAPER6_MIN[("W-Large", "fifo-exclusive")]
    print(f"{'short':>5} {'heavy':>5} {f'FIFO min (paper {fifo_paper:g})':>24} "
          + " ".join(f"{p:>20}" for p in ("pab", "obp", "horus")) + f" {'horus - obp':>11}")
    for short in args.large_shorts:
        for heavy in args.heavy_shares:
            m = testbed((short, 1.0 - heavy), args.curve, args.mem_scale, args.reps)
            fifo = m["fifo-exclusive"]["makespan"]
            print(f"{short:>5g} {heavy:>5g} {f'{fifo:.1f} ({fifo / fifo_paper:.2f})':>24} "
                  f"{gains_and_lead(m, 'W-Large')}", flush=True)


def gaps(args: argparse.Namespace) -> None:
    """PAB's profiling wait T_wait (§6.1) and OBP's share of OOM failures (§4.2.3) swept: facts
    the paper names as costs of those baselines but does not size. A failed job keeps its
    progress in the engine, so OBP's runs charge ``--oom-after`` per restart (OBP restarts a
    job only when it fails): the work lost to the failure."""
    cases = [("pab", f"T_wait {w:g} s", {"profile_s": w}) for w in args.profile_waits]
    cases += [("obp", f"OOM share {q:g}", {"oom_share": q, "oom_after_s": args.oom_after})
              for q in args.oom_shares]
    print(f"\n## baselines' costs: makespan gain vs FIFO % (ours / paper), JCT above FIFO %; "
          f"{setup(args)}"
          + (f", OOM {args.oom_after:g} s after placement" if args.oom_shares else ""))
    print(f"{'policy':<6} {'setting':<16} " + " ".join(f"{mix:>22}" for mix in args.shares))
    for name, label, params in cases:
        cells = []
        for mix, shares in args.shares.items():
            m = testbed(shares, args.curve, args.mem_scale, args.reps,
                        {"fifo-exclusive": {}, name: params},
                        args.oom_after if name == "obp" else 0.0)[name]
            cells.append(f"{m['gain']:>6.1f} ({m['gain'] / PAPER6[(mix, name)]:>4.2f}) "
                         f"{m['jct_up']:>6.1f}")
        print(f"{name:<6} {label:<16} " + " ".join(f"{c:>22}" for c in cells), flush=True)


def large_scale(args: argparse.Namespace) -> None:
    """Table 7: waits on a Philly trace on ``--nodes`` x 8 GPUs, interference overheads linear
    in the summed utilization as §6.2 assumes (time-sharing above 100 %, whatever ``--fit``)."""
    base = load_profile("horus-128x8")
    prof = replace(base, name=f"horus-{args.nodes}x8",
                   node_groups=(replace(base.node_groups[0], count=args.nodes),),
                   slowdown_curves={"rtx2080": time_share_curve(args.slope)})
    pcs = SHARED / "pcs"
    trace = read_pcs_trace(pcs / "traces" / f"trace_{args.trace}.csv",
                           scaling=ScalingTable.from_csv(pcs / "scaling_tables.csv"))
    trace = trace.head(args.large_jobs)
    trace = replace(trace, arrival_s=trace.arrival_s / args.compress)
    draws = [synthetic_sharing(trace, args.large_mem, seed) for seed in range(args.draws)]
    span = float(trace.arrival_s[-1] - trace.arrival_s[0])
    load = float(np.sum(trace.service_s)) / (span * prof.total_gpus) if span > 0 else np.inf
    settings = (f"trace {args.trace}, first {args.large_jobs} jobs, arrivals / "
                f"{args.compress:g} (offered load {load:.2f} on {prof.total_gpus} GPUs), slope "
                f"{args.slope:g}, time-sharing above 100 %, memory {args.large_mem:g} x 10-40 % "
                f"of 8 GiB a model (capped at 8), means over {args.draws} draws of utilization "
                f"and memory")
    print(f"\n## Table 7: average wait cut vs FIFO ({settings})")
    print(f"{'policy':<16} {'avg wait h':>10} {'p50 wait h':>10} {'cut %':>6} "
          f"{'per draw':>14} {'paper %':>7} {'makespan h':>10} {'util':>5} {'wall s':>6}")
    fifo = None
    for label, name, params in (("fifo-exclusive", "fifo-exclusive", {}), ("obp", "obp", {}),
                                ("horus k=1", "horus", {"k_queues": 1}),
                                ("horus k=3", "horus", {"k_queues": 3})):
        t0 = time.perf_counter()
        runs = [summary(simulate(wl, prof, make_policy(name, params), seed=0), ("avg", "p50"))
                for wl in draws]
        wait = np.array([r["wait"]["avg"] for r in runs]) / 3600
        cut, spread = "-", "-"
        if fifo is None:
            fifo = wait
        elif fifo.mean() > 0:
            cut = f"{100 * (1 - wait.mean() / fifo.mean()):.1f}"
            waited = fifo > 0  # a draw where FIFO never waits has no cut
            cuts = 100 * (1 - wait[waited] / fifo[waited])
            spread = f"{cuts.min():.1f}-{cuts.max():.1f}"
        print(f"{label:<16} {wait.mean():>10.2f} "
              f"{np.mean([r['wait']['p50'] for r in runs]) / 3600:>10.2f} {cut:>6} "
              f"{spread:>14} {PAPER7.get(label, '-')!s:>7} "
              f"{np.mean([r['makespan']['avg'] for r in runs]) / 3600:>10.1f} "
              f"{np.mean([r['gpu_util_sum']['avg'] for r in runs]):>5.2f} "
              f"{time.perf_counter() - t0:>6.1f}", flush=True)


def synthetic_sharing(trace: Workload, mem_scale: float, seed: int) -> Workload:
    """The trace with one draw (``seed``) of synthetic utilization and fixed memory:
    :func:`simulator.inputs.generate.add_sharing`'s (each model 10-40 % of 8 GiB x
    ``mem_scale``, each job within 10 % of its model's), capped at the 8 GiB of a GPU."""
    wl = add_sharing(trace, device_memory_gib=8.0 * mem_scale, opportunistic=0.0, seed=seed)
    assert wl.sharing is not None
    return replace(wl, sharing=replace(wl.sharing, mem_gib=np.minimum(wl.sharing.mem_gib, 8.0)))


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slope", type=float, default=None, help="overhead slope s of the "
                   "headline run (default: the profile's calibrated one)")
    p.add_argument("--fit", type=float, default=0.0, help="weight in [0, 1] of Horus's own "
                   "RTX 2080 fit (§3.2) in the JCT ratio of over-committed GPUs on the "
                   "testbed, against time-sharing's (default 0; Table 7 keeps §6.2's "
                   "time-sharing)")
    p.add_argument("--fits", type=floats, default=[], help="fit weights to sweep, e.g. "
                   "0,0.25,0.5,0.75,1")
    p.add_argument("--mem-scale", type=float, default=1.5, help="job memory scale of the "
                   "headline run (default 1.5)")
    p.add_argument("--reps", type=int, default=20, help="job sets per mix (default 20: a "
                   "batch's makespan moves by a few points between job sets)")
    p.add_argument("--slopes", type=floats, default=[], help="slopes to sweep, e.g. 0.1,0.2,0.4")
    p.add_argument("--mem-scales", type=floats, default=[1.0], help="memory scales to sweep")
    p.add_argument("--mixes", default="", help="override shares: 'ss,sl/ls,ll' for W-Small "
                   "and W-Large (short share, light share)")
    p.add_argument("--profile-waits", type=floats, default=[], help="PAB profiling waits "
                   "T_wait (s) to sweep, e.g. 0,15,30,60")
    p.add_argument("--oom-shares", type=floats, default=[], help="OBP shares of jobs failing "
                   "on OOM to sweep, e.g. 0,0.1,0.2,0.3")
    p.add_argument("--oom-after", type=float, default=60.0, help="seconds after placement an "
                   "under-estimated job fails (default 60)")
    p.add_argument("--heavy-shares", type=floats, default=[], help="W-Large shares of heavy "
                   "jobs to sweep, e.g. 0.2,0.35,0.5,0.65,0.8")
    p.add_argument("--large-shorts", type=floats, default=[MIXES["W-Large"][0]],
                   help="W-Large shares of short jobs for --heavy-shares (default: the "
                        f"mix's, {MIXES['W-Large'][0]:g})")
    p.add_argument("--skip-headlines", action="store_true", help="only the sweeps asked for")
    p.add_argument("--trace", default="6214e9", help="Philly trace for Table 7")
    p.add_argument("--large-jobs", type=int, default=1000, help="trace jobs for Table 7 (0 "
                   "skips it)")
    p.add_argument("--nodes", type=int, default=8, help="8-GPU nodes for Table 7 (default 8: "
                   "the paper's 128 are never loaded by a shared trace)")
    p.add_argument("--large-mem", type=float, default=1.0, help="scale of Table 7's synthetic "
                   "job memory (default 1: 0.8-3.2 GiB)")
    p.add_argument("--draws", type=int, default=5, help="draws of Table 7's synthetic "
                   "utilization and memory to average over (default 5)")
    p.add_argument("--compress", type=float, default=1.0, help="divide the trace's arrival "
                   "times by this (default 1)")
    args = p.parse_args(argv)
    args.shares = dict(MIXES)
    if args.mixes:
        for mix, text in zip(MIXES, args.mixes.split("/"), strict=True):
            a, b = floats(text)
            args.shares[mix] = (a, b)
    if args.slope is None:
        curve = load_profile("horus-testbed-3x4").slowdown_curves["rtx2080"]
        args.slope = curve.quadratic[0]
    for fit in (args.fit, *args.fits):
        if not 0.0 <= fit <= 1.0:
            p.error(f"--fit/--fits: {fit:g} is not a weight in [0, 1]")
    args.curve = time_share_curve(args.slope, args.fit)
    for flag, count in (("--reps", args.reps), ("--draws", args.draws)):
        if count < 1:
            p.error(f"{flag}: {count} is not a positive count")
    if args.profile_waits or args.oom_shares:
        gaps(args)
    if args.heavy_shares:
        heavy_mix(args)
    if args.fits:
        overcommit(args)
    if args.slopes:
        sweep(args)
    if args.skip_headlines:
        return
    results = {}
    for mix, shares in args.shares.items():
        results[mix] = testbed(shares, args.curve, args.mem_scale, args.reps)
        print_testbed(mix, f"{setup(args)}, short {shares[0]:g}, light {shares[1]:g}",
                      results[mix])
    headlines(results, f"{setup(args)}, 3x4 RTX 2080, batch at t = 0")
    if args.large_jobs > 0:
        large_scale(args)


if __name__ == "__main__":
    main()
