"""UniSched's Estimator and reward generator (papers/unisched.md §III-B, §III-C2).

At each decision, for every active job: its GPUs (at most 2 while profiling), its reward for
running now, and, for SLO jobs, the work each deadline step needs by the SR-aware duration
estimate (eqs. 1, 3), the laxity that leaves, and the order of urgency - everything the
selector MILP (:mod:`policies.unisched.milp`) and the placement are built from. Compiled
(:func:`outlook`), for the UniSched kernel.
"""

from __future__ import annotations

import math
from math import comb
from typing import Any

import numpy as np

from simulator.inputs.slo import PROFILER, SOFT, STRICT
from simulator.jit import configure_cache, njit
from simulator.rounds.view import Layout, locality

configure_cache()

__all__ = [
    "BE_LEASE",
    "BE_SCALE",
    "F_LEASE",
    "MULTIPLE",
    "PROFILER_REWARD",
    "F",
    "expected_sr_overhead",
    "expected_suspensions",
    "outlook",
]

# UniSched's kernel parameters (memory.params)
BE_LEASE, MULTIPLE, SLO_REWARD, BE_SCALE, PROFILER_REWARD, DECAY, PROFILE_S = range(7)
F = Layout(lease=1, prof=1, now=1, work=0)
"""UniSched's per-row floats (``memory.f``): the lease end, profiled seconds, the reward now,
then the work per deadline step (one column per step)."""
F_LEASE = F.LEASE


def expected_sr_overhead(n_leases: int, deadline_leases: int, t_sr: float, *,
                         best_effort: bool = False) -> float:
    """Expected suspend/resume overhead of a job needing ``n_leases`` leases (eq. 3).

    An SLO job that must run ``n`` of the ``m`` leases before its deadline, each schedule
    equally likely, is suspended once between consecutive runs of leases: with ``k + 1`` runs
    (``C(n-1, k) C(m-n+1, k+1)`` of the ``C(m, n)`` schedules) it pays ``k`` times ``t_sr``.
    A best-effort job, with no deadline to bound it, is charged ``n / 2`` suspensions.

    Args:
        n_leases: leases of work the job needs (n >= 1).
        deadline_leases: leases until its deadline (m >= n); ignored for best-effort jobs.
        t_sr: seconds one suspension and resumption cost together.
        best_effort: use the best-effort rule.
    """
    n, m = n_leases, deadline_leases
    if n < 1:
        raise ValueError(f"a job needs at least one lease (got {n})")
    if best_effort:
        return n / 2 * t_sr
    if m < n:
        raise ValueError(f"{n} leases cannot fit before a deadline {m} leases away")
    total = comb(m, n)
    return t_sr * sum(k * comb(n - 1, k) * comb(m - n + 1, k + 1)
                      for k in range(min(n - 1, m - n) + 1)) / total


@njit
def expected_suspensions(n: int, m: int) -> float:
    """Eq. 3 divided by ``t_sr``, in closed form: ``n (m - n + 1) / m - 1``.

    The ``n`` leases fall into ``k + 1`` runs; a lease starts a run when the lease before it
    is not taken, so the expected number of runs is ``n/m + (m - 1) (n/m) (m - n)/(m - 1)``.
    """
    return n * (m - n + 1) / m - 1.0


@njit
def _gang_rate(C: Any, J: Any, r: int) -> float:
    """Reference work per second at the consolidated allocation on the slowest type the job
    can run on (speed > 0; eq. 8's ``A*``), spread over nodes if the gang exceeds every
    node."""
    m, d = J.model[r], J.demand[r]
    top = C.speedup.shape[1] - 1
    g = min(float(d), float(top))
    lo = int(g)
    gang = C.speedup[m, lo] + (g - lo) * (C.speedup[m, min(lo + 1, top)] - C.speedup[m, lo])
    rate = np.inf
    for t in range(C.speeds.shape[1]):
        if C.speeds[m, t] > 0:
            rate = min(rate, gang * C.speeds[m, t])
    return rate * locality(C, m, d, -(-d // C.node_gpus.max()))


@njit
def outlook(C: Any, J: Any, M: Any, active: Any, now: float, profiling: Any,
            locked: Any) -> tuple[Any, Any, Any, Any, Any]:
    """Rewards (§III-C2) and SR-aware durations (eqs. 1, 3) of the active jobs (by position).

    Returns:
        ``gpus`` each job runs on now (at most 2 while profiling); ``now_value``, its reward
        for running in the current lease (profiler rule, or ``be_reward_scale x lease /
        (remaining time + lease)``); ``work``, per deadline step, the SR-aware seconds at the
        consolidated rate still needed less what a held SLO lease will still do (inf: out of
        reach, NaN: no such step or past); ``laxity``, the slack to the nearest reachable
        step; and ``order``, the positions most deserving first (least laxity, then the
        largest reward).
    """
    p, n, S = M.params, active.shape[0], J.deadlines.shape[1]
    be_lease = p[BE_LEASE]
    slo_lease = be_lease * p[MULTIPLE]
    gpus = np.empty(n, dtype=np.int64)
    now_value, laxity = np.empty(n), np.full(n, np.inf)
    work = np.full((n, S), np.nan)
    for a in range(n):
        r = active[a]
        gpus[a] = min(J.demand[r], 2) if profiling[a] else J.demand[r]
        rate = _gang_rate(C, J, r)
        left = max(J.est[r], 0.0) / rate
        if profiling[a] or J.job_class[r] == PROFILER:
            now_value[a] = p[PROFILER_REWARD]
        else:
            now_value[a] = p[BE_SCALE] * be_lease / (left + be_lease)
        first = -1
        for f in range(S):
            if first < 0 and J.deadlines[r, f] - now > 0:
                first = f
        slo = J.job_class[r] == STRICT or J.job_class[r] == SOFT
        if not slo or profiling[a] or first < 0:
            continue
        # the work a running SLO lease still does, in consolidated seconds
        credit = (M.f[r, F_LEASE] - now) * J.alone[r] / rate if locked[a] else 0.0
        # eq. 3 over the leases to the next deadline; the later (soft) steps need the same
        k = max(1, math.ceil(left / slo_lease))
        m = max(k, math.floor((J.deadlines[r, first] - now) / slo_lease))
        need = max(left + C.restart_s * expected_suspensions(k, m) - credit, 0.0)
        for f in range(first, S):
            deadline = J.deadlines[r, f] - now
            if deadline > 0:
                work[a, f] = need if need <= deadline else np.inf
                if need <= deadline:
                    laxity[a] = min(laxity[a], deadline - need)
    by_value = np.argsort(-now_value, kind="mergesort")
    order = by_value[np.argsort(laxity[by_value], kind="mergesort")]
    return gpus, now_value, work, laxity, order
