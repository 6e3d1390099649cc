"""OJPP §5.3 reproduced on its measured inputs: Table 5, the balance test (Fig. 9), OJPAP (Fig. 10).

Inputs: :mod:`simulator.inputs.ojpp_workload` (Fig. 3's interference entries and the memory profile
the text quotes, ``simulator/inputs/ojpp_measured.json``; the rest filled by ``--unknown``,
``--resnet-unknown`` and ``--alpha``). Static batches of 20 jobs of 1-10 workers at t = 0 on
as many 11 GiB devices as workers (``ojpp-1080ti`` resized), four kinds, ``--seeds`` batches
each; batch ``s`` of each kind on the ``s``-th draw of the unquoted entries.

1. **Table 5** under both readings of its tuple: §5.2 writes (tau-bar, theta-bar, theta') =
   (0.1, 0.2, 0.1); the table's header reads (tau-bar, theta', theta-bar). Devices saved
   (1 - devices / workers) and performance two ways: ``1 - mean slowdown`` and the paper's
   "in terms of average job completion time", mean JCT alone / mean JCT shared (JCT from the
   start). ``ojpp`` without migration (a static placement).
   Then Table 5 (§5.2 reading) on each kind's batches alone and on all four: the paper does
   not say which queue Table 5 ran on.
2. **Balance** (Fig. 9): every job with ``w`` workers, ``ojpp`` against ``ojpp`` without the
   balance bound (theta' = 5), mean slowdown.
3. **OJPAP** (Fig. 10): the Average kind arriving online (Poisson, ``--online-jobs`` jobs, mean
   gap ``--gap-min``) on 64 devices, ``ojpp`` without and with migration; a migration costs
   5 % of a mean job (§5.3.2: "the migration cost is negligible (5%)"), charged as the
   profile's restart overhead.

Run from the project root: ``nice python benchmarks/reproduce/ojpp.py`` (50 batches per kind);
``--seeds 200`` for the figures in ``docs/fidelity/ojpp.md`` (a one-kind mean of 30 batches
has a standard error of up to 3 points, which the per-kind table prints), ``--sweep`` to
sweep the unknowns.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_colocation import ojpp_profile  # noqa: E402  (after the path is set)

from policies import make_policy  # noqa: E402
from simulator import Workload, load_profile, simulate  # noqa: E402
from simulator.inputs.ojpp_workload import KINDS, ojpp_batch, ojpp_interference  # noqa: E402
from simulator.inputs.profile import ClusterProfile  # noqa: E402
from simulator.result import SimulationResult  # noqa: E402
from simulator.rounds import RoundState  # noqa: E402

TABLE5 = ((0.05, 0.1, 0.1), (0.05, 0.2, 0.1), (0.05, 0.4, 0.1), (0.1, 0.2, 0.1),
          (0.1, 0.2, 0.2), (0.1, 0.4, 0.2))
"""Table 5's tuples in column order, as printed."""
PAPER5 = ((17, 99.96), (39, 94.23), (57, 84.37), (46, 92.97), (52, 87.96), (61, 83.17))
"""Table 5: reduced resource consumption (%) and guaranteed performance (%)."""
HEADLINES = {"tightest (0.05, 0.1, 0.1)": 0, "default (0.1, 0.2, 0.1)": 3,
             "loosest (0.1, 0.4, 0.2)": 5}
READINGS = {"§5.2 (tau, theta, theta')": (0, 1, 2), "header (tau, theta', theta)": (0, 2, 1)}
"""Which tuple position is (tau_max, theta_max, theta_balance)."""


def metrics(r: SimulationResult, wl: Workload) -> tuple[float, float, float]:
    """Devices saved, 1 - mean slowdown, mean JCT alone / mean JCT shared."""
    alone = wl.service_s / wl.gpus
    jct = r.finish_s - r.start_s
    return (1.0 - r.gpus_used / float(wl.gpus.sum()), 1.0 - float(np.mean(r.slowdown)),
            float(np.mean(alone) / np.mean(jct)))


