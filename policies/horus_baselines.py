"""The baselines of Horus's evaluation (papers/horus.md §5.2): FIFO on exclusive GPUs,
opportunistic bin packing (OBP) and performance-aware bin packing (PAB).

Horus itself is in :mod:`policies.horus`; the machinery all four share is in
:mod:`policies.colocating`.

**fifo-exclusive**: arrival order onto idle devices only, never co-locating; the first job
that does not fit blocks the rest (YARN-CS's node choice, then the node's lowest idle devices).

**obp**: arrival order, each job onto the devices where its memory fits (eq. 3), least base
memory used first; no utilization bound; a job that does not fit does not block the rest.

**pab**: OBP, plus every ``round_s`` and decision: once every job on a job's devices has run
``warmup_s`` where it is, a job slowed beyond ``max_slowdown`` is evicted (the most recently
placed first, re-checking after each) and re-queued behind the jobs already waiting; it is
placed again from the next decision on and keeps its progress (the engine charges the
restart). Horus's "performance drops by 50 percent" is a slowdown of 1.0 in this project's
terms (``(t_shared - t_alone) / t_alone``), the default bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.colocating import (
    Colocating,
    Usage,
    greedy,
    pending_jobs,
    pick_devices,
    require_sharing,
)
from policies.gangs import place_gang
from simulator.rounds import RoundState
from simulator.sharing import SharingModel

__all__ = ["OBP", "PAB", "FifoExclusive"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def _least_memory(usage: Usage, i: int) -> IntArray | None:
    """OBP: devices where the worker fits, least base memory used first."""
    return pick_devices(np.where(usage.fits(i), usage.mem, np.inf), int(usage.state.demand[i]))


def _idle_gang(usage: Usage, i: int) -> IntArray | None:
    """FIFO: idle devices only, on the nodes YARN-CS would choose (:func:`place_gang`)."""
    cluster, idle = usage.state.cluster, usage.count == 0
    per_node = place_gang(np.add.reduceat(idle.astype(np.int64), cluster.node_first),
                          int(usage.state.demand[i]))
    if per_node is None:
        return None
    return np.concatenate([np.flatnonzero(idle & (cluster.device_node == k))[:g]
                           for k, g in enumerate(per_node) if g > 0])



@register
@dataclass(frozen=True)
class FifoExclusive(Colocating):
    """Horus §5.2's FIFO: arrival order onto idle GPUs, no co-location, head-of-line blocking."""

    name: ClassVar[str] = "fifo-exclusive"
    summary: ClassVar[str] = "FIFO onto idle GPUs, never co-locating (Horus's FIFO baseline)"

    def plan(self, state: RoundState) -> IntArray:
        """Start waiting jobs in arrival order until the first that finds too few idle GPUs."""
        return greedy(Usage.of(state), pending_jobs(state), _idle_gang, blocking=True)


@register
@dataclass(frozen=True)
class OBP(Colocating):
    """Horus §5.2's opportunistic bin packing: memory fit only, least-loaded devices first."""

    name: ClassVar[str] = "obp"
    summary: ClassVar[str] = "opportunistic bin packing by GPU memory (Horus's OBP baseline)"

    def plan(self, state: RoundState) -> IntArray:
        """Place waiting jobs in arrival order wherever their memory fits."""
        require_sharing(state, self.name)
        return greedy(Usage.of(state), pending_jobs(state), _least_memory)


@register
@dataclass(frozen=True)
class PAB(Colocating):
    """Horus §5.2's performance-aware bin packing: OBP, evicting jobs slowed past a bound."""

    name: ClassVar[str] = "pab"
    summary: ClassVar[str] = "bin packing that re-queues jobs slowed past a bound (Horus's PAB)"
    warmup_s: float = param(60.0, low=0.0, high=600.0,
                            help="seconds a placement runs before its slowdown is judged")
    max_slowdown: float = param(1.0, low=0.05, high=10.0,
                                help="evict above this (t_shared - t_alone) / t_alone; "
                                     "1.0 = steps/s halved, Horus's 50 % drop")
    round_s: float = param(60.0, low=1.0, high=3600.0, searchable=False,
                           help="seconds between slowdown checks")

    def plan(self, state: RoundState) -> IntArray:
        """Evict jobs over the bound, then pack the queue (evicted jobs at its tail)."""
        sh = require_sharing(state, self.name)
        placed_at: dict[int, float] = state.memo.setdefault("pab_placed_at", {})
        queued_at: dict[int, float] = state.memo.setdefault("pab_queued_at", {})
        rows, now = state.rows.tolist(), state.now
        held = (state.placed.sum(axis=1) > 0).tolist()
        since = np.array([placed_at.setdefault(r, now) if h else now
                          for r, h in zip(rows, held, strict=True)])
        keep = state.placed.copy()
        for i in self._evictions(state, sh, keep, since):
            queued_at[rows[i]] = now
        waiting = [i for i in np.flatnonzero(~keep.any(axis=1))
                   if queued_at.get(rows[i], -math.inf) < now]
        order = np.array(sorted(waiting, key=lambda i: (  # by when each (re)joined the queue
            queued_at.get(rows[i], state.arrival_s[i]), state.arrival_s[i], i)), dtype=np.int64)
        plan = greedy(Usage.of(state, keep), order, _least_memory)
        for j in np.flatnonzero((plan != state.placed).any(axis=1) & plan.any(axis=1)):
            placed_at[rows[j]] = now
        return plan

    def _evictions(self, state: RoundState, sh: SharingModel, keep: BoolArray,
                   since: FloatArray) -> list[int]:
        """Jobs to evict, one at a time: among settled jobs over the bound, the latest placed
        (then the most slowed, then the latest to arrive). ``keep`` is updated in place."""
        fresh = since > state.now - self.warmup_s
        out: list[int] = []
        while True:
            unsettled = (keep & fresh[:, None]).sum(axis=0) > 0
            settled = keep.any(axis=1) & ~(keep & unsettled[None, :]).any(axis=1)
            slow = sh.slowdowns(state.rows, keep)
            bad = np.flatnonzero(settled & (slow > self.max_slowdown))
            if not bad.size:
                return out
            worst = int(bad[np.lexsort((bad, slow[bad], since[bad]))[-1]])
            keep[worst] = False
            out.append(worst)
