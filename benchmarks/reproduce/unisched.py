"""UniSched §V-B reproduced like for like: every policy gang-scheduled on the same nodes.

The paper (papers/unisched.md §IV-B, §IV-D) runs UniSched and its baselines in one trace-driven
simulator on C96 (96 nodes x 8 GPUs), Themis "based on the implementation in [38]" (Gavel's
round-based simulator). Here every policy runs on the round engine on ``unisched-c96``'s node
type (V100, restart 30 s, inter-node 0.9, ``--inter-node-factor`` for another; with
``--model-info`` each job's gang spread over nodes runs at its model's speed from Chronus's
``model_info.json`` instead, where the file covers its size) with
``--nodes`` nodes (default 96: C96): UniSched,
``llf`` (GENIE-like), ``hydra``, ``themis-gang``, ``srsf-gang``, ``fifo-gang``
(:mod:`policies.unisched.gang_baselines`) and ``optimus-gang``, each deciding every
``--lease-s`` (300), and ``3sigma-gang`` every 60 s, its cycle in the paper (§IV-D)
(:mod:`policies.unisched.paper_baselines`), ``chronus-gang``
(:mod:`policies.unisched.chronus_gang`, the scheduler UniSched extends, §VI-C), and
``themis-gavel``: Themis as Gavel [38] implements it, the ``gavel`` policy with its
finish-time fairness LP (``objective=finish_time``) in Gavel's own 360 s rounds, with Gavel's
1,920 s between allocation resets and, as in Gavel's simulator, no placement on nodes.

Workloads (Chronus's, ``../shared/data/chronus``, minutes as ``read_chronus`` reads them):
P_SLO (``trace_job_Philly_SLO.csv``), P_MIX1 (``trace_job_Philly_MIX1.csv``), P_MIX1_SOFT (P_MIX1
with half its strict jobs soft, :func:`soften`) and P_MIX2:
Chronus's own ``trace_job_Philly_MIX2.csv`` when ``--mix2-csv`` names it, else P_MIX1's jobs
given Chronus's MIX2 shares (``CHRONUS_MIX2``: 30 % strict, 60 % soft, 10 % best-effort) and
UniSched's deadlines with ``add_slos``. ``--jobs`` cuts each to its first jobs by arrival
(default, as the paper: all 30,940; the whole run takes about 20 CPU-minutes, UniSched about
4 of them per workload).

Prints per workload each policy's weighted deadline miss rate R_slo (eq. 15), best-effort JCT
and wall time, then one table per headline: paper's number, ours, ours / paper, set-up in
one line. Run from the project root: ``python benchmarks/reproduce/unisched.py``
(``--workloads P_MIX1`` for one workload). ``--themis-sweep`` instead sweeps what the paper
does not say about its Themis (lease, fairness knob ``f``; Gavel's round and reset spacing)
and its cluster (C96, C120) on P_MIX1, printing Themis / UniSched's R_slo for each value.
``--by-duration`` adds each policy's R_slo and its SLO jobs' median wait by job length.
``--perf-share P`` gives P of the jobs a performance target, estimated within
``--estimator-error`` by UniSched and Themis and at ``--max-iterations`` times their work by
the rest (:func:`estimates`); a policy written ``NAME:KEY=VALUE,...`` (the list then
``;``-separated) runs with those parameters, e.g. ``llf:late=best-effort``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from policies import Gavel, make_policy  # noqa: E402  (after the path is set)
from policies.unisched.milp import Selection, SelectorInput, charge  # noqa: E402
from policies.unisched.policy import UniSched  # noqa: E402
from simulator import (  # noqa: E402
    Workload,
    load_profile,
    parametric_table,
    read_chronus,
    simulate,
)
from simulator.inputs.generate import add_slos  # noqa: E402
from simulator.inputs.model_info import read_model_info  # noqa: E402
from simulator.inputs.profile import ClusterProfile, NodeGroup  # noqa: E402
from simulator.inputs.slo import SOFT, STRICT, SLOs, pad_steps, soft_staircase  # noqa: E402
from simulator.metrics import METRICS  # noqa: E402

CHRONUS = ROOT.parent / "shared" / "data" / "chronus"
POLICIES = ("unisched", "llf", "hydra", "3sigma-gang", "themis-gang", "themis-gavel",
            "optimus-gang", "srsf-gang", "fifo-gang", "chronus-gang")
DEADLINE_AWARE = ("llf", "hydra", "3sigma-gang")
DL_SCHEDULERS = ("themis-gang", "themis-gavel", "optimus-gang")  # the paper's "DL schedulers"
OWN_LEASE = ("unisched", "3sigma-gang", "themis-gavel")  # own cycles, not --lease-s
ESTIMATOR = ("unisched", "themis-gang", "themis-gavel")
"""The policies that estimate a performance-target job's work with a learning-curve model
(§IV-D: UniSched's Estimator, and Themis "also use[s] the model proposed in [21]"); the
others run it for the user's largest iteration count (``--perf-share``)."""
THEMIS_GAVEL = {"objective": "finish_time"}
"""``themis-gavel``'s parameters of the ``gavel`` policy (the rest are Gavel's defaults)."""


def cluster(nodes: int, inter_node_factor: float | None = None) -> ClusterProfile:
    """UniSched's C96 node type with ``nodes`` nodes (and, if given, that speed for a gang
    spread over nodes instead of the profile's)."""
    base = load_profile("unisched-c96")
    factor = base.inter_node_factor if inter_node_factor is None else inter_node_factor
    return replace(base, name=f"c{nodes}", description=f"{nodes} nodes x 8 GPUs",
                   node_groups=(NodeGroup(nodes, 8, "v100", 32),), inter_node_factor=factor)


def workloads(jobs: int, unit_s: float, mix2_csv: Path | None, seed: int,
              model_info: Path | None = None) -> dict[str, Workload]:
    """The four workloads (``model_info``: each job at its model's spread speeds)."""
    table = (None if model_info is None
             else read_model_info(model_info).merged(parametric_table(64)))

    def read(path: Path) -> Workload:
        return read_chronus(path, time_unit_s=unit_s, scaling=table).head(jobs)
    mix1 = read(CHRONUS / "trace_job_Philly_MIX1.csv")
    mix2 = (read(mix2_csv) if mix2_csv is not None
            else add_slos(mix1, "CHRONUS_MIX2", seed=seed))
    return {"P_SLO": read(CHRONUS / "trace_job_Philly_SLO.csv"), "P_MIX1": mix1,
            "P_MIX2": mix2, "P_MIX1_SOFT": soften(mix1, 0.5, seed)}


def soften(wl: Workload, share: float, seed: int) -> Workload:
    """``wl`` with ``share`` of its strict jobs made soft, drawn with ``seed``: each keeps its
    deadline as the first step of §IV-B's staircase (1 / 1.1 / 1.2 / 1.5 x, worth 100 / 80 /
    50 / 20). Half of P_MIX1's strict jobs gives the project's MIX2 split (35 % strict, 35 %
    soft, 30 % best-effort: ``MIXES["MIX2"]``, an assumption, as neither paper gives MIX2's
    shares) on MIX1's own jobs and deadlines: §V-B's claim (3), that soft deadlines lower
    R_slo, with nothing else changed."""
    assert wl.slos is not None
    old = wl.slos
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3]))
    soft = (old.job_class == STRICT) & (rng.random(len(wl)) < share)
    rows = [soft_staircase(float(old.deadlines_s[i, 0])) if soft[i]
            else ([d for d in old.deadlines_s[i] if not np.isnan(d)],
                  [v for v in old.rewards[i] if not np.isnan(v)]) for i in range(len(wl))]
    slos = SLOs(np.where(soft, SOFT, old.job_class), pad_steps([r[0] for r in rows]),
                pad_steps([r[1] for r in rows]))
    return replace(wl, slos=slos, source=f"{wl.source}+soft({share:g})")


