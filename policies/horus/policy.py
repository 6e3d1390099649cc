"""Horus: interference-aware GPU co-location (papers/horus.md §4.2; SPEC §3.5).

Its evaluation's baselines (FIFO-exclusive, OBP, PAB) are in :mod:`policies.horus.baselines`;
the machinery they share with it (device load, greedy placement) is in
:mod:`policies.colocating`.

Like its baselines, Horus places workers on devices and decides at arrivals and completions.
**horus** (Algorithm 1) also decides every ``round_s``. The pending jobs are clustered into
``k_queues`` queues by k-means over (workers, utilization, GPUs per worker = 1, base memory),
standardized; queue ``x`` weighs ``w_x = max(len, median wait [s] x len)`` and puts
``round(beta w_x / sum w)`` of its oldest jobs into the buffer. Each buffered job, oldest
first, takes the ``demand`` cheapest devices (eq. 7-10: ``w_mem (used + mem_j) / capacity +
w_util f_type(used_util + util_j)``) among those passing the capacity check: the worker fits
the memory (OJPP eq. 3, as the engine enforces) and the cumulative utilization stays within
``overcommit_limit``. A job that does not fit waits; the jobs behind it still try. Horus
penalizes over-commitment in its cost but gives no hard limit; the default 1.0 is this
project's, measured: read as a JCT ratio, the RTX 2080 fit makes two jobs past u = 1.31 do
less work together than one alone, and on the testbed-style batches of
``benchmarks/bench_colocation.py`` a limit of 1.0 cut the makespan vs FIFO by 25.6 % / 18.2 %
(W-Small / W-Large) against 15.5 % / 1.3 % at 1.5. The search tunes it.

Where the paper leaves a choice open, this module takes:

- k-means: SciPy's ``kmeans2``, Euclidean (the paper names L1), k-means++ seeded from a fixed
  generator so decisions are deterministic, reproduced in compiled code
  (:mod:`policies.horus.queues`); recomputed only when the pending jobs change.
- Counts: rounding half up; an excess over ``beta`` is taken back from the queues rounded up
  most; slots a queue is too short to fill go to the others by weight, so ``min(beta,
  pending)`` jobs enter the buffer (at most ``beta`` pending: all of them, unclustered). One
  buffer per decision.
- Cost: used memory is the base memory ``gamma`` (eq. 2; surges only enter the capacity
  check); ties go to the lower device number; types without a fitted curve cost their
  cumulative utilization (§3.2's proxy) and are not shared. With a workload interference
  matrix, ``f`` is the predicted slowdown of the worst worker on the device after placing
  (partners summed in arrival order).
  Line 11's σ-node test holds for any ``demand`` distinct devices, so it needs no check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.colocating import (
    Colocating,
    cheapest,
    curve_slowdown,
    device_load,
    fits,
    pending_rows,
    place,
)
from policies.horus.queues import cluster_queues, fair_buffer, queue_counts, queue_weights
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import (
    PLAN,
    ROUND_KERNEL_SIG,
    Layout,
)

__all__ = ["Horus", "cluster_queues", "fair_buffer", "horus_costs", "queue_counts",
           "queue_weights"]

FloatArray = npt.NDArray[np.float64]
_NO_FLAGS = np.zeros(0, dtype=np.int64)
# memory: per row, its queue and the clustering that gave it (stamp); globally, the latest
# stamp, how many jobs that clustering had and into how many queues
_I = Layout(label=1, stamp=1)
_GI = Layout(last_stamp=1, clustered=1, queues=1)
_LABEL, _STAMP = _I.LABEL, _I.STAMP
_LAST_STAMP, _CLUSTERED, _QUEUES = _GI.LAST_STAMP, _GI.CLUSTERED, _GI.QUEUES
_W_MEM, _W_UTIL, _K_QUEUES, _BUFFER, _LIMIT = range(5)


@njit
def _matrix_worst(C: Any, J: Any, E: Any, load: Any, r: int, d: int) -> float:
    """The worst predicted worker slowdown on device ``d`` once row ``r`` joins it: each
    worker's pairwise slowdowns summed over its partners, in arrival order."""
    if load.count[d] == 0:
        return 0.0
    t, mr = C.device_type[d], J.model[r]
    own = 0.0
    e = load.head[d]
    while e >= 0:
        own += C.matrix[mr, J.model[load.who[e]], t]
        e = load.nxt[e]
    worst = max(own, 0.0)
    e = load.head[d]
    while e >= 0:
        mw, s, joined = J.model[load.who[e]], 0.0, False
        q = load.head[d]
        while q >= 0:
            if not joined and E.pos[r] < E.pos[load.who[q]]:
                s += C.matrix[mw, mr, t]
                joined = True
            if q != e:
                s += C.matrix[mw, J.model[load.who[q]], t]
            q = load.nxt[q]
        if not joined:
            s += C.matrix[mw, mr, t]
        worst = max(worst, s)
        e = load.nxt[e]
    return worst


@njit
def _device_cost(C: Any, J: Any, E: Any, load: Any, r: int, d: int, w_mem: float,
                 w_util: float) -> float:
    """Eq. 7-10 on one device (:func:`horus_costs`)."""
    mem_cost = (load.mem[d] + J.mem[r]) / C.device_mem[d]
    if C.has_matrix:
        slow = _matrix_worst(C, J, E, load, r, d)
    else:
        u, t = load.util[d] + J.util[r], C.device_type[d]
        slow = curve_slowdown(C, t, u) if C.curves[t, 5] > 0 else u
    return w_mem * mem_cost + w_util * slow


