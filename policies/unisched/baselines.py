"""Deadline-aware baselines UniSched compares against (papers/unisched.md §IV-D).

Both decide every ``lease_s`` on the round engine and give jobs their whole gang, placed on
as few nodes as possible, backfilling past gangs that do not fit.

- **LLF** (GENIE-like): SLO jobs by least laxity first, ``laxity = deadline - now - remaining
  time at full demand`` (the first deadline step not yet passed, else the last one), then
  best-effort jobs in arrival order ("we give best-effort jobs the lowest priority", in an
  order the paper does not give: ``be_order="shortest"`` orders them by remaining time);
  preemptive.
- **Hydra**: SLO jobs before best-effort jobs, shortest remaining time first within each;
  non-preemptive ("Hydra does not consider preemptive scheduling"), so a running job keeps
  its GPUs until it finishes (and the engine skips the leases between arrivals and
  completions: nothing can change there).

What either does with an SLO job that can no longer meet even its last deadline step the
paper does not say: ``late="first"`` keeps its SLO priority (for LLF the most urgent of all,
its laxity being the most negative), ``late="best-effort"`` lets it join the best-effort
jobs, as UniSched's reward and 3Sigma-gang's utility floor treat such a job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import param, register
from policies.gangs import priority_plan
from policies.round_kernel import FloatArray, KernelRoundPolicy
from simulator.inputs.slo import SOFT, STRICT
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import PLAN, ROUND_KERNEL_SIG, active_rows, set_plan

__all__ = ["BE_ORDERS", "LATE", "LLF", "Hydra"]

LATE = ("first", "best-effort")
"""Where an SLO job past hope goes (module docstring)."""
BE_ORDERS = ("arrival", "shortest")
"""LLF's order among best-effort jobs (module docstring)."""


@njit
def _remaining_s(C: Any, J: Any, r: int) -> float:
    """Row ``r``'s estimated remaining time at its full demand on the slowest GPU type it can
    run on (speed > 0)."""
    m = J.model[r]
    gang = C.speedup[m, min(J.demand[r], C.speedup.shape[1] - 1)]
    slowest = np.inf
    for t in range(C.speeds.shape[1]):
        if C.speeds[m, t] > 0:
            slowest = min(slowest, gang * C.speeds[m, t])
    return max(J.est[r], 0.0) / slowest


@njit
def _laxity(J: Any, r: int, now: float, remaining_s: float) -> float:
    """``deadline - now - remaining`` for an SLO job, with the first deadline step not yet
    passed (else the last one); infinite for a best-effort job."""
    if J.job_class[r] != STRICT and J.job_class[r] != SOFT:
        return np.inf
    due, last = _due(J, r, now)
    return (due if np.isfinite(due) else last) - now - remaining_s


@njit
def _past_hope(J: Any, r: int, now: float, remaining_s: float, demote: float) -> bool:
    """An SLO job that cannot meet its last deadline step any more, where ``demote`` (the
    ``late`` parameter, 1: ``best-effort``) moves such jobs among the best-effort ones."""
    if demote == 0.0 or (J.job_class[r] != STRICT and J.job_class[r] != SOFT):
        return False
    return _due(J, r, -np.inf)[1] - now - remaining_s < 0.0


@njit
def _due(J: Any, r: int, now: float) -> tuple[float, float]:
    """Row ``r``'s first deadline step after ``now`` (inf if none) and its last one."""
    due, last = np.inf, -np.inf
    for d in J.deadlines[r]:
        if d > now:
            due = min(due, d)
        if not np.isnan(d):
            last = max(last, d)
    return due, last


@njit
def _tiered(tier: Any, key: Any) -> Any:
    """Positions by ``tier``, then ``key``, then position (rows are in arrival order)."""
    by_key = np.argsort(key, kind="mergesort")
    return by_key[np.argsort(tier[by_key], kind="mergesort")]


