"""Hadar: task-level heterogeneity-aware scheduling by primal-dual prices (papers/hadar.md §III).

Every round Hadar re-decides the whole cluster (it is preemptive). Each (node, type) has a
price that grows exponentially with the GPUs already handed out on it in this round (eq. 5,
bounds from eqs. 6-8); a job's payoff for a placement is its utility at the completion time
that placement gives, minus what the GPUs cost; a subset of jobs and one placement each are
chosen to maximize the summed payoff (Algorithm 2), and a job runs only if its payoff is
positive. A gang gets exactly ``demand`` GPUs or none (eq. 1e); it may mix types and runs at
the slowest one's speed (eq. 1b), times the profile's ``inter_node_factor`` when spread.

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
  placement too) and "skip". The search (branch and bound, :mod:`policies.hadar_dp`) is
  exact over those while it stays within ``SEARCH_BUDGET`` placement evaluations; past that
  it completes greedily.
- The "communication cost" of a spread placement is its ``inter_node_factor`` slowdown, which
  lengthens the duration it pays for and delays its completion.
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
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy, param, register
from policies.hadar_dp import RoundSearch
from simulator.rounds import RoundState

__all__ = ["SEARCH_BUDGET", "Hadar", "hadar_allocate", "price_bounds", "utility_value"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SEARCH_BUDGET = 256
"""Placement evaluations per round before the search completes greedily."""


def price_bounds(rate_type: FloatArray, remaining: FloatArray, elapsed: FloatArray,
                 demand: IntArray, value: FloatArray, inter_node_factor: float,
                 eta: float) -> tuple[FloatArray, float]:
    """``U_max^r`` per type (eq. 6) and ``U_min`` (eq. 7), both per GPU-second.

    Args:
        rate_type: ``(jobs, types)`` progress rate of each job's whole gang on each type.
        remaining: estimated work left.
        elapsed: seconds since each job arrived.
        demand: gang sizes.
        value: utility numerators: a job finishing ``tau`` after arrival gets ``value / tau``.
        inter_node_factor: slowdown of a spread gang (for the worst case ``t_max``).
        eta: the scaling factor of eq. 7.
    """
    with np.errstate(divide="ignore"):
        t = np.where(rate_type > 0, remaining[:, None] / rate_type, np.inf)  # eq. 8, per type
        per_gpu_s = value[:, None] / ((elapsed[:, None] + t) * demand[:, None] * t)
    u_max = np.where(np.isfinite(t), per_gpu_s, 0.0).max(axis=0)
    t_max = t.max(axis=1, where=np.isfinite(t), initial=0.0) / inter_node_factor
    horizon = float(t_max.sum())
    u_min = float((value / ((elapsed + horizon) * t_max * demand)).min()) / (4.0 * eta)
    return u_max, u_min


def hadar_allocate(*, node_type: IntArray, capacity: IntArray, rate_type: FloatArray,
                   demand: IntArray, remaining: FloatArray, elapsed: FloatArray,
                   value: FloatArray, prev: IntArray, started: npt.NDArray[np.bool_],
                   inter_node_factor: float, restart_s: float, eta: float,
                   budget: int = SEARCH_BUDGET) -> IntArray:
    """One Hadar round on an empty cluster: a ``(jobs, nodes)`` allocation.

    Args:
        node_type, capacity: each node's GPU type (column of ``rate_type``) and GPU count.
        rate_type: ``(jobs, types)`` progress rate of each job's whole gang on each type.
        demand, remaining, elapsed, value: per job (see :func:`price_bounds`).
        prev: ``(jobs, nodes)`` the placement each job holds now.
        started: jobs that have run before (a changed placement pays ``restart_s``).
        inter_node_factor: speed multiplier of a gang spread over nodes.
        restart_s: pause after a started job's placement changes.
        eta: price scaling of eq. 7.
        budget: placement evaluations before the search turns greedy.
    """
    n = demand.shape[0]
    out = np.zeros((n, node_type.shape[0]), dtype=np.int64)
    if n == 0:
        return out
    remaining = np.maximum(remaining, 1e-3)  # estimates may undershoot the real work
    u_max, u_min = price_bounds(rate_type, remaining, elapsed, demand, value,
                                inter_node_factor, eta)
    low = max(u_min, np.finfo(float).tiny)
    search = RoundSearch(node_type.astype(np.int64), capacity.astype(np.int64), rate_type,
                         demand, remaining, elapsed, value, prev.astype(np.int64),
                         np.where(started, restart_s, 0.0), inter_node_factor, low,
                         np.maximum(u_max[node_type], low), budget)
    t_best = remaining / rate_type.max(axis=1)
    density = value / ((elapsed + t_best) * demand * t_best)
    for j, row in search.run(np.argsort(-density, kind="stable")):
        out[j] = row
    return out


def utility_value(kind: str, state: RoundState, rate_type: FloatArray,
                  remaining: FloatArray) -> FloatArray:
    """Each job's utility numerator: it gets ``value / JCT`` (see the module docstring)."""
    size: FloatArray = np.maximum(state.est_size, 1e-3)
    if kind == "jct":
        return size
    t_best = remaining / rate_type.max(axis=1)
    if kind == "makespan":
        weighted: FloatArray = size * t_best / t_best.mean()
        return weighted
    cluster = state.cluster
    share = np.minimum(state.demand, cluster.node_gpus.sum() / len(state)).astype(np.float64)
    mean_speed = state.speeds[state.model] @ cluster.type_gpus / cluster.type_gpus.sum()
    t_iso = size / (state.scaling.speed(state.model, share) * mean_speed)
    ftf_weighted: FloatArray = size * (state.now - state.arrival_s + t_best) / t_iso
    return ftf_weighted


@register
@dataclass(frozen=True)
class Hadar(RoundPolicy):
    """Hadar (papers/hadar.md §III; SPEC §3.4): dual prices per (node, type), Algorithm 2."""

    name: ClassVar[str] = "hadar"
    summary: ClassVar[str] = "task-level heterogeneity-aware primal-dual rounds (Hadar)"

    round_s: float = param(360.0, low=60.0, high=1800.0, help="round length (s)")
    eta: float = param(1.0, low=0.25, high=1e6, log=True,
                       help="price scaling of eq. 7: larger admits more jobs")
    utility: str = param("jct", kind="choice", choices=("jct", "makespan", "ftf"),
                         help="job utility: effective throughput, weighted for makespan/ftf")

    def plan(self, state: RoundState) -> IntArray:
        """Re-decide every active job's placement for the coming round."""
        cluster = state.cluster
        remaining = np.maximum(state.est_remaining, 1e-3)
        rate_type = state.gang_rates()
        return hadar_allocate(
            node_type=cluster.node_type, capacity=cluster.node_gpus, rate_type=rate_type,
            demand=state.demand, remaining=remaining, elapsed=state.now - state.arrival_s,
            value=utility_value(self.utility, state, rate_type, remaining), prev=state.alloc,
            started=(state.attained > 0) | (state.alloc.sum(axis=1) > 0),
            inter_node_factor=cluster.inter_node_factor, restart_s=cluster.restart_s,
            eta=self.eta)
