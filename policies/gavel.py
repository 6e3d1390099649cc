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

The rounds run in a compiled kernel; the LP stays in Python (SciPy's HiGHS), a host step the
kernel asks for only when the set of active jobs has changed.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import numba as nb
import numpy as np
import numpy.typing as npt
from scipy.optimize._highspy import _core as highs  # SciPy's HiGHS (highspy's API)

from policies.base import param, register
from policies.gangs import gang_row
from policies.round_kernel import KernelRoundPolicy
from simulator.round_arrays import (
    HOST,
    N_ACTIVE,
    PLAN,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    EngineState,
    JobArrays,
    PolicyMemory,
    active_rows,
    empty_memory,
    touch,
)

__all__ = ["Gavel", "gavel_allocation", "gavel_round"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_Csc = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], FloatArray]
"""A matrix as compressed columns: column starts, row indices, values."""
_THREAD = threading.local()
_COLWISE, _MINIMIZE = int(highs.MatrixFormat.kColwise), int(highs.ObjSense.kMinimize)


def _matrix(demand: IntArray, m: int, ratio: FloatArray | None = None) -> _Csc:
    """The LP's ``<=`` rows over the variables ``x[j, t]`` (column ``j m + t``): one per job
    for ``-ratio_j . x_j`` when ``ratio`` is given, then ``sum_t x[j, t] <= 1`` per job and
    ``sum_j demand_j x[j, t] <= gpus_t`` per type; each column lists its rows in order."""
    n = demand.shape[0]
    jobs = np.repeat(np.arange(n, dtype=np.int32), m)
    types = np.tile(np.arange(m, dtype=np.int32), n)
    top = 0 if ratio is None else n
    rows = [top + jobs, top + n + types]
    values = [np.ones(n * m), np.repeat(demand.astype(np.float64), m)]
    if ratio is not None:
        rows.insert(0, jobs)
        values.insert(0, -ratio.ravel())
    index = np.stack(rows, axis=1).ravel()
    return (np.arange(0, index.shape[0] + 1, len(rows), dtype=np.int32), index,
            np.stack(values, axis=1).ravel())


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
    b_cap = np.concatenate([np.ones(n), type_gpus.astype(np.float64)])
    if objective == "max_sum":
        return _solve(-throughput.ravel(), _matrix(demand, m), b_cap, bounds).reshape(n, m)
    share = min(1.0, float(type_gpus.sum()) / float(demand.sum()))
    iso = share * (throughput @ (type_gpus / type_gpus.sum()))
    norm = throughput / iso[:, None]
    start, index, value = a = _matrix(demand, m, norm)
    # stage 1: max z with z <= ratio_j for every job (variables: x, then z in one more column)
    cost = np.zeros(n * m + 1)
    cost[-1] = -1.0
    with_z = (np.append(start, np.int32(index.shape[0] + n)),
              np.concatenate([index, np.arange(n, dtype=np.int32)]),
              np.concatenate([value, np.ones(n)]))
    z = _solve(cost, with_z, np.concatenate([np.zeros(n), b_cap]), np.append(bounds, np.inf))[-1]
    # stage 2: max the summed ratios, each at least z
    b2 = np.concatenate([np.full(n, -z * (1 - 1e-7)), b_cap])
    return _solve(-norm.ravel(), a, b2, bounds).reshape(n, m)


def _solve(cost: FloatArray, a_ub: _Csc, b_ub: FloatArray, upper: FloatArray) -> FloatArray:
    """HiGHS on ``min cost.x, a_ub x <= b_ub, 0 <= x <= upper``: the model SciPy's ``milp``
    passes it, handed over directly (its checks and conversions cost more than the solve)."""
    start, index, value = a_ub
    n, rows = cost.shape[0], b_ub.shape[0]
    h = _highs()
    h.passModel(n, rows, index.shape[0], _COLWISE, _MINIMIZE, 0.0, cost, np.zeros(n), upper,
                np.full(rows, -np.inf), b_ub, start, index, value, np.zeros(n, dtype=np.int32))
    h.run()
    status = h.getModelStatus()
    if status != highs.HighsModelStatus.kOptimal:
        raise RuntimeError(f"Gavel LP: HiGHS returned {h.modelStatusToString(status)}")
    return np.clip(np.asarray(h.getSolution().col_value, dtype=np.float64), 0.0, 1.0)


def _highs() -> Any:
    """This thread's HiGHS, kept between solves (passing a model drops the last one's basis
    and solution), quiet and without presolve: on these LPs of a few dozen columns presolve
    costs more than it saves (the same solutions on all 5,293 LPs of the 1,000-job example
    with prediction, in 40% less solver time)."""
    h = getattr(_THREAD, "highs", None)
    if h is None:
        h = _THREAD.highs = highs._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
    return h


@functools.lru_cache(maxsize=4096)
def _allocation(throughput: bytes, demand: bytes, type_gpus: bytes, objective: str) -> FloatArray:
    """:func:`gavel_allocation` of the float64 rates and int64 gang sizes and GPUs these bytes
    hold, read-only. The same inputs hand HiGHS the same model, hence get the same answer, so
    each is solved once: a playout meets active sets the run met, and the run meets the sets
    its last playout met (a third of the LPs with prediction at 1,000 jobs)."""
    gpus = np.frombuffer(type_gpus, dtype=np.int64)
    x = gavel_allocation(np.frombuffer(throughput).reshape(-1, gpus.shape[0]),
                         np.frombuffer(demand, dtype=np.int64), gpus, objective)
    x.flags.writeable = False
    return x


