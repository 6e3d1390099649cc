"""The baselines PCS compares against (PCS code semantics; papers/pcs.md §5.1, SPEC §3.2).

FIFO, SRSF, SRTF and LAS hand GPUs out greedily in priority order (the first job that does not
fit gets the partial remainder; ties keep arrival order). Max-min is fractional
water-filling. Themis also re-decides on a lease timer. AFS hands out whole GPUs one at a
time by marginal gain. Each matches PCS's simulator job for job
(``tests/fixtures/pcs``, ``docs/fidelity/pcs.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from policies.base import IntArray, KernelPolicy, param, register
from simulator.fluid.engine import KERNEL_SIG, PLAYOUTS, QUEUE_SIG, speed_at
from simulator.inputs.workload import Workload
from simulator.jit import njit, njit_lazily
from simulator.order import first_heap, first_in_order, pop_first, stable_order

__all__ = ["AFS", "FIFO", "LAS", "SRSF", "SRTF", "MaxMin", "Themis", "water_fill"]


@njit
def _fill(order: Any, demand: Any, gpus: float, out: Any) -> None:
    left = gpus
    for i in order:
        a = min(left, float(demand[i])) if left > 0.0 else 0.0
        out[i] = a
        left -= a


@njit_lazily(KERNEL_SIG)
def _fifo(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
          est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
          out: Any) -> None:
    _fill(np.arange(demand.shape[0]), demand, gpus, out)


@njit_lazily(QUEUE_SIG)
def _fifo_queue(params: Any, aux: Any, gpus: float, class_demand: Any, head: Any, nxt: Any,
                demand: Any, model: Any, pos: Any, val: Any) -> int:
    """FIFO on the engine's one queue: as :func:`_fifo`, stopping at the last GPU."""
    left, m, i = gpus, 0, head[0]
    while i >= 0 and left > 0.0:
        a = min(left, float(demand[i]))
        pos[m], val[m] = i, a
        m += 1
        left -= a
        i = nxt[i]
    return m


@njit
def _remaining_time_first(demand: Any, est_rem: Any, model: Any, speedup: Any, gpus: float,
                          gpu_weighted: bool, out: Any) -> None:
    """Fill by remaining time at full demand, times the demand when ``gpu_weighted``.

    Only the first ``ceil(gpus)`` jobs with demand can get GPUs (each takes one at least, or
    what is left), so only they are ordered; the rest get none."""
    key = np.empty(demand.shape[0])
    for i in range(key.shape[0]):
        key[i] = est_rem[i] / speed_at(speedup, model[i], float(demand[i]))
        if gpu_weighted:
            key[i] *= demand[i]
    out[:] = 0.0
    _fill(first_in_order(key, demand > 0, int(np.ceil(gpus)), False), demand, gpus, out)


@njit_lazily(KERNEL_SIG)
def _srsf(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
          est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
          out: Any) -> None:
    _remaining_time_first(demand, est_rem, model, speedup, gpus, True, out)


@njit_lazily(KERNEL_SIG)
def _srtf(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
          est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
          out: Any) -> None:
    _remaining_time_first(demand, est_rem, model, speedup, gpus, False, out)


@njit_lazily(KERNEL_SIG)
def _las(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
         est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
         out: Any) -> None:
    # PCS ranks by size - remaining, not by summed progress, and sorts its job list in place:
    # an exact tie keeps the previous decision's order (``attained`` holds each job's place
    # in it, 0 for a newcomer, which goes last)
    prev = np.where(attained > 0.0, attained, np.inf)
    was = np.argsort(prev, kind="mergesort")
    key = est_size - est_rem
    order = was[np.argsort(key[was], kind="mergesort")]
    _fill(order, demand, gpus, out)
    for p in range(order.shape[0]):
        attained[order[p]] = p + 1.0


