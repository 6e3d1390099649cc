"""The baselines of Horus's evaluation (papers/horus.md §5.2): FIFO on exclusive GPUs,
opportunistic bin packing (OBP) and performance-aware bin packing (PAB).

Horus itself is in :mod:`policies.horus.policy`; the machinery all four share is in
:mod:`policies.colocating`.

**fifo-exclusive**: arrival order onto idle devices only, never co-locating; the first job
that does not fit blocks the rest (YARN-CS's node choice, then the node's lowest idle devices).

**obp**: arrival order, each job onto the devices where its memory fits (eq. 3), least base
memory used first; no utilization bound; a job that does not fit does not block the rest.
With ``oom_share`` > 0, that share of the jobs had their memory under-estimated (§4.2.3: "OOM
errors due to co-located DL jobs exceeding the total GPU memory capacity stemming from
incorrect memory requirement estimation"): such a job that shares a device ``oom_after_s``
after it was placed fails there and is resubmitted behind the jobs already waiting, with its
memory now known (it does not fail again): placed at once off the devices it failed on
where its memory fits elsewhere, else back on them. Which jobs: row ``r`` when the
fractional part of ``(r + 1) x 0.618...`` is below the share, so exactly that share of every
workload, spread over its rows. A failed job keeps its progress (the engine charges the
restart), so the work lost is the restart, not the minutes it ran.

**pab**: OBP, plus every ``round_s`` and decision: once every job on a job's devices has run
``warmup_s`` where it is, a job slowed beyond ``max_slowdown`` is evicted (the most recently
placed first, re-checking after each) and re-queued behind the jobs already waiting; it is
placed again from the next decision on and keeps its progress (the engine charges the
restart). Horus's "performance drops by 50 percent" is a slowdown of 1.0 in this project's
terms (``(t_shared - t_alone) / t_alone``), the default bound. With ``profile_s`` (T_wait) >
0, PAB profiles each placement before the next (§6.1: "a total of n jobs multiply by
T_wait"): it places at most one job per decision and none until ``profile_s`` after its last
placement, re-placements of evicted jobs included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.colocating import (
    Colocating,
    curve_slowdown,
    device_load,
    least_memory,
    pending_rows,
)
from policies.gangs import yarn_row
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import (
    N_HOLD,
    PLAN,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    JobView,
    Layout,
    PolicyMemory,
    active_rows,
    touch,
)

__all__ = ["OBP", "PAB", "FifoExclusive"]

FloatArray = npt.NDArray[np.float64]
_NO_FLAGS = np.zeros(0, dtype=np.int64)


@njit_lazily(ROUND_KERNEL_SIG)
def _fifo_exclusive(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Start waiting jobs in arrival order on idle devices (whole gangs, on the nodes YARN-CS
    would choose, each node's lowest idle devices) until the first that does not fit."""
    pending = pending_rows(J, E)
    if pending.shape[0] == 0:
        return PLAN
    D, nodes = C.device_node.shape[0], C.node_gpus.shape[0]
    idle = np.empty(D, dtype=np.bool_)
    free = np.zeros(nodes, dtype=np.int64)
    for d in range(D):
        idle[d] = E.dev_start[d + 1] == E.dev_start[d]
        if idle[d]:
            free[C.device_node[d]] += 1
    per_node = np.zeros(nodes, dtype=np.int64)
    for r in pending:
        if not yarn_row(free, C.node_gpus, J.demand[r], per_node):
            break
        k = J.woff[r]
        for node in range(nodes):
            d, left = C.node_first[node], per_node[node]
            while left > 0:
                if idle[d]:
                    idle[d] = False
                    M.out_wdev[k] = d
                    k += 1
                    left -= 1
                d += 1
        M.out_nw[r] = J.demand[r]
        touch(M, r)
        free -= per_node
    return PLAN


# OBP's memory, used with ``oom_share`` > 0 only: per row, when it was placed and resubmitted
# (-inf: never); whether its memory is under-estimated, and its OOM state.
_OF = Layout(placed=1, resubmitted=1)
_OI = Layout(under=1, oom=1)
_PLACED, _RESUBMITTED, _UNDER, _OOM = _OF.PLACED, _OF.RESUBMITTED, _OI.UNDER, _OI.OOM
_UNCHECKED, _FAILING, _DONE = range(3)
_GOLDEN = (5**0.5 - 1) / 2


