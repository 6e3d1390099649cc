"""The baselines PCS compares against (PCS code semantics; papers/pcs.md §5.1, SPEC §3.2).

FIFO, SRSF, SRTF and LAS hand GPUs out greedily in priority order (the first job that does not
fit gets the partial remainder). Max-min is fractional water-filling. Themis re-decides on a
600 s lease timer as well as on arrivals and completions. AFS hands out whole GPUs one at a
time by marginal gain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policies.base import Policy, param, priority_fill, register
from simulator.view import ClusterView

__all__ = ["AFS", "FIFO", "LAS", "SRSF", "SRTF", "MaxMin", "Themis", "water_fill"]

FloatArray = npt.NDArray[np.float64]


def _by_key(key: FloatArray, view: ClusterView) -> FloatArray:
    # lexsort: last key is primary; ties keep arrival order (the view is in arrival order)
    order = np.lexsort((np.arange(len(view)), key))
    return priority_fill(order, view.demand.astype(np.float64), float(view.total_gpus))


@register
@dataclass(frozen=True)
class FIFO(Policy):
    """First in, first out; work-conserving and elastic: the oldest jobs get their demand."""

    name = "fifo"
    summary = "first come, first served (0 % prediction error)"

    def allocate(self, view: ClusterView) -> FloatArray:
        return priority_fill(np.arange(len(view)), view.demand.astype(np.float64),
                             float(view.total_gpus))


@register
@dataclass(frozen=True)
class SRSF(Policy):
    """Shortest remaining service first ("Tiresias" in PCS): GPUs x remaining time, preemptive."""

    name = "srsf"
    summary = "shortest remaining service (demand x remaining time) first"

    def allocate(self, view: ClusterView) -> FloatArray:
        full = view.speed(view.demand.astype(np.float64))
        return _by_key(view.demand * view.est_remaining / full, view)


@register
@dataclass(frozen=True)
class SRTF(Policy):
    """Shortest remaining time (at full demand) first, preemptive."""

    name = "srtf"
    summary = "shortest remaining time first"

    def allocate(self, view: ClusterView) -> FloatArray:
        return _by_key(view.est_remaining / view.speed(view.demand.astype(np.float64)), view)


@register
@dataclass(frozen=True)
class LAS(Policy):
    """Least attained service first: needs no size estimates."""

    name = "las"
    summary = "least attained service first"

    def allocate(self, view: ClusterView) -> FloatArray:
        return _by_key(view.attained, view)


def water_fill(demand: FloatArray, capacity: float,
               weight: FloatArray | None = None) -> FloatArray:
    """Weighted max-min fair shares: ``min(demand, level * weight)`` summing to the capacity.

    Jobs (or classes) whose demand is below their fair share keep only their demand; what they
    leave is re-shared among the rest in proportion to weight, until nothing moves.
    """
    w = np.ones_like(demand) if weight is None else weight
    if demand.sum() <= capacity:
        return demand.copy()
    ratio = np.where(w > 0, demand / np.where(w > 0, w, 1.0), np.inf)
    order = np.argsort(ratio, kind="stable")
    d, ws = demand[order], w[order]
    # level at which the k-th smallest ratio would be fully served
    weight_left = np.cumsum(ws[::-1])[::-1]
    served_before = np.cumsum(d) - d
    level = (capacity - served_before) / np.where(weight_left > 0, weight_left, 1.0)
    k = int(np.argmax(ratio[order] > level))  # first one not fully served
    share = np.empty_like(d)
    share[:k] = d[:k]
    share[k:] = level[k] * ws[k:]
    out = np.empty_like(share)
    out[order] = share
    return out


@register
@dataclass(frozen=True)
class MaxMin(Policy):
    """Max-min fair share of GPUs (PCS's "FS"), fractional, capped by demand."""

    name = "maxmin"
    summary = "max-min fair sharing (PCS's FS)"

    def allocate(self, view: ClusterView) -> FloatArray:
        return water_fill(view.demand.astype(np.float64), float(view.total_gpus))


@register
@dataclass(frozen=True)
class Themis(Policy):
    """Finish-time fairness (Themis): every lease, the jobs furthest behind get full demand.

    At each arrival, completion and ``lease_s`` after the last event, GPUs go one job at a
    time to the job with the largest ``rho = (elapsed + remaining / speed(m)) / fft``, where
    ``m = min(left, demand)`` and ``fft = size / min(C / N, demand)`` with N active jobs
    (PCS code uses the running average of N; the current N is what a live scheduler knows).
    """

    name = "themis"
    summary = "finish-time fairness, re-decided every lease"
    lease_s: float = param(600.0, low=1.0, high=86400.0, log=True,
                           help="lease length in seconds (Themis: 600)")

    @property
    def tick_s(self) -> float | None:
        return self.lease_s

    def allocate(self, view: ClusterView) -> FloatArray:
        n = len(view)
        demand = view.demand.astype(np.float64)
        fft = view.est_size / np.minimum(view.total_gpus / n, demand)
        elapsed = view.now - view.arrival_s
        alloc = np.zeros(n)
        left = min(float(demand.sum()), float(view.total_gpus))
        waiting = np.ones(n, dtype=bool)
        while left > 1e-9 and waiting.any():
            m = np.minimum(left, demand)
            with np.errstate(divide="ignore"):
                rho = (elapsed + view.est_remaining / view.speed(m)) / fft
            rho[~waiting] = -np.inf
            best = int(np.argmax(rho))
            alloc[best] = m[best]
            left -= m[best]
            waiting[best] = False
        return alloc


@register
@dataclass(frozen=True)
class AFS(Policy):
    """AFS-L style: whole GPUs one at a time to the highest marginal gain.

    The gain of a job's g-th GPU is the speed it adds per unit of remaining work,
    ``(speed(g) - speed(g-1)) / remaining``, so short jobs and well-scaling jobs come first.
    Gains are made non-increasing in g, so the greedy hand-out equals taking the top-C gains.
    """

    name = "afs"
    summary = "apathetic future share: GPUs by marginal speed-up"

    def allocate(self, view: ClusterView) -> FloatArray:
        n = len(view)
        width = int(view.demand.max())
        g = np.arange(width + 1, dtype=np.float64)
        speeds = view.scaling.speed(np.repeat(view.model, width + 1),
                                    np.tile(g, n)).reshape(n, width + 1)
        gain = np.diff(speeds, axis=1) / np.maximum(view.est_remaining, 1e-9)[:, None]
        gain = np.minimum.accumulate(gain, axis=1)
        gain[g[1:][None, :] > view.demand[:, None]] = -np.inf
        flat = gain.ravel()
        take = min(view.total_gpus, int(view.demand.sum()))
        top = np.argpartition(-flat, take - 1)[:take] if take < flat.size else np.arange(flat.size)
        top = top[np.isfinite(flat[top])]
        return np.bincount(top // width, minlength=n).astype(np.float64)