@njit
def water_fill(demand: Any, capacity: float, weight: Any, out: Any) -> None:
    """Weighted max-min shares ``min(demand, level * weight)``, summing to the capacity.

    Those whose demand is below their fair share keep only their demand; what they leave is
    re-shared among the rest in proportion to weight, until nothing moves.
    """
    n = demand.shape[0]
    if demand.sum() <= capacity:
        for i in range(n):
            out[i] = demand[i]
        return
    ratio, live = np.empty(n), np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):  # a zero demand gets 0 and would sort first, changing no one's share:
        if demand[i] > 0.0:  # it is left out of the sort
            live[m] = i
            ratio[m] = demand[i] / weight[i] if weight[i] > 0.0 else np.inf
            m += 1
        else:
            out[i] = 0.0
    order = stable_order(ratio[:m])
    weight_left = np.empty(m)  # weight still unserved from position j on, summed from the
    acc = 0.0  # small end (no cancellation)
    for j in range(m - 1, -1, -1):
        acc += weight[live[order[j]]]
        weight_left[j] = acc
    left = capacity
    for j in range(m):
        i = live[order[j]]
        level = left / weight_left[j] if weight_left[j] > 0.0 else 0.0
        if ratio[order[j]] <= level:
            out[i] = demand[i]
            left -= demand[i]
        else:
            for r in order[j:]:
                out[live[r]] = level * weight[live[r]]
            return


@njit_lazily(KERNEL_SIG)
def _maxmin(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
            est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
            out: Any) -> None:
    water_fill(demand.astype(np.float64), gpus, np.ones(demand.shape[0]), out)


@njit(inline="always")
def _rho(i: int, left: float, now: float, arrival: Any, est_rem: Any, demand: Any,
         fair: Any) -> float:
    """Themis's finish-time fairness of job ``i`` were it given what it wants of ``left``."""
    return (now - arrival[i] + est_rem[i] / min(left, float(demand[i]))) / fair[i]


@njit
def _ahead(i: int, k: int, lefts: Any, t: int, now: float, arrival: Any, est_rem: Any,
           demand: Any, fair: Any) -> bool:
    """Whether job ``i`` stands before job ``k`` in PCS's order after ``t`` picks: PCS
    re-sorts the jobs left by rho, largest first, after every pick, and its sort keeps the
    order of equals, so equals rank by the rho of the pick before, and so on back to the
    first, then by position."""
    for s in range(t - 1, -1, -1):
        ri = _rho(i, lefts[s], now, arrival, est_rem, demand, fair)
        rk = _rho(k, lefts[s], now, arrival, est_rem, demand, fair)
        if ri != rk:
            return ri > rk
    return i < k


@njit_lazily(KERNEL_SIG)
def _themis(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
            est_size: Any, est_rem: Any, seen: Any, alloc: Any, model: Any, speedup: Any,
            out: Any) -> None:
    n = demand.shape[0]
    out[:] = 0.0
    fair = np.empty(n)  # the finish time at a 1/N share, N the jobs the job has seen
    for i in range(n):
        fair[i] = est_size[i] / min(gpus / seen[i], float(demand[i]))
    left = min(float(demand.sum()), gpus)
    # A job that wants no more than is left has the same rho at every pick (``neg_rho``,
    # negated): those rank by it, largest first, read off a heap as far as the picks go.
    # The others (``big``, more each pick as ``left`` shrinks, largest demand first off a
    # second heap) are scanned at each pick.
    neg_rho = np.empty(n)
    for i in range(n):
        neg_rho[i] = -_rho(i, float(demand[i]), now, arrival, est_rem, demand, fair)
    everyone = np.ones(n, dtype=np.bool_)
    neg_demand = -demand
    by_rho, n_rho = first_heap(neg_rho, everyone, False)
    by_size, n_size = first_heap(neg_demand, everyone, False)
    state = np.zeros(n, dtype=np.int8)  # 0: wants no more than is left, 1: big, 2: picked
    big, lefts = np.empty(n, dtype=np.int64), np.empty(n)  # lefts: to rank equals (_ahead)
    n_big = t = 0
    while left > 0.0 and t < n:  # the largest rho of the jobs left gets what it wants
        lefts[t] = left
        while n_size > 0 and demand[by_size[0]] > left:
            if state[by_size[0]] == 0:
                state[by_size[0]] = 1
                big[n_big] = by_size[0]
                n_big += 1
            n_size = pop_first(by_size, n_size, neg_demand, False)
        while n_rho > 0 and state[by_rho[0]] != 0:
            n_rho = pop_first(by_rho, n_rho, neg_rho, False)
        at, top, best = -1, -1, 0.0
        if n_rho > 0:
            top, best = by_rho[0], -neg_rho[by_rho[0]]
        for j in range(n_big):
            i = big[j]
            rho = _rho(i, left, now, arrival, est_rem, demand, fair)
            if top < 0 or rho > best or (rho == best and _ahead(i, top, lefts, t, now, arrival,
                                                                est_rem, demand, fair)):
                at, top, best = j, i, rho
        out[top] = min(left, float(demand[top]))
        left -= out[top]
        state[top] = 2
        if at >= 0:
            n_big -= 1
            big[at] = big[n_big]
        t += 1