@njit
def _apply(C: Any, J: Any, M: Any, rows: Any, order: Any, keep: Any) -> int:
    """Write the whole-gang plan for ``order`` (positions in ``rows``), touching the rows
    whose placement changes."""
    plan = priority_plan(order, J.demand[rows], J.alloc[rows], C.node_gpus, keep)
    for a in range(rows.shape[0]):
        set_plan(M, rows[a], plan[a])
    return PLAN


@njit_lazily(ROUND_KERNEL_SIG)
def _llf(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """SLO jobs by least laxity (then arrival), best-effort jobs after them; preemptive."""
    rows = active_rows(E).copy()
    n = rows.shape[0]
    key, best_effort = np.empty(n), np.empty(n, dtype=np.int64)
    for a in range(n):  # the key: laxity, or for best-effort jobs the be_order's
        left = _remaining_s(C, J, rows[a])
        key[a] = (np.inf if _past_hope(J, rows[a], now, left, M.params[0])
                  else _laxity(J, rows[a], now, left))
        best_effort[a] = key[a] == np.inf
        if best_effort[a]:
            key[a] = left if M.params[1] > 0 else 0.0  # 0: arrival order (rows are in it)
    order = _tiered(best_effort, key)
    return _apply(C, J, M, rows, order, np.zeros(n, dtype=np.bool_))


@njit_lazily(ROUND_KERNEL_SIG)
def _hydra(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Running jobs keep their GPUs; SLO jobs then best-effort ones, shortest remaining time
    first (then arrival)."""
    rows = active_rows(E).copy()
    n = rows.shape[0]
    remaining, best_effort = np.empty(n), np.empty(n, dtype=np.int64)
    keep = np.empty(n, dtype=np.bool_)
    for a in range(n):
        r = rows[a]
        remaining[a] = _remaining_s(C, J, r)
        best_effort[a] = ((J.job_class[r] != STRICT and J.job_class[r] != SOFT)
                          or _past_hope(J, r, now, remaining[a], M.params[0]))
        keep[a] = J.held[r] > 0
    order = _tiered(best_effort, remaining)
    # waiting jobs do not progress and running ones are kept, so the plan stands until a job
    # arrives or finishes
    M.quiet[0] = np.inf
    return _apply(C, J, M, rows, order, keep)


@dataclass(frozen=True)
class _EveryLease(KernelRoundPolicy):
    """A baseline that re-decides every ``lease_s``."""

    lease_s: float = param(300.0, low=1.0, high=86400.0, log=True,
                           help="seconds between decisions (UniSched's baselines: 300)")

    @property
    def round_s(self) -> float:
        return self.lease_s


@dataclass(frozen=True)
class _DeadlineAware(_EveryLease):
    """An :class:`_EveryLease` baseline with the ``late`` reading (module docstring)."""

    late: str = param("first", kind="choice", choices=LATE, searchable=False,
                      help="an SLO job that can no longer meet its last deadline: keeps its "
                           "SLO priority (first) or joins the best-effort jobs (a reading "
                           "of the paper, not a setting to tune)")

    def kernel_params(self) -> FloatArray:
        return np.array([float(LATE.index(self.late))])


@register
@dataclass(frozen=True)
class LLF(_DeadlineAware):
    """Least laxity first for SLO jobs, best-effort jobs last (GENIE-like; module docstring)."""

    name: ClassVar[str] = "llf"
    summary: ClassVar[str] = "least laxity first for SLO jobs, then best-effort FIFO (GENIE-like)"
    kernel = staticmethod(_llf)

    be_order: str = param("arrival", kind="choice", choices=BE_ORDERS, searchable=False,
                          help="the best-effort jobs' order behind the SLO jobs: arrival, or "
                               "shortest remaining time first (a reading of the paper)")

    def kernel_params(self) -> FloatArray:
        return np.array([float(LATE.index(self.late)), float(BE_ORDERS.index(self.be_order))])


@register
@dataclass(frozen=True)
class Hydra(_DeadlineAware):
    """SLO jobs first, shortest remaining time first, non-preemptive (module docstring)."""

    name: ClassVar[str] = "hydra"
    summary: ClassVar[str] = ("SLO jobs before best-effort, shortest remaining time first, "
                              "non-preemptive")
    kernel = staticmethod(_hydra)
