"""Hadar: task-level heterogeneity-aware scheduling by primal-dual prices (papers/hadar.md §III).

Every round Hadar re-decides the whole cluster (it is preemptive). Each (node, type) has a
price that grows exponentially with the GPUs already handed out on it in this round (eq. 5,
bounds from eqs. 6-8); a job's payoff for a placement is its utility at the completion time
that placement gives, minus what the GPUs cost; a subset of jobs and one placement each are
chosen to maximize the summed payoff (Algorithm 2), and a job runs only if its payoff is
positive. A gang gets exactly ``demand`` GPUs or none (eq. 1e); it may mix types and runs at
the slowest one's speed (eq. 1b), times its speed over nodes when spread: its model's where
the scaling table has one (Chronus's ``model_info.json``), else the profile's
``inter_node_factor``.

Where the paper is ambiguous, this module follows:

- A schedule ``s`` considered in a round is "hold this placement until done": its completion
  is ``now + remaining / rate`` (plus ``restart_s`` if the placement changes a started job),
  and its cost is ``sum_h k_h w_h`` times that duration (eq. 3a summed over the slots it uses).
- Eq. 6 divides by GPUs and eq. 7 by GPU-time; both are read per GPU-second, so the prices,
  the bounds and the cost share one unit. ``U_max^r`` is the best utility per GPU-second any
  job gets running alone on type ``r``; ``t_min``, ``t_max`` (eq. 8) are a job's remaining
  time on its fastest type and spread on its slowest; the horizon ``T`` is ``now + sum_j
  t_max_j`` (every active job run one after another at worst speed).
- Algorithm 2 compares ``cost_Q < cost_Q\\j``; read as the DP's stated aim, it keeps the
  branch (take job j, or skip it) with the larger total payoff. Jobs are visited in order of
  their utility per GPU-second at their best speed; each job's branches are the positive-payoff
  placements FIND_ALLOC builds (the cheapest node of each type holding the whole gang, and for
  each bottleneck speed the cheapest GPUs at least that fast, spread when needed; the current
  placement too) and "skip". The search (branch and bound, :mod:`policies.hetero.hadar_dp`) is
  exact over those while it stays within ``SEARCH_BUDGET`` placement evaluations; past that
  it completes greedily.
- The "communication cost" of a spread placement is that slowdown (over 2 nodes, or over
  3 or more), which lengthens the duration it pays for and delays its completion.
- Utilities, with size the job's estimated work: ``jct``: effective throughput ``size / JCT``
  (the paper's special case). The paper names the makespan and finish-time-fairness objectives
  but gives no utility for them; here ``makespan`` weights the effective throughput by the
  job's best remaining time over the mean (jobs that bound the makespan go first) and ``ftf``
  by the finish-time fairness ratio it would reach at best (jobs treated worst go first).
- Prices only block: a job whose every placement costs more than it is worth waits, even
  with GPUs idle (the last GPUs of a busy node are priced near ``U_max``). A larger ``eta``
  lowers ``U_min`` and with it every price below ``U_max``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.hetero.hadar_dp import Round, price_table, round_search
from policies.round_kernel import KernelRoundPolicy
from simulator.jit import njit, njit_lazily
from simulator.libm import pairwise_sum
from simulator.order import stable_order
from simulator.rounds.view import (
    PLAN,
    ROUND_KERNEL_SIG,
    active_rows,
    gang_spread,
    set_plan,
    speed,
)

__all__ = ["SEARCH_BUDGET", "UTILITIES", "Hadar", "hadar_allocate", "price_bounds"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SEARCH_BUDGET = 256
"""Placement evaluations per round before the search completes greedily."""
UTILITIES = ("jct", "makespan", "ftf")
"""The utilities, by their code in the kernel's parameters."""
_TINY = float(np.finfo(np.float64).tiny)