def estimates(wl: Workload, share: float, over: float, error: float,
              rng: np.random.Generator) -> tuple[Workload, Workload]:
    """The jobs as the :data:`ESTIMATOR` policies and as the others estimate them when
    ``share`` of them stop at a performance target (§IV-A: 20 % of the jobs), drawn from
    ``rng``: a learning-curve estimate is off by a Gaussian ``error`` (a fraction; §VI-A
    puts UniSched's mean error within 10 %); without one a scheduler runs such a job for the
    user's largest iteration count, ``over`` times what it needs (§VI-A's comparison, Fig.
    9(b); Chronus "cannot handle the performance-based criteria jobs", §I). The other jobs'
    estimates are exact."""
    perf = rng.random(len(wl)) < share
    off = np.maximum(0.1, 1.0 + rng.normal(0.0, error, len(wl)))
    exact = wl.service_s
    return (replace(wl, estimated_service_s=np.where(perf, exact * off, exact)),
            replace(wl, estimated_service_s=np.where(perf, exact * over, exact)))


def offered_load(wl: Workload, gpus: int) -> float:
    """GPU-seconds asked for over GPU-seconds offered while the jobs arrive."""
    span = float(wl.arrival_s.max() - wl.arrival_s.min())
    return float(wl.service_s.sum()) / (gpus * span) if span > 0 else np.inf