@nb.njit(cache=True)
def _by_priority(x: Any, fraction: Any, throughput: Any) -> Any:
    """The (job, type) pairs, flattened ``j * types + t``, by priority, then ``x``, then
    throughput, all descending, then job (``np.lexsort``'s order: stable sorts from the
    least significant key)."""
    n, m = x.shape
    priority = np.empty(n * m)
    for j in range(n):
        for t in range(m):
            f = fraction[j, t]
            priority[j * m + t] = x[j, t] / f if f > 0 else x[j, t] * 1e9
    order = np.arange(n * m)  # already by job
    for key in (throughput.ravel(), x.ravel(), priority):
        order = order[np.argsort(-key[order], kind="mergesort")]
    return order


@nb.njit(cache=True)
def gavel_round(x: Any, fraction: Any, throughput: Any, demand: Any, prev: Any,
                node_type: Any, node_gpus: Any) -> Any:
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
    free = node_gpus.copy()
    out = np.zeros((n, node_type.shape[0]), dtype=np.int64)
    done = np.zeros(n, dtype=np.bool_)
    row = np.zeros(node_type.shape[0], dtype=np.int64)
    for k in _by_priority(x, fraction, throughput):
        j, t = k // m, k % m
        if done[j] or throughput[j, t] <= 0:
            continue
        if gang_row(np.where(node_type == t, free, 0), demand[j], prev[j], row):
            out[j], done[j] = row, True
            free -= row
    return out


@nb.njit(cache=True)
def _throughput(C: Any, J: Any, active: Any) -> Any:
    """``(jobs, types)``: each active job's rate with its whole demand on one type."""
    top = C.speedup.shape[1] - 1
    out = np.empty((active.shape[0], C.speeds.shape[1]))
    for a in range(active.shape[0]):
        m = J.model[active[a]]
        out[a] = C.speedup[m, min(J.demand[active[a]], top)] * C.speeds[m]
    return out


@nb.njit(ROUND_KERNEL_SIG, cache=True)
def _gavel(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """A round: the host solves the LP if the active jobs changed, then time on each type
    is counted and the pairs are granted (:func:`gavel_round`). Memory: per row (``f``) the
    target fractions and the seconds run on each type, (``i``) whether the row is in the
    LP; globally (``g``) when the LP was solved and the last decision, (``gi``) its jobs."""
    active, m = active_rows(E), C.speeds.shape[1]
    n = active.shape[0]
    same = M.gi[0] == n
    for r in active:
        same = same and M.i[r, 0] == 1
    if not same:
        return HOST
    x, ran = np.empty((n, m)), np.empty((n, m))
    prev = np.empty((n, C.node_gpus.shape[0]), dtype=np.int64)
    demand = np.empty(n, dtype=np.int64)
    dt, elapsed = now - M.g[1], now - M.g[0]
    held = np.zeros(m, dtype=np.bool_)
    for a in range(n):
        r = active[a]
        prev[a], demand[a] = J.alloc[r], J.demand[r]
        held[:] = False
        for h in range(prev.shape[1]):
            if prev[a, h] > 0:
                held[C.node_type[h]] = True
        for t in range(m):
            if held[t]:
                M.f[r, m + t] += dt
        x[a], ran[a] = M.f[r, :m], M.f[r, m:]
    M.g[1] = now
    fraction = ran / elapsed if elapsed > 0 else np.zeros_like(ran)
    out = gavel_round(x, fraction, _throughput(C, J, active), demand, prev, C.node_type,
                      C.node_gpus)
    for a in range(n):
        r = active[a]
        if np.any(out[a] != M.out_alloc[r]):
            M.out_alloc[r] = out[a]
            touch(M, r)
    return PLAN


@register
@dataclass(frozen=True)
class Gavel(KernelRoundPolicy):
    """Gavel: an LP over time fractions per (job, type), realised round by round."""

    name: ClassVar[str] = "gavel"
    summary: ClassVar[str] = "job-level heterogeneity-aware LP allocation in rounds (Gavel)"

    round_s: float = param(360.0, low=60.0, high=1800.0, help="round length (s)")
    objective: str = param("max_min", kind="choice", choices=("max_min", "max_sum"),
                           help="LP objective: max-min fairness (LAS) or max-sum throughput")
    kernel = staticmethod(_gavel)

    def memory(self, cluster: ClusterArrays, jobs: JobArrays) -> PolicyMemory:
        """Target fractions and seconds run per (row, type), LP membership and times (kernel)."""
        return empty_memory(jobs, cluster.node_gpus.shape[0], f=2 * cluster.speeds.shape[1],
                            i=1, g=2, gi=1)

    def host_step(self, cluster: ClusterArrays, jobs: JobArrays, memory: PolicyMemory,
                  state: EngineState, now: float) -> None:
        """Solve the LP for the active jobs; reset the time counters."""
        M, active = memory, state.active[:state.cnt[N_ACTIVE]]
        model, demand = jobs.model[active], jobs.demand[active]
        top = cluster.speedup.shape[1] - 1
        gang = cluster.speedup[model, np.minimum(demand, top)]
        x = _allocation((gang[:, None] * cluster.speeds[model]).tobytes(), demand.tobytes(),
                        cluster.type_gpus.tobytes(), self.objective)
        m = x.shape[1]
        M.f[active, :m] = x
        M.f[active, m:] = 0.0
        M.i[:, 0] = 0
        M.i[active, 0] = 1
        M.gi[0] = active.shape[0]
        M.g[:] = now
