"""The baselines PCS compares against (PCS code semantics; papers/pcs.md §5.1, SPEC §3.2).

FIFO, SRSF, SRTF and LAS hand GPUs out greedily in priority order (the first job that does not
fit gets the partial remainder; ties keep arrival order). Max-min is fractional
water-filling. Themis also re-decides on a lease timer. AFS hands out whole GPUs one at a
time by marginal gain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np

from policies.base import IntArray, KernelPolicy, param, register
from simulator.engine import KERNEL_SIG, QUEUE_SIG, speed_at
from simulator.jit import njit_lazily
from simulator.workload import Workload

__all__ = ["AFS", "FIFO", "LAS", "SRSF", "SRTF", "MaxMin", "Themis", "water_fill"]


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _remaining_time_first(demand: Any, est_rem: Any, model: Any, speedup: Any, gpus: float,
                          gpu_weighted: bool, out: Any) -> None:
    """Fill by remaining time at full demand, times the demand when ``gpu_weighted``."""
    key = np.empty(demand.shape[0])
    for i in range(key.shape[0]):
        key[i] = est_rem[i] / speed_at(speedup, model[i], float(demand[i]))
        if gpu_weighted:
            key[i] *= demand[i]
    _fill(np.argsort(key, kind="mergesort"), demand, gpus, out)


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
    _fill(np.argsort(attained, kind="mergesort"), demand, gpus, out)


@nb.njit(cache=True)
def water_fill(demand: Any, capacity: float, weight: Any, out: Any) -> None:
    """Weighted max-min shares ``min(demand, level * weight)``, summing to the capacity.

    Those whose demand is below their fair share keep only their demand; what they leave is
    re-shared among the rest in proportion to weight, until nothing moves.
    """
    n = demand.shape[0]
    if demand.sum() <= capacity:
        out[:] = demand
        return
    ratio = np.empty(n)
    for i in range(n):
        ratio[i] = demand[i] / weight[i] if weight[i] > 0.0 else np.inf
    order = np.argsort(ratio, kind="mergesort")
    # weight still unserved from position j on, summed from the small end (no cancellation)
    weight_left = np.cumsum(weight[order][::-1])[::-1]
    left = capacity
    for j in range(n):
        i = order[j]
        level = left / weight_left[j] if weight_left[j] > 0.0 else 0.0
        if ratio[i] <= level:
            out[i] = demand[i]
            left -= demand[i]
        else:
            for r in order[j:]:
                out[r] = level * weight[r]
            return


@njit_lazily(KERNEL_SIG)
def _maxmin(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
            est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
            out: Any) -> None:
    water_fill(demand.astype(np.float64), gpus, np.ones(demand.shape[0]), out)


@njit_lazily(KERNEL_SIG)
def _themis(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
            est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
            out: Any) -> None:
    n = demand.shape[0]
    left = min(float(demand.sum()), gpus)
    waiting = np.ones(n, dtype=np.bool_)
    out[:] = 0.0
    while left > 1e-9:
        best, best_rho, best_m = -1, -np.inf, 0.0
        for i in range(n):
            if not waiting[i]:
                continue
            m = min(left, float(demand[i]))
            fft = est_size[i] / min(gpus / n, float(demand[i]))
            rho = (now - arrival[i] + est_rem[i] / speed_at(speedup, model[i], m)) / fft
            if rho > best_rho:
                best, best_rho, best_m = i, rho, m
        if best < 0:
            return
        out[best] = best_m
        left -= best_m
        waiting[best] = False


@njit_lazily(KERNEL_SIG)
def _afs(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
         est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
         out: Any) -> None:
    n = demand.shape[0]
    out[:] = 0.0
    for _ in range(int(min(float(demand.sum()), gpus))):
        best, best_gain = -1, -np.inf
        for i in range(n):
            if out[i] >= demand[i]:
                continue
            g = out[i]
            gain = (speed_at(speedup, model[i], g + 1.0) - speed_at(speedup, model[i], g))
            gain /= max(est_rem[i], 1e-9)
            if gain > best_gain:
                best, best_gain = i, gain
        out[best] += 1.0


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
    """Least attained service first: needs no size estimates."""

    name = "las"
    summary = "least attained service first"
    kernel = staticmethod(_las)


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
    time to the job with the largest ``rho = (elapsed + remaining / speed(m)) / fft``, where
    ``m = min(left, demand)`` and ``fft = size / min(C / N, demand)`` with N active jobs
    (PCS code uses the running average of N; the current N is what a live scheduler knows).
    """

    name = "themis"
    summary = "finish-time fairness, re-decided every lease"
    kernel = staticmethod(_themis)
    lease_s: float = param(600.0, low=1.0, high=86400.0, log=True,
                           help="lease length in seconds (Themis: 600)")

    @property
    def tick_s(self) -> float | None:
        return self.lease_s


@register
@dataclass(frozen=True)
class AFS(KernelPolicy):
    """AFS-L style: whole GPUs one at a time to the highest marginal gain.

    The gain of a job's next GPU is the speed it adds per unit of remaining work,
    ``(speed(g + 1) - speed(g)) / remaining``, so short jobs and well-scaling jobs come first.
    """

    name = "afs"
    summary = "apathetic future share: GPUs one at a time by marginal speed-up"
    kernel = staticmethod(_afs)