@njit
def price_bounds(rate_type: Any, remaining: Any, elapsed: Any, demand: Any, value: Any,
                 inter: Any, eta: float) -> tuple[Any, float]:
    """``U_max^r`` per type (eq. 6) and ``U_min`` (eq. 7), both per GPU-second.

    Args:
        rate_type: ``(jobs, types)`` progress rate of each job's whole gang on each type.
        remaining: estimated work left.
        elapsed: seconds since each job arrived.
        demand: gang sizes.
        value: utility numerators: a job finishing ``tau`` after arrival gets ``value / tau``.
        inter: ``(jobs, 2)`` speed of each job's gang spread over 2 nodes and over more
            (the slower, for the worst case ``t_max``).
        eta: the scaling factor of eq. 7.
    """
    n, types = rate_type.shape
    u_max, t_max = np.full(types, -np.inf), np.zeros(n)
    for j in range(n):
        for r in range(types):
            t = remaining[j] / rate_type[j, r] if rate_type[j, r] > 0 else np.inf  # eq. 8
            finite = np.isfinite(t)
            per_gpu_s = value[j] / ((elapsed[j] + t) * demand[j] * t) if finite else 0.0
            u_max[r] = max(u_max[r], per_gpu_s)
            if finite:
                t_max[j] = max(t_max[j], t)
        t_max[j] /= min(inter[j, 0], inter[j, 1])
    horizon = pairwise_sum(t_max)
    u_min = np.inf
    for j in range(n):
        u_min = min(u_min, value[j] / ((elapsed[j] + horizon) * t_max[j] * demand[j]))
    return u_max, u_min / (4.0 * eta)


@njit
def _allocate(node_type: Any, capacity: Any, rate_type: Any, demand: Any, remaining: Any,
              elapsed: Any, value: Any, prev: Any, started: Any, inter: Any,
              restart_s: float, eta: float, budget: int) -> Any:
    """:func:`hadar_allocate`, compiled."""
    n = demand.shape[0]
    out = np.zeros((n, node_type.shape[0]), dtype=np.int64)
    if n == 0:
        return out
    remaining = np.maximum(remaining, 1e-3)  # estimates may undershoot the real work
    u_max, u_min = price_bounds(rate_type, remaining, elapsed, demand, value, inter, eta)
    low = max(u_min, _TINY)
    speed = np.empty((n, node_type.shape[0]))
    density = np.empty(n)
    for j in range(n):
        for k in range(node_type.shape[0]):
            speed[j, k] = rate_type[j, node_type[k]]
        t_best = remaining[j] / rate_type[j].max()
        density[j] = -(value[j] / ((elapsed[j] + t_best) * demand[j] * t_best))
    restart = np.zeros(n)
    for j in range(n):
        if started[j]:
            restart[j] = restart_s
    R = Round(node_type, capacity, speed, demand, remaining, elapsed, value, prev,
              restart, inter,
              price_table(capacity, low, np.maximum(u_max[node_type], low)), rate_type.shape[1])
    round_search(R, stable_order(density), budget, out)
    return out


def hadar_allocate(*, node_type: IntArray, capacity: IntArray, rate_type: FloatArray,
                   demand: IntArray, remaining: FloatArray, elapsed: FloatArray,
                   value: FloatArray, prev: IntArray, started: npt.NDArray[np.bool_],
                   inter_node_factor: float | FloatArray, restart_s: float, eta: float,
                   budget: int = SEARCH_BUDGET) -> IntArray:
    """One Hadar round on an empty cluster: a ``(jobs, nodes)`` allocation.

    Args:
        node_type, capacity: each node's GPU type (column of ``rate_type``) and GPU count.
        rate_type: ``(jobs, types)`` progress rate of each job's whole gang on each type.
        demand, remaining, elapsed, value: per job (see :func:`price_bounds`).
        prev: ``(jobs, nodes)`` the placement each job holds now.
        started: jobs that have run before (a changed placement pays ``restart_s``).
        inter_node_factor: speed multiplier of each job's gang spread over 2 nodes and over
            more, a ``(jobs, 2)`` array, or one number for every job and spread.
        restart_s: pause after a started job's placement changes.
        eta: price scaling of eq. 7.
        budget: placement evaluations before the search turns greedy.
    """
    def ints(a: Any) -> IntArray:
        return np.ascontiguousarray(a, dtype=np.int64)

    def floats(a: Any) -> FloatArray:
        return np.ascontiguousarray(a, dtype=np.float64)

    out: IntArray = _allocate(
        ints(node_type), ints(capacity), floats(rate_type), ints(demand), floats(remaining),
        floats(elapsed), floats(value), ints(prev), np.ascontiguousarray(started, np.bool_),
        floats(_per_job(inter_node_factor, len(demand))), float(restart_s),
        float(eta), int(budget))
    return out