HIGHS = {"solves": 0, "nodes": 0, "work": 0}
"""UniSched's HiGHS solves in the last run, their nodes and the budget work they were charged."""


@dataclass(frozen=True)
class CountedUniSched(UniSched):
    """UniSched that tallies its HiGHS solves in :data:`HIGHS`. It decides on the Python path
    (the host step at every boundary), as UniSched's kernel does
    (``tests/policies/test_unisched_budget.py`` checks the two agree)."""

    name: ClassVar[str] = "unisched-counted"

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        sel = super().select(inp, node_limit)
        if not sel.exact:
            HIGHS["solves"] += 1
            HIGHS["nodes"] += sel.nodes
            HIGHS["work"] += charge(sel)
        return sel


def _spec(name: str) -> tuple[str, dict[str, float | str]]:
    """``NAME`` or ``NAME:KEY=VALUE,...``: the policy and the parameters it sets (a value a
    number where it reads as one)."""
    def value(text: str) -> float | str:
        try:
            return float(text)
        except ValueError:
            return text
    base, _, given = name.partition(":")
    return base, {k: value(v) for k, v in (kv.split("=", 1) for kv in given.split(",") if kv)}


DURATIONS = (("<1 h", 0.0, 3600.0), ("1-4 h", 3600.0, 4 * 3600.0),
             ("4-24 h", 4 * 3600.0, 24 * 3600.0), (">=24 h", 24 * 3600.0, np.inf))
"""The classes of job length (wall-clock time at full demand) ``--by-duration`` splits R_slo
and the SLO jobs' wait by."""


def measure(wl: Workload, profile: ClusterProfile, name: str, params: dict[str, Any]
            ) -> dict[str, float]:
    """R_slo, best-effort JCT (s), wall and CPU time (s) of one policy on one workload, R_slo
    and the SLO jobs' median wait (s) in each :data:`DURATIONS` class, and for UniSched its
    HiGHS tally (:data:`HIGHS`)."""
    t0, c0 = time.perf_counter(), time.process_time()
    HIGHS.update(dict.fromkeys(HIGHS, 0))
    policy = (CountedUniSched.from_params(params) if name == "unisched"
              else make_policy("gavel", THEMIS_GAVEL | params) if name == "themis-gavel"
              else make_policy(name, params))
    r = simulate(wl, profile, policy)
    out = {k: mean(METRICS[k].compute(r)) for k in ("slo_miss", "be_jct")}
    miss, wait = METRICS["slo_miss"].compute(r), r.start_s - wl.arrival_s
    length = wl.duration_s
    for label, lo, hi in DURATIONS:
        rows = (length >= lo) & (length < hi)
        out[f"slo_miss {label}"] = mean(miss[rows])
        slo = rows & ~np.isnan(miss)
        out[f"wait {label}"] = float(np.nanmedian(wait[slo])) if slo.any() else float("nan")
    out["wall"], out["cpu"] = time.perf_counter() - t0, time.process_time() - c0
    if name == "unisched":
        out.update({f"highs_{k}": float(v) for k, v in HIGHS.items()})
    return out