def pair(text: str) -> tuple[float, float]:
    lo, hi = floats(text)
    return lo, hi


def batches(args: argparse.Namespace, unknown: tuple[float, float], alpha: float, *,
            workers: tuple[int, int] = (1, 10), kinds: tuple[str, ...] = KINDS
            ) -> list[Workload]:
    """``args.seeds`` batches of each kind, kind by kind. Fig. 3's unquoted entries are a
    draw, not a measurement: batch ``s`` of every kind runs on their ``s``-th draw (the same
    draws for every kind), so a mean over batches is a mean over draws too."""
    inter = [ojpp_interference(unknown, args.resnet_unknown, seed=s) for s in range(args.seeds)]
    return [ojpp_batch(k, s, alpha=alpha, workers=workers, interference=inter[s],
                       mem_scale=args.mem_scale, surge_scale=args.surge_scale)
            for k in kinds for s in range(args.seeds)]


def run_ojpp(args: argparse.Namespace, wls: list[Workload], tau: float, theta: float,
             balance: float, lone: str | None = None, first_seed: int = 0) -> np.ndarray:
    """Mean (saved, perf, perf_jct) of ``ojpp`` without migration over the batches (see
    :func:`per_batch`)."""
    return np.mean(per_batch(args, wls, tau, theta, balance, lone, first_seed), axis=0)


def per_batch(args: argparse.Namespace, wls: list[Workload], tau: float, theta: float,
              balance: float, lone: str | None = None, first_seed: int = 0) -> np.ndarray:
    """(saved, perf, perf_jct) of ``ojpp`` without migration, a row per batch, a lone worker
    read in eq. 16 as ``lone`` (default ``--lone``); batch ``i`` runs with engine seed
    ``first_seed + i``."""
    out = []
    for i, wl in enumerate(wls, start=first_seed):
        pol = make_policy("ojpp", {"tau_max": tau, "theta_max": theta,
                                   "theta_balance": balance, "migration_budget": 0.0,
                                   "balance_lone": lone or args.lone})
        prof = replace(ojpp_profile(int(wl.gpus.sum())), collision_slowdown=args.collision)
        out.append(metrics(simulate(wl, prof, pol, seed=i), wl))
    return np.array(out)


def table5(args: argparse.Namespace, wls: list[Workload],
           setup: str) -> dict[str, list[np.ndarray]]:
    """Every setting under both readings, printed with the means; per reading, each column's
    :func:`per_batch` rows."""
    res: dict[str, list[np.ndarray]] = {}
    for reading, (a, b, c) in READINGS.items():
        print(f"\n## Table 5, reading {reading} ({setup})")
        print(f"{'column':<16} {'saved %':>7} {'paper':>5} {'perf %':>7} {'perf(JCT) %':>11} "
              f"{'paper':>6}")
        res[reading] = []
        for col, (ps, pp) in zip(TABLE5, PAPER5, strict=True):
            rows = per_batch(args, wls, col[a], col[b], col[c])
            res[reading].append(rows)
            m = rows.mean(axis=0)
            print(f"{col!s:<16} {100 * m[0]:>7.1f} {ps:>5} {100 * m[1]:>7.2f} "
                  f"{100 * m[2]:>11.2f} {pp:>6.2f}", flush=True)
    return res


def headlines(res: dict[str, list[np.ndarray]], setup: str) -> None:
    print(f"\n## headlines ({setup}); perf = mean JCT alone / mean JCT shared")
    print(f"{'headline':<60} {'paper':>7} {'ours':>7} {'ours/paper':>10}")
    for reading, rows in res.items():
        for name, i in HEADLINES.items():
            ps, pp = PAPER5[i]
            m = rows[i].mean(axis=0)
            for what, paper, ours in (("devices saved", ps, 100 * m[0]),
                                      ("performance", pp, 100 * m[2])):
                label = f"{what}, {name}, {reading.split()[0]}"
                print(f"{label:<60} {paper:>6.2f}% {ours:>6.2f}% {ours / paper:>10.2f}")