@njit
def _by_joining(J: Any, rows: Any, requeued: Any) -> Any:
    """``rows`` by when each joined the queue: its arrival, or ``requeued[row]`` where that is
    not -inf (ties: the order given)."""
    joined = np.empty(rows.shape[0])
    for a in range(rows.shape[0]):
        q = requeued[rows[a]]
        joined[a] = J.arrival[rows[a]] if q == -np.inf else q
    return rows[np.argsort(joined, kind="mergesort")]


@njit
def _shares_device(J: Any, E: Any, r: int) -> bool:
    """Whether a worker of row ``r`` shares its device with another worker."""
    for s in range(J.woff[r], J.woff[r] + J.nw[r]):
        d = J.wdev[s]
        if E.dev_start[d + 1] - E.dev_start[d] > 1:
            return True
    return False


@njit
def _oom(J: Any, M: Any, E: Any, now: float, after_s: float) -> int:
    """Mark failing the under-estimated rows sharing a device ``after_s`` after placement;
    wake the engine for the next such check. How many fail."""
    n = 0
    for r in active_rows(E):
        if M.i[r, _OOM] == _FAILING:
            M.i[r, _OOM] = _DONE
    for r in E.hold[:E.cnt[N_HOLD]]:
        if not M.i[r, _UNDER] or M.i[r, _OOM] != _UNCHECKED:
            continue
        due = M.f[r, _PLACED] + after_s
        if now < due:
            M.round_end[0] = min(M.round_end[0], due)
        elif _shares_device(J, E, r):
            M.i[r, _OOM] = _FAILING
            M.f[r, _RESUBMITTED] = now
            n += 1
        else:
            M.i[r, _OOM] = _DONE
    return n


@njit
def _queue_order(J: Any, M: Any, E: Any, failing: int) -> Any:
    """The waiting rows and the failing ones, by when each joined the queue: its arrival, or
    its resubmission (ties: arrival order)."""
    pending = pending_rows(J, E)
    rows = np.empty(pending.shape[0] + failing, dtype=np.int64)
    rows[:pending.shape[0]] = pending
    n = pending.shape[0]
    for r in E.hold[:E.cnt[N_HOLD]]:
        if M.i[r, _OOM] == _FAILING:
            rows[n] = r
            n += 1
    tail = rows[pending.shape[0]:]
    tail[:] = tail[np.argsort(E.pos[tail])]
    return _by_joining(J, rows, M.f[:, _RESUBMITTED])


@njit
def _resubmit(C: Any, J: Any, M: Any, E: Any, load: Any, r: int) -> None:
    """Place failing row ``r`` again, off the devices it failed on (its memory did not fit
    there), or back on them if it fits nowhere else; none: it waits."""
    M.out_nw[r] = 0
    lo, hi = J.woff[r], J.woff[r] + J.nw[r]
    saved = np.empty(hi - lo)
    for s in range(lo, hi):
        saved[s - lo] = load.mem[J.wdev[s]]
        load.mem[J.wdev[s]] = np.inf
    least_memory(C, J, M, E, load, np.full(1, r))
    for s in range(lo, hi):
        if load.mem[J.wdev[s]] == np.inf:
            load.mem[J.wdev[s]] = saved[s - lo]
    if M.out_nw[r] == 0:
        least_memory(C, J, M, E, load, np.full(1, r))
    if M.out_nw[r] == 0:  # placed: least_memory listed it
        touch(M, r)