_AFS_EPS = 1e-7  # PCS adds it to every remaining time before inverting


@njit(_nrt=False)
def _afs_rates(i: int, g: float, est_rem: Any, model: Any, speedup: Any, T: Any, r0: Any,
               r1: Any) -> None:
    """Job ``i``'s remaining time at ``g`` GPUs (inf at no speed) and ``1 / (time + eps)``
    at ``g`` and at ``g + 1`` GPUs."""
    s0, s1 = speed_at(speedup, model[i], g), speed_at(speedup, model[i], g + 1.0)
    T[i] = est_rem[i] / s0 if s0 > 0.0 else np.inf
    t1 = est_rem[i] / s1 if s1 > 0.0 else np.inf
    r0[i], r1[i] = 1.0 / (T[i] + _AFS_EPS), 1.0 / (t1 + _AFS_EPS)


@njit_lazily(KERNEL_SIG)
def _afs(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
         est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
         out: Any) -> None:
    n = demand.shape[0]
    out[:] = 0.0
    T, r0, r1 = np.empty(n), np.empty(n), np.empty(n)
    idle_fast = True
    for i in range(n):
        _afs_rates(i, 0.0, est_rem, model, speedup, T, r0, r1)
        idle_fast = idle_fast and (demand[i] <= 0 or r1[i] > 0.0)
    left = gpus
    # While some job below its demand holds no GPU (idle), the pass below ends on an idle job
    # if every job holding GPUs gains at most its own rate from one more ((r(g+1) - r(g)) /
    # r(g) <= 1): the pass measures an idle job's gain as r(1) / r(1) = 1 exactly, so an
    # idle job beats a holding candidate and a holding job never beats an idle one; between
    # idle jobs the faster at one GPU wins (ties: the later). So the first GPUs go to idle
    # jobs in that order, without the pass, until a job that still wants more gains above
    # that or has no positive rate (the pass takes over), or no idle job is left. A job
    # whose estimate has run below zero (no positive rate at one GPU) leaves the whole
    # decision to the pass.
    if idle_fast:
        for i in first_in_order(-r1, demand > 0, int(np.ceil(gpus)), True):
            out[i] = 1.0
            left -= 1.0
            if out[i] < demand[i]:
                _afs_rates(i, 1.0, est_rem, model, speedup, T, r0, r1)
                if not r0[i] > 0.0 or (r1[i] - r0[i]) / r0[i] > 1.0:
                    break
    wants = np.empty(n, dtype=np.int64)  # the jobs still below their demand, in arrival order
    w = 0
    for i in range(n):
        if out[i] < demand[i]:
            wants[w] = i
            w += 1
    while left > 0.0 and w > 0:
        # PCS's pairwise pass: of the candidate and the next job, the one with the shorter
        # remaining time (lo; ties: the candidate) wins when its gain relative to its own rate
        # beats the other's gain relative to the other's new rate
        best = wants[0]
        for j in range(1, w):
            c = wants[j]
            lo, hi = (c, best) if T[c] < T[best] else (best, c)
            if r0[lo] == 0.0:
                best = lo if r1[lo] > r1[hi] else hi
            elif (r1[lo] - r0[lo]) / r0[lo] > (r1[hi] - r0[hi]) / r1[hi]:
                best = lo
            else:
                best = hi
        out[best] += 1.0
        left -= 1.0
        if out[best] >= demand[best]:
            k = 0
            for j in range(w):
                if wants[j] != best:
                    wants[k] = wants[j]
                    k += 1
            w = k
        else:
            _afs_rates(best, out[best], est_rem, model, speedup, T, r0, r1)