def cell(m: np.ndarray, paper: tuple[float, float], se: float | None = None) -> str:
    """Saved % and perf(JCT) % of ``m``, each with ours / the paper's; with ``se``, the
    saved share's standard error after it."""
    spread = "" if se is None else f"±{100 * se:.1f}"
    return (f"{100 * m[0]:4.1f}{spread} ({100 * m[0] / paper[0]:.2f}) "
            f"{100 * m[2]:5.2f} ({100 * m[2] / paper[1]:.2f})")


BALANCE_READINGS = {"zero": "lone worker counts 0", "excluded": "co-located workers only",
                    "off": "theta' off"}
"""How eq. 16 treats a worker alone on its device (``ojpp``'s ``balance_lone``), and the bound
switched off for reference."""


def balance_reading(args: argparse.Namespace, wls: list[Workload]) -> None:
    """The §5.2-reading headlines under each reading of a lone worker in eq. 16, and with the
    balance bound theta' off: which reading, if any, gives the paper's numbers."""
    print("\n## §5.2 reading of the tuple, by eq. 16's reading of a worker alone on its device: "
          "saved % (ours / paper), perf(JCT) % (ours / paper)")
    print(f"{'reading':<34} " + " ".join(f"{n.split()[0]:>27}" for n in HEADLINES))
    for reading, label in BALANCE_READINGS.items():
        cells = []
        for i in HEADLINES.values():
            tau, theta, bal = TABLE5[i]
            m = (run_ojpp(args, wls, tau, theta, 5.0) if reading == "off"
                 else run_ojpp(args, wls, tau, theta, bal, reading))
            cells.append(cell(m, PAPER5[i]))
        print(f"{reading + ': ' + label:<34} " + " ".join(f"{c:>27}" for c in cells), flush=True)


def sem(x: np.ndarray) -> float | None:
    """The standard error of the mean of ``x`` (None with fewer than two values)."""
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else None


def by_kind(args: argparse.Namespace, columns: list[np.ndarray]) -> None:
    """Table 5 (§5.2 reading, eq. 16 as ``--lone``) on each kind's batches alone, from the
    :func:`table5` rows of that reading (``columns``: one array a column, kind by kind as
    :func:`batches` lays them out), and on all four: §5.2 builds four workload queues, and the
    paper does not say which one Table 5 ran on. Each saved share carries its standard error
    over the draws: for one kind over its batches (batch ``s`` on draw ``s``), for all four
    over each draw's mean of the four kinds."""
    print(f"\n## Table 5 by workload kind (§5.2 reading, lone worker {args.lone}): "
          "saved % ± standard error (ours / paper), perf(JCT) % (ours / paper)")
    print(f"{'kind':<8} " + " ".join(f"{c!s:>30}" for c in TABLE5))
    print(f"{'paper':<8} " + " ".join(f"{f'{s} {p:.2f}':>30}" for s, p in PAPER5))
    draws = [rows.reshape(len(KINDS), args.seeds, -1) for rows in columns]
    for k, kind in enumerate((*KINDS, "all")):
        cells = []
        for d, paper in zip(draws, PAPER5, strict=True):
            per_draw = d[k] if k < len(KINDS) else d.mean(axis=0)
            cells.append(cell(per_draw.mean(axis=0), paper, sem(per_draw[:, 0])))
        print(f"{kind:<8} " + " ".join(f"{c:>30}" for c in cells), flush=True)


def sweep(args: argparse.Namespace) -> None:
    print("\n## sweep over the unknowns (reading §5.2): saved % / perf(JCT) % at tightest, "
          "default, loosest")
    print(f"{'unknown':>9} {'alpha':>5} {'mem x':>5} "
          + " ".join(f"{n.split()[0]:>15}" for n in HEADLINES))
    for unknown, alpha, mem in itertools.product(args.unknowns, args.alphas, args.mem_scales):
        wls = batches(argparse.Namespace(**{**vars(args), "mem_scale": mem}), unknown, alpha)
        cells = [run_ojpp(args, wls, *TABLE5[i]) for i in HEADLINES.values()]
        print(f"{unknown[0]:g}-{unknown[1]:g}".rjust(9) + f" {alpha:>5g} {mem:>5g} " + " ".join(
            f"{100 * m[0]:>6.1f} / {100 * m[2]:>6.2f}" for m in cells), flush=True)


