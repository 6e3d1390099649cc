"""Optimus and 3Sigma, two of UniSched's baselines (papers/unisched.md §IV-D), on its nodes.

Both decide every ``lease_s`` on the round engine, on the nodes UniSched, LLF, Hydra and the
gang baselines (:mod:`policies.unisched.gang_baselines`) use: each job runs on whole GPUs,
placed on as few nodes as possible (:func:`policies.gangs.priority_plan`), and both preempt.
A job's remaining time at ``g`` GPUs comes from its model's speed-up curve (``speedup[model,
g]``) and the workload's estimate of its work, as every baseline here reads it.

- **Optimus-gang** (Optimus [19], "dynamically allocates GPU resources for jobs ... to
  minimize the job completion time"; best-effort, no SLO information). Every lease each job
  first gets its smallest gang (``min_gpus``; Optimus starts every job on one worker), in
  the order ``admit`` names while GPUs last: ``"shortest"``, least remaining work at that
  gang first (the order that minimises mean completion time, Optimus's objective), or
  ``"arrival"``. The GPUs left then go one at a time to the job whose remaining time falls
  most with one more GPU, ``T(g) - T(g + 1)`` with ``T(g) = work / speed(g)`` (Optimus's
  marginal gain), up to its demand; ties to the earlier job. The curve decides who grows:
  on linear scaling the longest jobs gain most from each GPU.
- **3Sigma-gang** (3Sigma [22]: SLO jobs scheduled on predicted runtime *distributions*, SLO
  jobs before best-effort ones, "the scheduling cycle ... 60 seconds"). A job's remaining
  time at its full gang is uncertain: log-normal with its estimate as median and shape
  ``runtime_sigma``. An SLO job's expected utility if it runs from ``t`` on is
  ``EU(t) = sum_k w_k (P(t + R <= d_k) - P(t + R <= d_{k-1}))`` over its deadline steps
  ``d_k`` worth ``w_k`` / 100 (one step of 100 for a strict job). Every lease the SLO jobs
  that can still earn ``min_utility`` go first, by the utility they lose if they wait
  ``plan_ahead_s`` (``EU(now) - EU(now + plan_ahead_s)``, 3Sigma's plan-ahead) per GPU-second
  they need; then best-effort jobs, least remaining GPU-seconds first; last the SLO jobs
  that cannot earn ``min_utility`` any more, least remaining GPU-seconds first. The greedy
  order stands in for 3Sigma's MILP over start times: a job whose deadline is far loses
  nothing by waiting and yields to one that would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import param, register
from policies.gangs import priority_plan
from policies.round_kernel import FloatArray
from policies.unisched.baselines import _apply, _EveryLease, _remaining_s, _tiered
from simulator.inputs.slo import SOFT, STRICT
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import PLAN, ROUND_KERNEL_SIG, active_rows, set_plan, speed

__all__ = ["OptimusGang", "ThreeSigmaGang", "expected_utility", "time_at"]

ADMITS = ("shortest", "arrival")
# kernel parameters (memory.params)
P_ARRIVAL = 0  # Optimus: 1 = admit in arrival order
P_SIGMA, P_AHEAD, P_MIN_U = range(3)  # 3Sigma


@njit
def time_at(C: Any, J: Any, r: int, g: int) -> float:
    """Row ``r``'s estimated remaining time on ``g`` GPUs (its speed-up curve)."""
    m = J.model[r]
    full = C.speedup[m, min(J.demand[r], C.speedup.shape[1] - 1)]
    return _remaining_s(C, J, r) * full / speed(C, m, float(g))


@njit
def _grant(C: Any, J: Any, rows: Any, order: Any, free: int) -> Any:
    """Optimus's GPU counts for ``rows``: smallest gangs in ``order`` while they fit, then
    one GPU at a time by the largest cut in remaining time (module docstring)."""
    n = rows.shape[0]
    gpus = np.zeros(n, dtype=np.int64)
    for a in order:
        need = max(J.min_gpus[rows[a]], 1)
        if need <= free:
            gpus[a] = need
            free -= need
    while free > 0:
        best, gain = -1, 0.0
        for a in range(n):  # rows are in arrival order: the earlier job wins a tie
            g = gpus[a]
            if 0 < g < J.demand[rows[a]]:
                cut = time_at(C, J, rows[a], g) - time_at(C, J, rows[a], g + 1)
                if cut > gain:
                    best, gain = a, cut
        if best < 0:
            break
        gpus[best] += 1
        free -= 1
    return gpus


