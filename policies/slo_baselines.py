"""Deadline-aware baselines UniSched compares against (papers/unisched.md §IV-D).

Both decide every ``lease_s`` on the round engine and give jobs their whole gang, placed on
as few nodes as possible, backfilling past gangs that do not fit.

- **LLF** (GENIE-like): SLO jobs by least laxity first, ``laxity = deadline - now - remaining
  time at full demand`` (the first deadline step not yet passed, else the last one), then
  best-effort jobs in arrival order ("we give best-effort jobs the lowest priority");
  preemptive.
- **Hydra**: SLO jobs before best-effort jobs, shortest remaining time first within each;
  non-preemptive ("Hydra does not consider preemptive scheduling"), so a running job keeps
  its GPUs until it finishes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy, param, register
from policies.gangs import priority_plan
from simulator.rounds import RoundState
from simulator.slo import SOFT, STRICT

__all__ = ["LLF", "Hydra", "remaining_time_s"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def remaining_time_s(state: RoundState) -> FloatArray:
    """Each job's estimated remaining time at its full demand on the slowest GPU type."""
    return np.asarray(state.est_remaining.clip(0.0) / state.gang_rates().min(axis=1),
                      dtype=np.float64)


@dataclass(frozen=True)
class _EveryLease(RoundPolicy):
    """A baseline that re-decides every ``lease_s``."""

    lease_s: float = param(300.0, low=1.0, high=86400.0, log=True,
                           help="seconds between decisions (UniSched's baselines: 300)")

    @property
    def round_s(self) -> float:
        return self.lease_s


@register
@dataclass(frozen=True)
class LLF(_EveryLease):
    """Least laxity first for SLO jobs, best-effort jobs last (GENIE-like; module docstring)."""

    name = "llf"
    summary = "least laxity first for SLO jobs, then best-effort FIFO (GENIE-like)"

    def plan(self, state: RoundState) -> IntArray:
        """Whole gangs by laxity, preemptively."""
        slo = np.isin(state.job_class, (STRICT, SOFT))
        ahead = np.where(state.deadlines_s > state.now, state.deadlines_s, np.inf)
        due = ahead.min(axis=1, initial=np.inf)
        last = np.nanmax(np.where(np.isnan(state.deadlines_s), -np.inf, state.deadlines_s),
                         axis=1, initial=-np.inf)
        deadline = np.where(np.isfinite(due), due, last)
        laxity = np.where(slo, deadline - state.now - remaining_time_s(state), np.inf)
        order = np.lexsort((state.arrival_s, laxity))
        return priority_plan(order, state.demand, state.alloc, state.cluster.node_gpus,
                             np.zeros(len(state), dtype=np.bool_))


@register
@dataclass(frozen=True)
class Hydra(_EveryLease):
    """SLO jobs first, shortest remaining time first, non-preemptive (module docstring)."""

    name = "hydra"
    summary = "SLO jobs before best-effort, shortest remaining time first, non-preemptive"

    def plan(self, state: RoundState) -> IntArray:
        """Running jobs keep their GPUs; waiting ones fill the rest by class and remaining time."""
        slo = np.isin(state.job_class, (STRICT, SOFT))
        order = np.lexsort((remaining_time_s(state), ~slo))
        running = state.alloc.sum(axis=1) > 0
        return priority_plan(order, state.demand, state.alloc, state.cluster.node_gpus,
                             running)
