"""Gavel's heterogeneity-aware round-based scheduling (the Hadar baseline; SPEC §3.4).

Gavel (Narayanan et al., OSDI 2020) solves a linear program for an allocation ``x[j, t]``: the
fraction of time job ``j`` should run on GPU type ``t``, every worker of a job on one type
(job-level heterogeneity). Rounds then realise it: each round, job ``j``'s priority on type
``t`` is ``x[j, t]`` over the fraction of time it has run there since the allocation was last
computed (``x * 1e9`` before it has run there), and (job, type) pairs are granted in priority
order, each job at most once, while the type has ``demand`` free GPUs. Pairs with ``x = 0``
come last but are granted too, as in Gavel's scheduler. Facts from Gavel's public code.

Objectives (``objective``):

- ``max_min`` (Gavel's heterogeneity-aware max-min fairness / LAS, its testbed policy): maximize
  the smallest ``sum_t x[j,t] X[j,t] / X_iso[j]``, where ``X_iso`` is the job's throughput under
  an equal share of every type (``min(1, C / sum demand)`` of each type's time, in proportion to
  its GPUs). A second LP then maximizes the sum of those ratios with the minimum held, a
  one-step stand-in for Gavel's water-filling, so no capacity is left idle for nothing.
- ``max_sum`` (Gavel's max-sum-throughput): maximize ``sum x[j,t] X[j,t]``.

``X[j, t]`` is the job's progress rate on ``demand`` GPUs of type ``t`` (reference-type work
per second, so rates of different jobs are commensurable). The allocation is recomputed, and
the time counters reset, whenever the set of active jobs changes (as Gavel does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.optimize import linprog

from policies.base import RoundPolicy, param, register
from policies.gangs import place_gang
from simulator.rounds import RoundState

__all__ = ["Gavel", "gavel_allocation", "gavel_round"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _capacity_rows(demand: IntArray, n_types: int) -> tuple[Any, Any]:
    """Sparse ``sum_t x <= 1`` (one row per job) and ``sum_j demand x <= gpus`` (per type)."""
    n = demand.shape[0]
    var = np.arange(n * n_types).reshape(n, n_types)
    per_job = sp.csr_matrix((np.ones(n * n_types), (np.repeat(np.arange(n), n_types),
                                                    var.ravel())), shape=(n, n * n_types))
    per_type = sp.csr_matrix((np.repeat(demand.astype(np.float64), n_types),
                              (np.tile(np.arange(n_types), n), var.ravel())),
                             shape=(n_types, n * n_types))
    return per_job, per_type


def gavel_allocation(throughput: FloatArray, demand: IntArray, type_gpus: IntArray,
                     objective: str = "max_min") -> FloatArray:
    """Gavel's LP: the time fraction ``x[j, t]`` each job should run on each type.

    Args:
        throughput: ``(jobs, types)`` rate of each job on ``demand`` GPUs of each type.
        demand: gang sizes.
        type_gpus: GPUs of each type.
        objective: ``"max_min"`` or ``"max_sum"`` (module docstring).

    Raises:
        RuntimeError: HiGHS found no optimum (cannot happen: ``x = 0`` is feasible).
    """
    n, m = throughput.shape
    if n == 0:
        return np.zeros((0, m))
    usable = (demand[:, None] <= type_gpus[None, :]) & (throughput > 0)
    bounds = np.where(usable.ravel(), 1.0, 0.0)
    per_job, per_type = _capacity_rows(demand, m)
    a_cap = sp.vstack([per_job, per_type])
    b_cap = np.concatenate([np.ones(n), type_gpus.astype(np.float64)])
    if objective == "max_sum":
        x = _solve(-throughput.ravel(), a_cap, b_cap, bounds)
        return x.reshape(n, m)
    share = min(1.0, float(type_gpus.sum()) / float(demand.sum()))
    iso = share * (throughput @ (type_gpus / type_gpus.sum()))
    norm = throughput / iso[:, None]
    ratio = sp.csr_matrix((norm.ravel(), (np.repeat(np.arange(n), m), np.arange(n * m))),
                          shape=(n, n * m))
    # stage 1: max z with z <= ratio_j for every job (variables: x, z)
    a1 = sp.vstack([sp.hstack([-ratio, np.ones((n, 1))]),
                    sp.hstack([a_cap, np.zeros((n + m, 1))])])
    cost = np.zeros(n * m + 1)
    cost[-1] = -1.0
    z = _solve(cost, a1, np.concatenate([np.zeros(n), b_cap]), np.append(bounds, np.inf))[-1]
    # stage 2: max the summed ratios, each at least z
    a2 = sp.vstack([-ratio, a_cap])
    b2 = np.concatenate([np.full(n, -z * (1 - 1e-7)), b_cap])
    return _solve(-norm.ravel(), a2, b2, bounds).reshape(n, m)


def _solve(cost: FloatArray, a_ub: Any, b_ub: FloatArray, upper: FloatArray) -> FloatArray:
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=np.column_stack([np.zeros_like(upper),
                                                                       upper]),
                  method="highs")
    if res.status != 0:
        raise RuntimeError(f"Gavel LP: HiGHS returned status {res.status}: {res.message}")
    return np.clip(np.asarray(res.x, dtype=np.float64), 0.0, 1.0)


def gavel_round(x: FloatArray, fraction: FloatArray, throughput: FloatArray,
                demand: IntArray, prev: IntArray, node_type: IntArray,
                node_gpus: IntArray) -> IntArray:
    """Turn the allocation into this round's placements (Gavel's priority rounding).

    Args:
        x: ``(jobs, types)`` target time fractions.
        fraction: ``(jobs, types)`` time each job has run on each type since ``x`` was
            computed, over the time elapsed since then (zeros at first).
        throughput: ``(jobs, types)`` rates (pairs with zero rate are never granted).
        demand: gang sizes.
        prev: ``(jobs, nodes)`` current placements (kept when the type is granted again).
        node_type, node_gpus: the nodes.
    """
    n, m = x.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        priority = np.where(fraction > 0, x / fraction, x * 1e9)
    jobs, types = np.divmod(np.arange(n * m), m)
    order = np.lexsort((jobs, -throughput.ravel(), -x.ravel(), -priority.ravel()))
    free = node_gpus.astype(np.int64).copy()
    out = np.zeros((n, node_type.shape[0]), dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    for k in order:
        j, t = int(jobs[k]), int(types[k])
        if done[j] or throughput[j, t] <= 0:
            continue
        row = place_gang(np.where(node_type == t, free, 0), int(demand[j]), prev=prev[j])
        if row is not None:
            out[j], done[j] = row, True
            free -= row
    return out


@register
@dataclass(frozen=True)
class Gavel(RoundPolicy):
    """Gavel: an LP over time fractions per (job, type), realised round by round."""

    name: ClassVar[str] = "gavel"
    summary: ClassVar[str] = "job-level heterogeneity-aware LP allocation in rounds (Gavel)"

    round_s: float = param(360.0, low=60.0, high=1800.0, help="round length (s)")
    objective: str = param("max_min", kind="choice", choices=("max_min", "max_sum"),
                           help="LP objective: max-min fairness (LAS) or max-sum throughput")

    def plan(self, state: RoundState) -> IntArray:
        """Recompute the allocation if the jobs changed, then grant this round's placements."""
        cluster = state.cluster
        throughput = state.gang_rates()
        memo = state.memo
        rows = state.rows.tobytes()
        if memo.get("rows") != rows:
            x = gavel_allocation(throughput, state.demand, cluster.type_gpus, self.objective)
            memo.update(rows=rows, x=x, since=state.now, last=state.now,
                        ran=np.zeros_like(x))
        ran: FloatArray = memo["ran"]
        held = cluster.by_type(state.alloc) > 0
        ran += held * (state.now - memo["last"])
        memo["last"] = state.now
        elapsed = state.now - memo["since"]
        fraction = ran / elapsed if elapsed > 0 else np.zeros_like(ran)
        return gavel_round(memo["x"], fraction, throughput, state.demand, state.alloc,
                           cluster.node_type, cluster.node_gpus)