@njit_lazily(ROUND_KERNEL_SIG)
def _obp(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Place waiting jobs in arrival order wherever their memory fits (with OOM failures:
    the failing ones resubmitted, queued by when they failed)."""
    if M.params[0] == 0:
        pending = pending_rows(J, E)
        if pending.shape[0]:
            load = device_load(C, J, E, _NO_FLAGS, 0, J.demand[pending].sum())
            least_memory(C, J, M, E, load, pending)
        return PLAN
    failing = _oom(J, M, E, now, M.params[1])
    order = _queue_order(J, M, E, failing)
    if order.shape[0] == 0:
        return PLAN
    load = device_load(C, J, E, M.i[:, _OOM], _FAILING, J.demand[order].sum())
    for a, r in enumerate(order):
        if M.i[r, _OOM] == _FAILING:
            _resubmit(C, J, M, E, load, r)
        else:
            least_memory(C, J, M, E, load, order[a:a + 1])
        if M.out_nw[r] > 0 and M.i[r, _UNDER] and M.i[r, _OOM] == _UNCHECKED:
            M.f[r, _PLACED] = now
            M.round_end[0] = min(M.round_end[0], now + M.params[1])
    return PLAN


@register
@dataclass(frozen=True)
class FifoExclusive(Colocating):
    """Horus §5.2's FIFO: arrival order onto idle GPUs, no co-location, head-of-line blocking."""

    name: ClassVar[str] = "fifo-exclusive"
    summary: ClassVar[str] = "FIFO onto idle GPUs, never co-locating (Horus's FIFO baseline)"
    reads_sharing: ClassVar[bool] = False
    kernel = staticmethod(_fifo_exclusive)


@register
@dataclass(frozen=True)
class OBP(Colocating):
    """Horus §5.2's opportunistic bin packing: memory fit only, least-loaded devices first."""

    name: ClassVar[str] = "obp"
    summary: ClassVar[str] = "opportunistic bin packing by GPU memory (Horus's OBP baseline)"
    oom_share: float = param(0.0, low=0.0, high=1.0, searchable=False,
                             help="share of jobs whose memory is under-estimated: each fails "
                                  "on OOM if it shares a device oom_after_s after placement, "
                                  "and is resubmitted (Horus §4.2.3); 0 = never")
    oom_after_s: float = param(60.0, low=0.0, high=3600.0, searchable=False,
                               help="seconds after placement an under-estimated job fails")
    kernel = staticmethod(_obp)
    layouts: ClassVar[dict[str, Layout]] = {"f": _OF, "i": _OI}

    def kernel_params(self) -> FloatArray:
        """``oom_share``, ``oom_after_s``."""
        return np.array([self.oom_share, self.oom_after_s])

    def fresh_memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """Never placed nor resubmitted; the under-estimated rows marked."""
        memory = super().fresh_memory(cluster, jobs)
        memory.f[:, _RESUBMITTED] = -np.inf
        rows = np.arange(1, jobs.arrival.shape[0] + 1)
        memory.i[:, _UNDER] = (rows * _GOLDEN) % 1.0 < self.oom_share
        return memory


# PAB's memory: per row, when it was last placed (NaN: never) and re-queued (-inf: never),
# and scratch for one decision: when its placement started, its slowdown, its state
# (_KEPT: holds devices and keeps them, _EVICTED: loses them now, _WAITING: holds none) and
# whether it is settled (every job on its devices past the warm-up).
_F = Layout(placed_at=1, queued_at=1, since=1, slow=1)
_I = Layout(state=1, settled=1)
_G = Layout(free_at=1)  # with profiling: when the last placement's profiling ends
_FREE_AT = _G.FREE_AT
_PLACED_AT, _QUEUED_AT, _SINCE, _SLOW = _F.PLACED_AT, _F.QUEUED_AT, _F.SINCE, _F.SLOW
_STATE, _SETTLED = _I.STATE, _I.SETTLED
_WAITING, _KEPT, _EVICTED = range(3)


@njit
def _mark(C: Any, J: Any, M: Any, E: Any, now: float, warmup_s: float) -> None:
    """Each active row's state and placement start; each holding row's settledness."""
    for r in active_rows(E):
        held = J.nw[r] > 0
        if held and np.isnan(M.f[r, _PLACED_AT]):
            M.f[r, _PLACED_AT] = now
        M.f[r, _SINCE] = M.f[r, _PLACED_AT] if held else now
        M.i[r, _STATE] = _KEPT if held else _WAITING
    unsettled = np.zeros(C.device_node.shape[0], dtype=np.bool_)
    holding = E.hold[:E.cnt[N_HOLD]]
    for r in holding:
        if M.f[r, _SINCE] > now - warmup_s:
            for s in range(J.woff[r], J.woff[r] + J.nw[r]):
                unsettled[J.wdev[s]] = True
    for r in holding:
        M.i[r, _SETTLED] = J.nw[r] > 0
        for s in range(J.woff[r], J.woff[r] + J.nw[r]):
            if unsettled[J.wdev[s]]:
                M.i[r, _SETTLED] = 0


@njit
def _kept_slowdowns(C: Any, J: Any, M: Any, E: Any) -> None:
    """Each kept row's slowdown: its slowest worker's among the kept jobs, collisions aside
    (the largest of its workers' ``SharingModel.worker_slowdowns``)."""
    for r in E.hold[:E.cnt[N_HOLD]]:
        M.f[r, _SLOW] = 0.0
    for d in range(C.device_node.shape[0]):
        lo, hi = E.dev_start[d], E.dev_start[d + 1]
        if hi - lo < 2:
            continue
        kept, u, t = 0, 0.0, C.device_type[d]
        for x in range(lo, hi):
            r = J.wrow[E.dev_rows[x]]
            if M.i[r, _STATE] == _KEPT:
                kept += 1
                u += J.util[r]
        if kept < 2:
            continue
        w = curve_slowdown(C, t, u)
        for x in range(lo, hi):
            r = J.wrow[E.dev_rows[x]]
            if M.i[r, _STATE] != _KEPT:
                continue
            if C.has_matrix:
                w = 0.0
                for y in range(lo, hi):
                    q = J.wrow[E.dev_rows[y]]
                    if y != x and M.i[q, _STATE] == _KEPT:
                        w += C.matrix[J.model[r], J.model[q], t]
            M.f[r, _SLOW] = max(M.f[r, _SLOW], w)


@njit(inline="always")
def _later(M: Any, E: Any, r: int, q: int) -> bool:
    """Whether row ``r`` goes before row ``q``: placed later, then slowed more, then arrived
    later."""
    a, b = M.f[r, _SINCE], M.f[q, _SINCE]
    if a != b:
        return a > b
    a, b = M.f[r, _SLOW], M.f[q, _SLOW]
    if a != b:
        return a > b
    return E.pos[r] > E.pos[q]


@njit
def _evict(C: Any, J: Any, M: Any, E: Any, now: float, bound: float) -> None:
    """Evict settled jobs slowed past ``bound`` one at a time, re-checking after each: the
    latest placed first (then the most slowed, then the latest to arrive)."""
    while True:
        _kept_slowdowns(C, J, M, E)
        worst = -1
        for r in E.hold[:E.cnt[N_HOLD]]:
            if not (M.i[r, _STATE] == _KEPT and M.i[r, _SETTLED] and M.f[r, _SLOW] > bound):
                continue
            if worst < 0 or _later(M, E, r, worst):
                worst = r
        if worst < 0:
            return
        M.i[worst, _STATE] = _EVICTED
        M.f[worst, _QUEUED_AT] = now
        M.out_nw[worst] = 0
        touch(M, worst)


@njit
def _queue(J: Any, M: Any, E: Any, now: float) -> Any:
    """The rows waiting to be placed, by when each (re)joined the queue: its arrival, or its
    latest eviction; rows evicted at ``now`` wait for the next decision."""
    rows = np.empty(active_rows(E).shape[0], dtype=np.int64)
    n = 0
    for r in active_rows(E):
        if M.i[r, _STATE] != _KEPT and M.f[r, _QUEUED_AT] < now:
            rows[n] = r
            n += 1
    return _by_joining(J, rows[:n], M.f[:, _QUEUED_AT])


@njit
def _profiled(C: Any, J: Any, M: Any, E: Any, load: Any, order: Any, now: float,
              wait_s: float) -> None:
    """Place the first row of ``order`` that fits, once the last placement's profiling
    (``wait_s``) is over; wake the engine when the next may be placed."""
    if now < M.g[_FREE_AT]:
        M.round_end[0] = M.g[_FREE_AT]
        return
    for a in range(order.shape[0]):
        least_memory(C, J, M, E, load, order[a:a + 1])
        if M.out_nw[order[a]] > 0:
            M.g[_FREE_AT] = now + wait_s
            if a + 1 < order.shape[0]:
                M.round_end[0] = M.g[_FREE_AT]
            return


@njit_lazily(ROUND_KERNEL_SIG)
def _pab(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Evict jobs over the bound, then pack the queue (evicted jobs at its tail), one job
    per profiling wait where there is one."""
    _mark(C, J, M, E, now, M.params[0])
    _evict(C, J, M, E, now, M.params[1])
    order = _queue(J, M, E, now)
    if order.shape[0]:
        states = M.i[:, _STATE]
        load = device_load(C, J, E, states, _EVICTED, J.demand[order].sum())
        if M.params[2] > 0:
            _profiled(C, J, M, E, load, order, now, M.params[2])
        else:
            least_memory(C, J, M, E, load, order)
        for r in order:
            if M.out_nw[r] > 0:
                M.f[r, _PLACED_AT] = now
    return PLAN


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
    profile_s: float = param(0.0, low=0.0, high=600.0, searchable=False,
                             help="T_wait: seconds each placement is profiled before the next "
                                  "may be placed (Horus §6.1); 0 = placements not serialized")
    kernel = staticmethod(_pab)
    layouts: ClassVar[dict[str, Layout]] = {"f": _F, "i": _I, "g": _G}

    def kernel_params(self) -> FloatArray:
        """``warmup_s``, ``max_slowdown``, ``profile_s``."""
        return np.array([self.warmup_s, self.max_slowdown, self.profile_s])

    def fresh_memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """Never placed, never re-queued."""
        memory = super().fresh_memory(cluster, jobs)
        memory.f[:, _PLACED_AT] = np.nan
        memory.f[:, _QUEUED_AT] = -np.inf
        return memory