@register
@dataclass(frozen=True)
class FIFO(KernelPolicy):
    """First in, first out; work-conserving and elastic: the oldest jobs get their demand."""

    name = "fifo"
    summary = "first come, first served (0 % prediction error)"
    kernel = staticmethod(_fifo)
    queue_kernel = staticmethod(_fifo_queue)

    def queue_classes(self, workload: Workload) -> tuple[IntArray, int]:
        return np.zeros(len(workload), dtype=np.int64), 1


@register
@dataclass(frozen=True)
class SRSF(KernelPolicy):
    """Shortest remaining service first ("Tiresias" in PCS): GPUs x remaining time, preemptive."""

    name = "srsf"
    summary = "shortest remaining service (demand x remaining time) first"
    kernel = staticmethod(_srsf)


@register
@dataclass(frozen=True)
class SRTF(KernelPolicy):
    """Shortest remaining time (at full demand) first, preemptive."""

    name = "srtf"
    summary = "shortest remaining time first"
    kernel = staticmethod(_srtf)


@register
@dataclass(frozen=True)
class LAS(KernelPolicy):
    """Least attained service first: needs no size estimates. Exact ties keep the previous
    decision's order, and the fluid engine runs it on PCS's microsecond clock, as PCS does
    (``docs/fidelity/pcs.md``)."""

    name = "las"
    summary = "least attained service first"
    kernel = staticmethod(_las)
    history = "rank"
    pcs_clock = True


@register
@dataclass(frozen=True)
class MaxMin(KernelPolicy):
    """Max-min fair share of GPUs (PCS's "FS"), fractional, capped by demand."""

    name = "maxmin"
    summary = "max-min fair sharing (PCS's FS)"
    kernel = staticmethod(_maxmin)


@register
@dataclass(frozen=True)
class Themis(KernelPolicy):
    """Finish-time fairness (Themis): every lease, the jobs furthest behind get full demand.

    At each arrival, completion and ``lease_s`` after the last event, GPUs go one job at a
    time to the job with the largest ``rho = (elapsed + remaining / m) / fft``, where
    ``m = min(left, demand)`` GPUs (PCS divides by the GPUs, not by their speed-up) and
    ``fft = size / min(C / N, demand)`` with N the mean number of active jobs the job has
    seen since it arrived (PCS's observed contention; a live view gives the current count).
    Ties keep the order of the previous pick, as PCS re-sorts the jobs left each time.
    """

    name = "themis"
    summary = "finish-time fairness, re-decided every lease"
    kernel = staticmethod(_themis)
    history = "seen"
    lease_s: float = param(600.0, low=1.0, high=86400.0, log=True,
                           help="lease length in seconds (Themis: 600)")
    playout: str = param(PLAYOUTS[0], kind="choice", choices=PLAYOUTS, searchable=False,
                         help="JCT predictions as PCS's code made them on that date: 2024-06-03 "
                              "(to this day), or earlier, when a playout's jobs were sized by "
                              "their remaining work (2024-05-31), and also re-divided nothing "
                              "before its first completion (2024-05-30); Fig. 7's Themis "
                              "errors are the earlier code's (docs/fidelity/pcs.md; checked "
                              "with exact size estimates)")

    @property
    def tick_s(self) -> float | None:
        return self.lease_s


@register
@dataclass(frozen=True)
class AFS(KernelPolicy):
    """AFS-L as PCS codes it: whole GPUs one at a time, each to the winner of a pairwise pass.

    With ``r(g) = 1 / (remaining / speed(g) + 1e-7)``, the pass walks the jobs below their
    demand in arrival order, keeping a candidate; of the candidate and the next job, the one
    with the shorter remaining time at its current GPUs (``l``; ties: the candidate) wins if
    ``(r_l(g+1) - r_l(g)) / r_l(g) > (r_h(g+1) - r_h(g)) / r_h(g+1)``, and when ``l`` holds
    no GPU yet, if it is faster at one GPU more. The pass is not an argmax (it is PCS's
    ``alg_c_concept``), so the walk order matters.
    """

    name = "afs"
    summary = "apathetic future share: GPUs one at a time by marginal speed-up"
    kernel = staticmethod(_afs)