def run(wl: Workload, profile: ClusterProfile, names: list[str], lease_s: float,
        unisched: dict[str, Any], others: Workload | None = None, by_duration: bool = False
        ) -> dict[str, dict[str, float]]:
    """Each policy on ``wl``; ``unisched``: UniSched's parameters (else its defaults);
    ``others``: the same jobs as the policies without :data:`ESTIMATOR` estimate them
    (else ``wl``); ``by_duration``: also each policy's R_slo and median wait by job length."""
    out: dict[str, dict[str, float]] = {}
    for name in names:  # NAME or NAME:KEY=VALUE,... (results keyed by the whole spec)
        base, given = _spec(name)
        params: dict[str, Any] = (dict(unisched) if base == "unisched"
                                  else {} if base in OWN_LEASE else {"lease_s": lease_s})
        seen = wl if others is None or base in ESTIMATOR else others
        out[name] = m = measure(seen, profile, base, params | given)
        tally = (f"  HiGHS: {m['highs_solves']:.0f} solves, {m['highs_nodes']:.0f} nodes, "
                 f"{m['highs_work']:.0f} budget nodes charged" if base == "unisched" else "")
        print(f"  {name:<14}{m['slo_miss']:>9.4f}{m['be_jct'] / 3600:>11.2f}"
              f"{m['wall']:>9.1f}{m['cpu']:>9.1f}{tally}", flush=True)
        if by_duration:
            print("      R_slo / SLO jobs' median wait h by job length: " + ", ".join(
                f"{label} {m[f'slo_miss {label}']:.4f} / {m[f'wait {label}'] / 3600:.2f}"
                for label, _, _ in DURATIONS), flush=True)
    return out


def themis_sweep(wl: Workload, nodes: list[int], leases: list[float], knobs: list[float],
                 resets: list[float], unisched: dict[int, float]) -> None:
    """Themis's unstated facts on P_MIX1: its R_slo over UniSched's on the same cluster
    (``unisched``: R_slo per node count; one not given is run) for every cluster, lease and
    fairness knob ``f`` of ``themis-gang``, and for ``themis-gavel`` with each lease that
    Gavel's ``round_s`` admits as its round and each least time between allocation resets
    (``reset_s``) in ``resets`` (``f`` printed as ``-``, the reset as ``-`` for ``themis-gang``);
    ``*`` marks a ratio within 15 % of the paper's 6.84x."""
    rounds = Gavel.domains()["round_s"]
    gavel = [x for x in leases if rounds.low <= x <= rounds.high]
    print(f"\nThemis sweep, P_MIX1 ({len(wl)} jobs): R_slo Themis / UniSched (paper 6.84x)")
    if len(gavel) < len(leases):
        print(f"  themis-gavel: rounds outside Gavel's {rounds.low:g}-{rounds.high:g} s "
              f"skipped ({', '.join(f'{x:g}' for x in leases if x not in gavel)})")
    print(f"  {'policy':<13}{'nodes':>5}{'lease s':>9}{'f':>6}{'reset s':>9}{'R_slo':>9}"
          f"{'ratio':>9}{'/6.84':>8}{'wall s':>9}")
    for n in nodes:
        profile = cluster(n)
        if n not in unisched:
            unisched[n] = measure(wl, profile, "unisched", {})["slo_miss"]
        print(f"  {'unisched':<13}{n:>5}  R_slo {unisched[n]:.4f}", flush=True)
        runs = [("themis-gang", lease, f"{f:g}", "-", {"lease_s": lease, "fairness_knob": f})
                for lease in leases for f in knobs]
        runs += [("themis-gavel", lease, "-", f"{reset:g}", {"round_s": lease, "reset_s": reset})
                 for lease in gavel for reset in resets]
        for name, lease, knob, reset, params in runs:
            m = measure(wl, profile, name, params)
            got = ratio(m["slo_miss"], unisched[n])
            mark = " *" if abs(got / 6.84 - 1) <= 0.15 else ""
            print(f"  {name:<13}{n:>5}{lease:>9g}{knob:>6}{reset:>9}{m['slo_miss']:>9.4f}"
                  f"{got:>8.2f}x{got / 6.84:>8.2f}{m['wall']:>9.1f}{mark}", flush=True)