@njit_lazily(ROUND_KERNEL_SIG)
def _optimus(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Smallest gangs first, then GPUs by marginal gain; preemptive."""
    rows = active_rows(E).copy()
    n = rows.shape[0]
    work = np.empty(n)
    for a in range(n):
        need = max(J.min_gpus[rows[a]], 1)
        work[a] = time_at(C, J, rows[a], need) * need
    order = np.arange(n) if M.params[P_ARRIVAL] > 0 else np.argsort(work, kind="mergesort")
    gpus = _grant(C, J, rows, order, int(C.node_gpus.sum()))
    # place the largest gangs first so they span the fewest nodes (ties: arrival)
    place = np.argsort(-gpus, kind="mergesort")
    plan = priority_plan(place, gpus, J.alloc[rows], C.node_gpus, np.zeros(n, dtype=np.bool_))
    for a in range(n):
        set_plan(M, rows[a], plan[a])
    return PLAN


@njit
def _done_by(x: float, median: float, sigma: float) -> float:
    """P(R <= x) for a log-normal remaining time R of ``median`` and shape ``sigma``."""
    if x <= 0.0:
        return 0.0
    if median <= 0.0:
        return 1.0
    if sigma <= 0.0:
        return 1.0 if x >= median else 0.0
    return 0.5 * (1.0 + math.erf(math.log(x / median) / (sigma * math.sqrt(2.0))))


@njit
def expected_utility(J: Any, r: int, t: float, median: float, sigma: float) -> float:
    """Row ``r``'s expected utility, in [0, 1], if it runs from ``t`` on with a remaining time
    of ``median`` and shape ``sigma``: each deadline step's reward / 100 times the chance of
    finishing after the step before it and by this one (module docstring)."""
    total, before = 0.0, 0.0
    for k in range(J.deadlines.shape[1]):
        d = J.deadlines[r, k]
        if np.isnan(d):
            break
        by = _done_by(d - t, median, sigma)
        total += J.rewards[r, k] / 100.0 * (by - before)
        before = max(before, by)
    return total


@njit_lazily(ROUND_KERNEL_SIG)
def _three_sigma(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Urgent SLO jobs by utility lost waiting per GPU-second, then best-effort jobs, then
    hopeless SLO jobs, each of the last two by least remaining GPU-seconds; preemptive."""
    rows = active_rows(E).copy()
    n = rows.shape[0]
    sigma, ahead, floor = M.params[P_SIGMA], M.params[P_AHEAD], M.params[P_MIN_U]
    tier, key = np.empty(n, dtype=np.int64), np.empty(n)
    for a in range(n):
        r = rows[a]
        left = _remaining_s(C, J, r)
        cost = left * max(J.demand[r], 1)
        tier[a], key[a] = 1, cost
        if J.job_class[r] == STRICT or J.job_class[r] == SOFT:
            now_u = expected_utility(J, r, now, left, sigma)
            if now_u >= floor:
                lost = now_u - expected_utility(J, r, now + ahead, left, sigma)
                tier[a], key[a] = 0, -lost / max(cost, 1.0)
            else:
                tier[a] = 2
    return _apply(C, J, M, rows, _tiered(tier, key), np.zeros(n, dtype=np.bool_))


@register
@dataclass(frozen=True)
class OptimusGang(_EveryLease):
    """Optimus's marginal-gain GPU allocation on whole GPUs, every lease (module
    docstring)."""

    name: ClassVar[str] = "optimus-gang"
    summary: ClassVar[str] = ("smallest gangs first, then GPUs by the largest cut in remaining "
                              "time (Optimus), every lease")
    kernel = staticmethod(_optimus)

    admit: str = param("shortest", kind="choice", choices=ADMITS,
                       help="who gets a smallest gang first when not all fit: least "
                            "remaining work, or arrival order")

    def kernel_params(self) -> FloatArray:
        return np.array([1.0 if self.admit == "arrival" else 0.0])


@register
@dataclass(frozen=True)
class ThreeSigmaGang(_EveryLease):
    """3Sigma's distribution-based SLO scheduling on whole gangs, every 60 s (module
    docstring)."""

    name: ClassVar[str] = "3sigma-gang"
    summary: ClassVar[str] = ("SLO jobs by expected utility lost waiting, on runtime "
                              "distributions, then best-effort; every 60 s")
    kernel = staticmethod(_three_sigma)

    lease_s: float = param(60.0, low=1.0, high=86400.0, log=True,
                           help="seconds between decisions (3Sigma in UniSched: 60)")
    runtime_sigma: float = param(0.5, low=0.0, high=3.0,
                                 help="log-normal shape of a job's remaining time around "
                                      "its estimate (0: the estimate is exact)")
    plan_ahead_s: float = param(3600.0, low=60.0, high=86400.0, log=True,
                                help="how long a job may wait before the utility it loses "
                                     "counts")
    min_utility: float = param(0.01, low=0.0, high=1.0,
                               help="expected utility (of 1) below which an SLO job goes "
                                    "after the best-effort jobs")

    def kernel_params(self) -> FloatArray:
        return np.array([self.runtime_sigma, self.plan_ahead_s, self.min_utility])