def _per_job(inter: float | FloatArray, jobs: int) -> FloatArray:
    """``hadar_allocate``'s ``inter_node_factor`` as a ``(jobs, 2)`` array."""
    out = np.asarray(inter, dtype=np.float64)
    if out.ndim == 0:
        return np.full((jobs, 2), float(out))
    if out.shape != (jobs, 2):
        raise ValueError(f"inter_node_factor: expected one number or a ({jobs}, 2) array, "
                         f"got shape {out.shape}")
    return np.ascontiguousarray(out)


@njit_lazily(ROUND_KERNEL_SIG)
def _hadar(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Re-decide every active job's placement; rewrite the rows that change. ``params``:
    ``eta`` and the utility's code (:data:`UTILITIES`)."""
    active = active_rows(E)
    n, types = active.shape[0], C.speeds.shape[1]
    top = C.speedup.shape[1] - 1
    rate_type, remaining = np.empty((n, types)), np.empty(n)
    elapsed, size, t_best = np.empty(n), np.empty(n), np.empty(n)
    demand = np.empty(n, dtype=np.int64)
    started = np.empty(n, dtype=np.bool_)
    prev = np.empty((n, C.node_gpus.shape[0]), dtype=np.int64)
    for a in range(n):
        r = active[a]
        m, demand[a] = J.model[r], J.demand[r]
        gang = C.speedup[m, min(demand[a], top)]  # ScalingTable.speed at a whole count
        for t in range(types):
            rate_type[a, t] = gang * C.speeds[m, t]
        remaining[a] = max(J.est[r], 1e-3)
        elapsed[a] = now - J.arrival[r]
        size[a] = max(J.est_size[r], 1e-3)
        t_best[a] = remaining[a] / rate_type[a].max()
        prev[a] = J.alloc[r]
        started[a] = J.att[r] > 0 or prev[a].sum() > 0
    value = size.copy()  # jct: effective throughput
    utility = int(M.params[1])
    if utility == 1:  # makespan: weighted by the best remaining time over the mean
        mean = pairwise_sum(t_best) / n
        value = size * t_best / mean
    elif utility == 2:  # ftf: weighted by the finish-time fairness ratio at best
        total = float(C.type_gpus.sum())
        for a in range(n):
            m = J.model[active[a]]
            share = min(float(demand[a]), C.node_gpus.sum() / n)
            mean_speed = 0.0
            for t in range(types):
                mean_speed += C.speeds[m, t] * C.type_gpus[t]
            t_iso = size[a] / (speed(C, m, share) * (mean_speed / total))
            value[a] = size[a] * (elapsed[a] + t_best[a]) / t_iso
    out = _allocate(C.node_type, C.node_gpus, rate_type, demand, remaining, elapsed, value,
                    prev, started, gang_spread(C, J.model[active], demand), C.restart_s,
                    M.params[0], SEARCH_BUDGET)
    for a in range(n):
        set_plan(M, active[a], out[a])
    return PLAN


@register
@dataclass(frozen=True)
class Hadar(KernelRoundPolicy):
    """Hadar (papers/hadar.md §III; SPEC §3.4): dual prices per (node, type), Algorithm 2."""

    name: ClassVar[str] = "hadar"
    summary: ClassVar[str] = "task-level heterogeneity-aware primal-dual rounds (Hadar)"

    round_s: float = param(360.0, low=60.0, high=1800.0, help="round length (s)")
    eta: float = param(1.0, low=0.25, high=1e6, log=True,
                       help="price scaling of eq. 7: larger admits more jobs")
    utility: str = param("jct", kind="choice", choices=UTILITIES,
                         help="job utility: effective throughput, weighted for makespan/ftf")
    kernel = staticmethod(_hadar)

    def kernel_params(self) -> FloatArray:
        """``eta`` and the utility's code."""
        return np.array([self.eta, UTILITIES.index(self.utility)], dtype=np.float64)