def mean(values: np.ndarray) -> float:
    """The mean over the jobs the metric counts (NaN: none, e.g. best-effort JCT on P_SLO)."""
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else np.inf


def span(res: dict[str, dict[str, dict[str, float]]], names: tuple[str, ...], key: str
         ) -> list[float]:
    """Each of ``names``'s ``key`` over UniSched's on P_MIX1 and P_MIX2, where both ran."""
    return [ratio(res[w][b][key], res[w]["unisched"][key])
            for w in ("P_MIX1", "P_MIX2") if w in res and "unisched" in res[w]
            for b in names if b in res[w]]


def headlines(res: dict[str, dict[str, dict[str, float]]], setup: str) -> None:
    print(f"\nset-up: {setup}")
    rows: list[tuple[str, str, str, str]] = []
    for themis in ("themis-gang", "themis-gavel"):
        if "P_MIX1" in res and {"unisched", themis} <= res["P_MIX1"].keys():
            m = res["P_MIX1"]
            ours = ratio(m[themis]["slo_miss"], m["unisched"]["slo_miss"])
            rows.append((f"R_slo Themis ({themis}) / UniSched, P_MIX1", "6.84x",
                         f"{ours:.2f}x", f"{ours / 6.84:.2f}"))
    if "P_SLO" in res and "unisched" in res["P_SLO"]:
        m = res["P_SLO"]
        got = [ratio(m[b]["slo_miss"], m["unisched"]["slo_miss"]) for b in DEADLINE_AWARE
               if b in m]
        if got:
            rows.append(("R_slo deadline-aware / UniSched, P_SLO", "1.17-4.82x",
                         f"{min(got):.2f}-{max(got):.2f}x", "-"))
    if all(w in res and "unisched" in res[w] for w in ("P_MIX1", "P_MIX1_SOFT")):
        before, after = (res[w]["unisched"]["slo_miss"] for w in ("P_MIX1", "P_MIX1_SOFT"))
        rows.append(("UniSched's R_slo, half of P_MIX1's strict jobs soft", "lower",
                     f"{after:.4f} against {before:.4f} ({ratio(after, before):.2f}x)", "-"))
    if "P_MIX2" in res and "unisched" in res["P_MIX2"] and len(res["P_MIX2"]) > 1:
        m = res["P_MIX2"]
        rank = 1 + sum(v["slo_miss"] < m["unisched"]["slo_miss"] for v in m.values())
        best = min((v["slo_miss"], k) for k, v in m.items() if k != "unisched")
        rows.append(("UniSched's R_slo rank on P_MIX2", "1 (best)",
                     f"{rank} of {len(m)} (next: {best[1]} {best[0]:.4f})", "-"))
    # §V-B's other ranges: deadline-aware schedulers on the mixes, the DL schedulers
    for label, names, key, lo, hi in (
            ("best-effort JCT deadline-aware / UniSched, MIX1+MIX2", DEADLINE_AWARE, "be_jct",
             1.66, 4.02),
            ("R_slo deadline-aware / UniSched, MIX1+MIX2", DEADLINE_AWARE, "slo_miss", 0.95, 2.77),
            ("R_slo DL schedulers / UniSched, MIX1+MIX2", DL_SCHEDULERS, "slo_miss", 2.01, 6.84),
            ("best-effort JCT DL schedulers / UniSched, MIX1+MIX2", DL_SCHEDULERS, "be_jct",
             1.18, 3.11)):
        got = span(res, names, key)
        if got:
            rows.append((label, f"{lo:g}-{hi:g}x", f"{min(got):.2f}-{max(got):.2f}x",
                         f"{min(got) / lo:.2f}-{max(got) / hi:.2f}"))
    print(f"  {'headline':<52}{'paper':>12}{'ours':>36}{'ours/paper':>12}")
    for name, paper, ours_s, r in rows:
        print(f"  {name:<52}{paper:>12}{ours_s:>36}{r:>12}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=30940, help="first jobs of each trace "
                    "(default and paper: all 30,940)")
    ap.add_argument("--nodes", type=int, default=96, help="8-GPU nodes (paper: C96 = 96)")
    ap.add_argument("--lease-s", type=float, default=300.0,
                    help="the baselines' lease (UniSched's own leases are its parameters)")
    ap.add_argument("--unit-s", type=float, default=60.0, help="seconds per Chronus time unit")
    ap.add_argument("--mix2-csv", type=Path, default=None,
                    help="Chronus's trace_job_Philly_MIX2.csv (else a stand-in; module doc)")
    ap.add_argument("--workloads", default="P_SLO,P_MIX1,P_MIX2")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="policies, ','-separated, or ';'-separated where one sets "
                         "parameters: 'llf:late=best-effort;hydra' (default: all)")
    ap.add_argument("--seed", type=int, default=0,
                    help="the P_MIX2 stand-in's draw and P_MIX1_SOFT's")
    ap.add_argument("--milp-nodes-per-job", type=float, default=None,
                    help="UniSched's HiGHS budget, nodes per job of the run (default: the "
                         "policy's, 1; 0: the exact method alone)")
    ap.add_argument("--inter-node-factor", type=float, default=None, metavar="F",
                    help="speed of a gang spread over nodes, in (0, 1] (default: the "
                         "profile's, 0.9; Chronus's simulator runs every placement at 1.0)")
    ap.add_argument("--model-info", type=Path, nargs="?", const=CHRONUS / "model_info.json",
                    default=None, metavar="PATH",
                    help="each job at its model's speed spread over 2 nodes / 3 or more, "
                         "from Chronus's model_info.json (default path: the shared one); "
                         "the inter-node factor stays for gangs it has no entry for")
    ap.add_argument("--perf-share", type=float, default=0.0, metavar="P",
                    help="share of the jobs that stop at a performance target (the paper: "
                         "0.2), drawn with --seed; default 0: every estimate exact")
    ap.add_argument("--max-iterations", type=float, default=2.0, metavar="K",
                    help="with --perf-share: policies without a learning-curve estimator "
                         "(all but UniSched and Themis) estimate such a job at the user's "
                         "largest iteration count, K times what it needs")
    ap.add_argument("--estimator-error", type=float, default=0.1, metavar="S",
                    help="with --perf-share: UniSched's and Themis's estimate of such a job "
                         "is off by Gaussian noise of this standard deviation (a fraction)")
    ap.add_argument("--by-duration", action="store_true",
                    help="also each policy's R_slo and its SLO jobs' median wait by job length "
                         "at full demand (<1 h, 1-4 h, 4-24 h, >=24 h): who misses, and how "
                         "long they wait")
    ap.add_argument("--themis-sweep", action="store_true",
                    help="instead: themis-gang on P_MIX1 across --sweep-nodes, --sweep-leases "
                         "and --sweep-knobs, and themis-gavel with those leases as rounds "
                         "and --sweep-resets, against UniSched on each cluster")
    ap.add_argument("--sweep-nodes", default="96,120", help="clusters (C96, C120)")
    ap.add_argument("--sweep-leases", default="60,300,600,1800", help="leases, seconds")
    ap.add_argument("--sweep-knobs", default="0,0.2,0.5,0.8,1", help="fairness knobs f")
    resets = Gavel.domains()["reset_s"]
    ap.add_argument("--sweep-resets", default=f"{Gavel().reset_s:g}",
                    help="themis-gavel's least times between allocation resets, "
                         f"','-separated, seconds in {resets.low:g}-{resets.high:g} "
                         "(default: Gavel's)")
    ap.add_argument("--unisched-rslo", default="96:0.0208",
                    help="UniSched's P_MIX1 R_slo per cluster, NODES:R,... (measured on the "
                         "whole trace; a cluster not named runs UniSched, about 4 CPU-minutes)")
    args = ap.parse_args()
    if args.inter_node_factor is not None and not 0 < args.inter_node_factor <= 1:
        ap.error(f"--inter-node-factor: {args.inter_node_factor} is not in (0, 1]")
    if not 0 <= args.perf_share <= 1:
        ap.error(f"--perf-share: {args.perf_share} is not in [0, 1]")
    if not (args.max_iterations >= 1 and args.estimator_error >= 0):
        ap.error("--max-iterations must be at least 1 (the user's largest count covers "
                 "the job) and --estimator-error at least 0")
    try:
        reset_values = [float(x) for x in args.sweep_resets.split(",")]
        for x in reset_values:
            resets.check("reset_s", x)
    except ValueError as e:  # InvalidPolicyParams is one
        ap.error(f"--sweep-resets {args.sweep_resets!r}: {e}")
    if args.inter_node_factor is not None and args.themis_sweep:
        ap.error("--inter-node-factor: the Themis sweep runs on the profile's factor (its "
                 "--unisched-rslo was measured there); run the headlines with it instead")
    print("reproduce/unisched:", " ".join(f"{k}={v}" for k, v in vars(args).items()))
    profile = cluster(args.nodes, args.inter_node_factor)
    wls = workloads(args.jobs, args.unit_s, args.mix2_csv, args.seed, args.model_info)
    if args.themis_sweep:
        given = dict(item.split(":") for item in args.unisched_rslo.split(",") if item)
        themis_sweep(wls["P_MIX1"], [int(n) for n in args.sweep_nodes.split(",")],
                     [float(x) for x in args.sweep_leases.split(",")],
                     [float(x) for x in args.sweep_knobs.split(",")],
                     reset_values,
                     {int(k): float(v) for k, v in given.items()})
        return
    names = [p for p in args.policies.split(";" if ";" in args.policies or ":" in args.policies
                                            else ",") if p]
    own = ({} if args.milp_nodes_per_job is None
           else {"milp_nodes_per_job": args.milp_nodes_per_job})
    res: dict[str, dict[str, dict[str, float]]] = {}
    t0 = time.perf_counter()
    for key in filter(None, args.workloads.split(",")):
        wl = wls[key]
        span_h = float(wl.arrival_s.max() - wl.arrival_s.min()) / 3600
        print(f"\n{key}: {len(wl)} jobs ({wl.source}), span {span_h:.1f} h, offered load "
              f"{offered_load(wl, profile.total_gpus):.2f} on {profile.total_gpus} GPUs")
        print(f"  {'policy':<14}{'R_slo':>9}{'be_jct h':>11}{'wall s':>9}{'CPU s':>9}")
        others = None
        if args.perf_share > 0:  # a stream of its own, apart from the stand-in's SLO draw
            rng = np.random.default_rng(np.random.SeedSequence([args.seed, int(wl.digest(), 16)]))
            wl, others = estimates(wl, args.perf_share, args.max_iterations,
                                   args.estimator_error, rng)
        res[key] = run(wl, profile, names, args.lease_s, own, others, args.by_duration)
    budget = ("" if args.milp_nodes_per_job is None
              else f"UniSched's HiGHS budget {args.milp_nodes_per_job:g} nodes a job, ")
    headlines(res, f"first {args.jobs} jobs of Chronus's Philly traces, {args.nodes} x 8 V100 "
                   f"(spread gangs at {profile.inter_node_factor:g}"
                   f"{', per model from model_info.json' if args.model_info else ''}), "
                   f"baselines gang-scheduled every {args.lease_s:g} s (themis-gavel: "
                   f"Gavel's rounds, no nodes), {budget}"
                   f"P_MIX2 {'Chronus file' if args.mix2_csv else 'stand-in (CHRONUS_MIX2)'}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