def balance(args: argparse.Namespace) -> None:
    print(f"\n## Fig. 9 balance: mean slowdown % by workers per job (mixed kind, {args.seeds} "
          f"batches, (tau, theta) = (0.1, 0.2))")
    print(f"{'workers':>7} {'ojpp (theta 0.1)':>16} {'no balance':>10}")
    for w in (1, 2, 4, 6, 8, 10):
        wls = batches(args, args.unknown, args.alpha, workers=(w, w), kinds=("mixed",))
        with_b, without = run_ojpp(args, wls, 0.1, 0.2, 0.1), run_ojpp(args, wls, 0.1, 0.2, 5.0)
        print(f"{w:>7} {100 * (1 - with_b[1]):>16.2f} {100 * (1 - without[1]):>10.2f}",
              flush=True)


def online(args: argparse.Namespace) -> None:
    """OJPAP: Average jobs arriving over time; with and without migration. Engine seed ``s``
    (memory surges) runs on the ``s``-th draw of Fig. 3's unquoted entries."""
    rng = np.random.default_rng(0)
    parts = [ojpp_batch("average", s, alpha=args.alpha, mem_scale=args.mem_scale,
                        surge_scale=args.surge_scale)
             for s in range(max(1, args.online_jobs // 20))]
    df = pd.concat([p.to_frame() for p in parts], ignore_index=True).drop(columns="job_id")
    df["arrival_s"] = np.cumsum(rng.exponential(args.gap_min * 60.0, len(df)))
    wl = Workload.from_frame(df, scaling=parts[0].scaling, source="ojpp-online")
    draws = [replace(wl, interference=ojpp_interference(args.unknown, args.resnet_unknown,
                                                        seed=s))
             for s in range(args.online_seeds)]
    base = load_profile("ojpp-1080ti")
    mean_job = float(np.mean(wl.service_s / wl.gpus))
    prof = replace(base, restart_overhead_s=0.05 * mean_job,
                   collision_slowdown=args.collision)
    print(f"\n## OJPAP online (Fig. 10): {len(wl)} Average jobs, Poisson gaps of "
          f"{args.gap_min:g} min, 64 devices, migration = 5 % of a mean job "
          f"({0.05 * mean_job:.0f} s); the worst interference over time (the model's, no "
          f"collisions; measured from progress), time-weighted, theta-bar 0.2")
    print(f"{'round s':>7} {'budget GiB':>10} {'a':>4} {'mean slowdown %':>15} {'p90 %':>6} "
          f"{'max %':>6} {'model worst %':>13} {'measured worst %':>16} "
          f"{'time > theta-bar %':>18} {'migrations':>10} {'migrating % of JCT':>18} "
          f"{'perf(JCT) %':>11}   (means over {args.online_seeds} engine seeds and draws)")
    for round_s, budget, a in itertools.product(args.rounds, args.budgets, args.ewmas):
        if budget == 0 and a != args.ewmas[0]:
            continue  # without adjustment the EWMA changes no decision
        params = {"migration_budget": budget, "ewma_a": a, "round_s": round_s,
                  "balance_lone": args.lone}
        m = np.mean([online_run(w, prof, params, seed) for seed, w in enumerate(draws)],
                    axis=0)
        print(f"{round_s:>7g} {budget:>10g} {a:>4g} {m[0]:>15.2f} {m[1]:>6.1f} {m[2]:>6.1f} "
              f"{m[3]:>13.1f} {m[4]:>16.1f} {m[5]:>18.1f} {m[6]:>10.0f} {m[7]:>18.1f} "
              f"{m[8]:>11.2f}", flush=True)


def online_run(wl: Workload, prof: ClusterProfile, params: dict[str, Any],
               seed: int) -> np.ndarray:
    """One OJPAP run: mean, p90 and max slowdown; the model's and the measured worst
    interference and the share of time the measured one is above theta-bar 0.2 (:class:`Trace`);
    migrations, the time they cost as a share of the jobs' JCT; performance. Percent."""
    trace = Trace(make_policy("ojpp", params), prof.restart_overhead_s)
    r = simulate(wl, prof, trace, seed=seed)
    s = 100 * r.slowdown
    jct = r.finish_s - r.start_s
    perf = float(np.mean(wl.service_s / wl.gpus) / np.mean(jct))
    model, measured, over = trace.summary(float(r.finish_s.max()), 0.2)
    moves = float(r.preemptions.sum())
    return np.array([s.mean(), np.percentile(s, 90), s.max(), 100 * model, 100 * measured,
                     100 * over, moves, 100 * moves * prof.restart_overhead_s / float(jct.sum()),
                     100 * perf])


@dataclass
class Trace:
    """Runs a sharing policy and records Fig. 10's curve: after each decision, the worst
    device's interference under the sharing model (collisions left out), and over each
    interval between decisions the worst slowdown measured from progress (alone rate x
    elapsed / work done - 1, collisions included) of the jobs that kept their devices through
    it and for ``restart_s`` before it (a job moved or started may pay a restart)."""

    inner: Any
    restart_s: float
    seen: list[tuple[float, float, float]] = field(default_factory=list)
    moved: dict[int, float] = field(default_factory=dict)
    last: dict[int, tuple[float, float, bytes]] = field(default_factory=dict)
    shares_gpus = True

    @property
    def round_s(self) -> float:
        return float(self.inner.round_s)

    @property
    def reacts(self) -> bool:
        return bool(self.inner.reacts)

    def plan(self, state: RoundState) -> Any:
        measured = 0.0
        alone = state.rate(state.alloc)
        for j, r in enumerate(state.rows):
            t0, att0, where = self.last.get(int(r), (np.nan, 0.0, b""))
            work = state.attained[j] - att0
            if where == state.placed[j].tobytes() and state.placed[j].any() and work > 0:
                measured = max(measured, alone[j] * (state.now - t0) / work - 1.0)
        if self.seen:
            self.seen[-1] = (*self.seen[-1][:2], measured)
        out = self.inner.plan(state)
        sh = state.sharing
        theta = 0.0
        if sh is not None and out.size:
            theta = float(sh.worker_slowdowns(state.rows, out.astype(bool)).max())
        self.seen.append((state.now, theta, 0.0))
        after = out.astype(bool)
        for j, r in enumerate(state.rows):
            if state.placed.shape != after.shape or (after[j] != state.placed[j]).any():
                self.moved[int(r)] = state.now
        self.last = {int(r): (state.now, float(state.attained[j]), after[j].tobytes())
                     for j, r in enumerate(state.rows)
                     if state.now >= self.moved.get(int(r), -np.inf) + self.restart_s}
        return out

    def summary(self, end: float, bound: float) -> tuple[float, float, float]:
        """Up to ``end``, time-weighted: the mean of the model's worst interference, the mean
        of the measured worst slowdown, and the share of the time the measured one was above
        ``bound``."""
        t = np.array([x[0] for x in self.seen] + [end])
        model, measured = np.array([x[1:] for x in self.seen]).T
        dt = np.clip(np.diff(t), 0.0, None)
        total = float(dt.sum())
        return (float(dt @ model) / total, float(dt @ measured) / total,
                float(dt @ (measured > bound + 1e-9)) / total)


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=50, help="batches per kind, each on its own "
                   "draw of Fig. 3's unquoted entries (default 50)")
    p.add_argument("--unknown", type=pair, default=(0.0, 0.3), help="range of an unquoted "
                   "pair's slowdown, drawn uniformly (default 0,0.3)")
    p.add_argument("--resnet-unknown", type=float, default=0.5, help="an unquoted ResNet row "
                   "entry (default 0.5; the text implies > 0.2)")
    p.add_argument("--alpha", type=float, default=0.25, help="compute need of every worker "
                   "(default 0.25)")
    p.add_argument("--collision", type=float, default=1.0, help="extra slowdown while two "
                   "workers on a device surge at once (default 1.0, the profile's)")
    p.add_argument("--mem-scale", type=float, default=1.0, help="scale of the assumed memory "
                   "profiles (every model but ResNet; default 1)")
    p.add_argument("--mem-scales", type=floats, default=[0.5, 1.0])
    p.add_argument("--surge-scale", type=float, default=1.0, help="scale of the assumed "
                   "profiles' surge probability p (every model but ResNet, at most 1; "
                   "default 1: LeNet and LSTM 0.2, VGG, AlexNet and CNN 0.05)")
    p.add_argument("--lone", choices=("zero", "excluded"), default="zero",
                   help="eq. 16's reading of a worker alone on its device for Table 5, the "
                        "sweep, Fig. 9 and OJPAP (default zero, the policy's)")
    p.add_argument("--sweep", action="store_true", help="sweep --unknowns x --alphas")
    p.add_argument("--unknowns", type=lambda t: [pair(x) for x in t.split("/")],
                   default=[(0.0, 0.2), (0.0, 0.3), (0.05, 0.3), (0.0, 0.4)],
                   help="ranges to sweep, e.g. 0,0.2/0,0.3")
    p.add_argument("--alphas", type=floats, default=[0.2, 0.25, 0.34])
    p.add_argument("--online-jobs", type=int, default=60, help="OJPAP jobs (default 60)")
    p.add_argument("--gap-min", type=float, default=5.0, help="OJPAP mean gap (default 5 min)")
    p.add_argument("--budgets", type=floats, default=[0.0, 1.0, 2.0, 4.0, 8.0, 100.0],
                   help="OJPAP migration budgets c-bar, GiB (0: no adjustment)")
    p.add_argument("--ewmas", type=floats, default=[0.5, 0.9], help="OJPAP EWMA weights a")
    p.add_argument("--online-seeds", type=int, default=3,
                   help="OJPAP engine seeds (memory surges), each on its own draw of Fig. 3's "
                        "unquoted entries, averaged (default 3)")
    p.add_argument("--rounds", type=floats, default=[60.0],
                   help="OJPAP seconds between decisions besides arrivals and completions")
    args = p.parse_args(argv)
    for flag, count in (("--seeds", args.seeds), ("--online-seeds", args.online_seeds)):
        if count < 1:
            p.error(f"{flag}: {count} is not a positive count")
    if not (np.isfinite(args.surge_scale) and args.surge_scale >= 0):
        p.error(f"--surge-scale: must be a finite number >= 0 (got {args.surge_scale:g})")
    for flag, values in (("--mem-scale", [args.mem_scale]), ("--mem-scales", args.mem_scales)):
        for x in values:
            if not (np.isfinite(x) and x > 0):
                p.error(f"{flag}: must be a finite number > 0 (got {x:g})")
    setup = (f"unknown {args.unknown[0]:g}-{args.unknown[1]:g}, ResNet unknown "
             f"{args.resnet_unknown:g}, alpha {args.alpha:g}, collision {args.collision:g}, "
             f"lone worker {args.lone}, memory x{args.mem_scale:g}, surge p "
             f"x{args.surge_scale:g}, "
             f"{args.seeds} batches x {len(KINDS)} kinds, batch s on draw s of the unquoted "
             f"entries")
    wls = batches(args, args.unknown, args.alpha)
    res = table5(args, wls, setup)
    headlines(res, setup)
    balance_reading(args, wls)
    by_kind(args, res[next(iter(READINGS))])
    if args.sweep:
        sweep(args)
    balance(args)
    online(args)


if __name__ == "__main__":
    main()
