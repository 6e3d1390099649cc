"""FIFO, SRSF and Themis gang-scheduled in leases, on the nodes UniSched, LLF and Hydra use.

UniSched's simulator runs every baseline on the same cluster of 8-GPU nodes (papers/unisched.md
§IV-B, §IV-D: Themis is "implemented based on the implementation in [38]", Gavel's round-based
simulator). These are the fluid engine's FIFO, SRSF and Themis (:mod:`policies.pcs.baselines`)
on those terms: each decides every ``lease_s``, gives a job its whole gang or nothing, placed on
as few nodes as possible, and backfills past gangs that do not fit
(:func:`policies.gangs.priority_plan`).

- **FIFO-gang**: arrival order, non-preemptive (a running job keeps its GPUs until it ends).
- **SRSF-gang**: shortest remaining service first, ``remaining time at full demand x demand``
  GPU-seconds; preemptive, ties in arrival order.
- **Themis-gang**: finish-time fairness, preemptive; every lease the jobs furthest behind go
  first, by ``rho = (now - arrival + remaining) / ideal`` where ``remaining`` is the time left
  at full demand and ``ideal = size at full demand x demand / min(C / N, demand)``: the
  job's time alone with its fair share of the ``C`` GPUs among the ``N`` active jobs (the
  live count; the fluid Themis keeps the mean it has seen). A job past its estimated size
  comes first. Ties in arrival order.

  ``fairness_knob`` is Themis's filter ``f`` (Mahajan et al., NSDI 2020): each lease only
  the ``ceil((1 - f) N)`` jobs with the largest ``rho`` (at least one) bid; GPUs go to them
  first, the leftover to the rest by ``rho`` (work-conserving). Themis's auction among the
  bidders maximises the product of their ``rho`` gains; for whole gangs held one lease, a
  bidder's gain is ``1 + lease_s / T`` (``T = now - arrival + remaining``: running this lease
  rather than waiting it out), and the bidders go in order of ``log(gain) / demand``, the
  greedy order for that product under the GPU budget. ``f = 1`` (the default) lets one job
  bid, which is ordering by ``rho`` alone; ``f = 0`` lets every job bid (efficiency only).
  Neither UniSched nor Gavel's Themis [38] states ``f`` or the lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import param, register
from policies.round_kernel import FloatArray
from policies.unisched.baselines import _apply, _EveryLease, _remaining_s
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import ROUND_KERNEL_SIG, active_rows

__all__ = ["FifoGang", "SrsfGang", "ThemisGang", "themis_bid", "themis_rho"]

P_KNOB, P_LEASE = 0, 1
"""Themis-gang's kernel parameters: the fairness knob ``f`` and the lease in seconds."""


@njit_lazily(ROUND_KERNEL_SIG)
def _fifo(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Running jobs keep their GPUs; waiting jobs in arrival order."""
    rows = active_rows(E).copy()
    keep = np.empty(rows.shape[0], dtype=np.bool_)
    for a in range(rows.shape[0]):
        keep[a] = J.held[rows[a]] > 0
    M.quiet[0] = np.inf  # nothing changes until a job arrives or finishes
    return _apply(C, J, M, rows, np.arange(rows.shape[0]), keep)


@njit_lazily(ROUND_KERNEL_SIG)
def _srsf(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Least remaining GPU-seconds first; preemptive."""
    rows = active_rows(E).copy()
    service = np.empty(rows.shape[0])
    for a in range(rows.shape[0]):
        service[a] = _remaining_s(C, J, rows[a]) * J.demand[rows[a]]
    order = np.argsort(service, kind="mergesort")  # rows are in arrival order
    return _apply(C, J, M, rows, order, np.zeros(rows.shape[0], dtype=np.bool_))


@njit
def themis_rho(C: Any, J: Any, r: int, now: float, fair: float) -> float:
    """Row ``r``'s finish-time fairness if it ran at full demand from ``now`` on, against its
    time alone with ``fair`` GPUs, the cluster's share per active job (module docstring)."""
    work = J.est[r]
    if work <= 0.0 or J.est_size[r] <= 0.0:
        return np.inf  # past its estimate: as far behind as a job can be
    left_s = _remaining_s(C, J, r)
    full_s = left_s * J.est_size[r] / work
    demand = max(J.demand[r], 1)
    share = min(fair, demand)
    return (now - J.arrival[r] + left_s) / (full_s * demand / share)


@njit
def themis_bid(C: Any, J: Any, r: int, now: float, lease_s: float) -> float:
    """Row ``r``'s bid per GPU: ``log(1 + lease_s / T)`` over its demand, where ``T = now -
    arrival + remaining at full demand`` (module docstring)."""
    t = max(now - J.arrival[r] + _remaining_s(C, J, r), 1e-9)
    return np.log1p(lease_s / t) / max(J.demand[r], 1)


@njit_lazily(ROUND_KERNEL_SIG)
def _themis(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """The ``1 - f`` jobs with the largest finish-time fairness ratio bid first, the rest
    follow by that ratio; preemptive."""
    rows = active_rows(E).copy()
    n = rows.shape[0]
    rho = np.empty(n)
    fair = C.node_gpus.sum() / max(n, 1)  # C / N, once per decision
    for a in range(n):
        rho[a] = -themis_rho(C, J, rows[a], now, fair)
    order = np.argsort(rho, kind="mergesort")
    # the bidders; the small margin keeps (1 - 0.8) x 10 at 2 jobs, not 3
    bidders = min(n, max(1, int(np.ceil((1.0 - M.params[P_KNOB]) * n - 1e-9))))
    if bidders > 1:
        bid = np.empty(bidders)
        for k in range(bidders):
            bid[k] = -themis_bid(C, J, rows[order[k]], now, M.params[P_LEASE])
        order[:bidders] = order[:bidders][np.argsort(bid, kind="mergesort")]
    return _apply(C, J, M, rows, order, np.zeros(n, dtype=np.bool_))


@register
@dataclass(frozen=True)
class FifoGang(_EveryLease):
    """First come first served, whole gangs on nodes, non-preemptive (module docstring)."""

    name: ClassVar[str] = "fifo-gang"
    summary: ClassVar[str] = "first come first served, whole gangs on nodes, non-preemptive"
    kernel = staticmethod(_fifo)


@register
@dataclass(frozen=True)
class SrsfGang(_EveryLease):
    """Shortest remaining service first, whole gangs, every lease (module docstring)."""

    name: ClassVar[str] = "srsf-gang"
    summary: ClassVar[str] = "shortest remaining GPU-seconds first, whole gangs, every lease"
    kernel = staticmethod(_srsf)


@register
@dataclass(frozen=True)
class ThemisGang(_EveryLease):
    """Finish-time fairness, whole gangs, every lease (module docstring)."""

    name: ClassVar[str] = "themis-gang"
    summary: ClassVar[str] = "finish-time fairness, whole gangs, re-decided every lease"
    kernel = staticmethod(_themis)
    fairness_knob: float = param(1.0, low=0.0, high=1.0,
                                 help="Themis's filter f: the 1 - f most unfair jobs bid each "
                                      "lease (1: order by fairness alone; 0: every job bids)")

    def kernel_params(self) -> FloatArray:
        """The fairness knob and the lease (``P_KNOB``, ``P_LEASE``)."""
        return np.array([self.fairness_knob, self.lease_s])