@njit
def horus_costs(C: Any, J: Any, E: Any, load: Any, r: int, w_mem: float,
                w_util: float) -> Any:
    """Eq. 7-10: ``w_mem (used_mem + mem_j) / cap + w_util f_type(used_util + util_j)`` on
    every device for a worker of row ``r`` under ``load`` (:class:`policies.colocating.Load`).
    Types without a fitted curve cost their cumulative utilization (§3.2's proxy); with an
    interference matrix, ``f`` is the worst predicted worker slowdown."""
    out = np.empty(C.device_node.shape[0])
    for d in range(out.shape[0]):
        out[d] = _device_cost(C, J, E, load, r, d, w_mem, w_util)
    return out


@njit
def _choose(C: Any, J: Any, M: Any, E: Any, load: Any, r: int, cost: Any, out: Any) -> bool:
    """Row ``r``'s ``demand`` cheapest devices among those passing the capacity check (memory,
    and cumulative utilization within the limit) into ``out``; False if too few pass."""
    p = M.params
    limit = p[_LIMIT] + 1e-12
    for d in range(cost.shape[0]):
        ok = fits(C, J, load, r, d) and load.util[d] + J.util[r] <= limit
        cost[d] = _device_cost(C, J, E, load, r, d, p[_W_MEM], p[_W_UTIL]) if ok else np.inf
    return cheapest(cost, J.demand[r], out)


@njit
def _queues(J: Any, M: Any, pending: Any, k: int) -> Any:
    """Algorithm 1 line 2: the pending jobs' queues, kept while the pending jobs stay the
    same (the clustering depends on nothing else)."""
    n = pending.shape[0]
    stamp = M.gi[_LAST_STAMP]
    same = stamp > 0 and M.gi[_CLUSTERED] == n and M.gi[_QUEUES] == k
    for r in pending:
        if not same:
            break
        same = M.i[r, _STAMP] == stamp
    labels = np.empty(n, dtype=np.int64)
    if same:
        for a in range(n):
            labels[a] = M.i[pending[a], _LABEL]
        return labels
    features = np.empty((n, 4))
    for a in range(n):
        r = pending[a]
        features[a, 0], features[a, 1] = J.demand[r], J.util[r]
        features[a, 2], features[a, 3] = 1.0, J.mem[r]
    labels[:] = cluster_queues(features, k)
    M.gi[_LAST_STAMP], M.gi[_CLUSTERED], M.gi[_QUEUES] = stamp + 1, n, k
    for a in range(n):
        M.i[pending[a], _LABEL], M.i[pending[a], _STAMP] = labels[a], stamp + 1
    return labels


@njit_lazily(ROUND_KERNEL_SIG)
def _horus(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Keep placed jobs; place the buffer's jobs on their cheapest feasible devices."""
    pending = pending_rows(J, E)
    n = pending.shape[0]
    if n == 0:
        return PLAN
    beta = int(M.params[_BUFFER])
    labels = (_queues(J, M, pending, int(M.params[_K_QUEUES])) if n > beta
              else np.zeros(n, dtype=np.int64))  # all fit the buffer anyway
    chosen = pending[fair_buffer(labels, now - J.arrival[pending], beta)]
    load = device_load(C, J, E, _NO_FLAGS, 0, J.demand[chosen].sum())
    D = C.device_node.shape[0]
    cost, devices = np.empty(D), np.empty(D, dtype=np.int64)
    for r in chosen:
        if _choose(C, J, M, E, load, r, cost, devices):
            place(J, M, E, load, r, devices)
    return PLAN


@register
@dataclass(frozen=True)
class Horus(Colocating):
    """Horus (papers/horus.md Algorithm 1): weighted fair queues, cheapest top-λ devices."""

    name: ClassVar[str] = "horus"
    summary: ClassVar[str] = "interference-aware co-location: fair queues, eq. 7 cost (Horus)"
    w_mem: float = param(0.5, low=0.0, high=1.0, help="weight of GPU memory in the cost (ω1)")
    w_util: float = param(0.5, low=0.0, high=1.0,
                          help="weight of the utilization slowdown in the cost (ω2)")
    k_queues: int = param(3, low=1, high=8, kind="int",
                          help="k-means queues of pending jobs (1: no fairness queues)")
    buffer: int = param(15, low=1, high=100, kind="int", help="jobs considered per decision (β)")
    overcommit_limit: float = param(1.0, low=1.0, high=3.0,
                                    help="max cumulative GPU utilization on a device")
    round_s: float = param(60.0, low=1.0, high=3600.0, searchable=False,
                           help="seconds between decisions")
    kernel = staticmethod(_horus)
    layouts: ClassVar[dict[str, Layout]] = {"i": _I, "gi": _GI}

    def kernel_params(self) -> FloatArray:
        """``w_mem``, ``w_util``, ``k_queues``, ``buffer``, ``overcommit_limit``."""
        return np.array([self.w_mem, self.w_util, self.k_queues, self.buffer,
                         self.overcommit_limit], dtype=np.float64)

