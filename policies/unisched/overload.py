"""The steps the later slots can hold when they are overloaded: an upper bound for UniSched's
exact selector (:mod:`policies.unisched.exact`).

Where no plan of the later slots realises every step the knapsack counted, the MILP must drop
steps, and which ones is decided in the later slots. Split the jobs with deadline steps in
two: those whose counted step hangs on their choice for slot 0 (the knapsack prices them
exactly as before), and the rest, whose step is the same whatever they run now. The second
group's steps are bounded by a problem of the later slots alone: each job picks a step (or
none), giving it at most the most work slot 0 could do for it (more work now only loosens
the later slots), under necessary conditions of the later slots' capacity. In each later slot
a job must run at least the fraction its step cannot get from the other slots, on any of its
candidates (per cell level, the least cells a unit of its work takes: ``cells / phi``); the
fractions of all jobs must fit the slot's nested cells (eq. 14). Solved exactly by depth-first
branch and bound. The knapsack's optimum plus this bound is an upper bound on the MILP; a plan
of the later slots that realises both certifies the knapsack's choice for slot 0 as optimal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.cells import LEVELS
from policies.unisched.later import later_plan
from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["TARGET_LIMIT", "certify_overloaded", "step_bound"]

TARGET_LIMIT = 100_000
"""Branch-and-bound nodes of :func:`step_bound` before it gives up (a work limit)."""
SLACK = 1e-5
"""The capacity conditions allow this fraction more than the cells (HiGHS's tolerance), so the
bound stays an upper bound of what HiGHS may count as met."""


@njit
def certify_overloaded(step: Any, cand_job: Any, cand_phi: Any, weight: Any, may_start: Any,
                       gain: Any, idle: Any, step_ok: Any, work: Any, value: Any, avail: Any,
                       now_part: Any, now_work: Any, deadline: Any, later_cap: Any, rows: Any,
                       first: Any) -> tuple[bool, Any, Any, float]:
    """Whether the knapsack's slot 0 is certified where the later slots cannot give every job
    its counted step: the steps of the jobs whose step does not hang on slot 0 are bounded
    (:func:`step_bound`) and a later plan realises that bound with every other counted step.

    Returns:
        (certified, each job's step, those jobs' indices, their bounded step reward), the
        objective then the knapsack's less those jobs' ``idle`` rewards plus the bound.
    """
    n_jobs, steps = work.shape
    loose = np.zeros(n_jobs, dtype=np.bool_)  # a step that is the same whatever slot 0 holds
    loose[rows] = True
    most = np.zeros((n_jobs, steps))  # the most work slot 0 can do for each job
    unit = np.full((n_jobs, LEVELS), np.inf)
    for c in range(cand_job.shape[0]):
        j = cand_job[c]
        unit[j] = np.minimum(unit[j], weight[c] / cand_phi[c])
        if may_start[j]:
            loose[j] = loose[j] and gain[c] == idle[j]
            most[j] = np.maximum(most[j], cand_phi[c] * now_part[j])
    q = np.flatnonzero(loose)
    if q.shape[0] == 0:
        return False, step, q, 0.0
    top, target, done = step_bound(value[q], step_ok[q], work[q] - most[q],
                                   np.ascontiguousarray(avail[q][:, :, 1:]), unit[q],
                                   later_cap)
    if not done:
        return False, step, q, 0.0
    final = step.copy()
    final[q] = target
    need = np.zeros((n_jobs, steps))
    for j in rows:
        for f in range(steps):
            if step_ok[j, f] and final[j] >= 0 and f >= final[j]:
                need[j, f] = max(work[j, f] - now_work[j, f], 0.0)
    planned = later_plan(weight[first], np.ascontiguousarray(avail[rows][:, :, 1:]),
                         need[rows], np.zeros(first.shape[0], dtype=np.bool_), deadline,
                         later_cap)
    return planned, final, q, top


@njit
def step_bound(value: Any, ok: Any, need: Any, avail: Any, unit: Any, cap: Any
               ) -> tuple[float, Any, bool]:
    """The most step value the jobs can get from the later slots alone, under necessary
    conditions of their capacity: the value, each job's step (-1: none), and False past
    :data:`TARGET_LIMIT` nodes.

    Meeting a step means meeting every valid step after it (the MILP's monotone indicators).

    Args:
        value: ``(D, F)`` each step's reward.
        ok: ``(D, F)`` the step is valid.
        need: ``(D, F)`` work each step needs from the later slots (slot 0's most done).
        avail: ``(D, F, K)`` seconds of each later slot before each step's deadline.
        unit: ``(D, 4)`` the least eq.-14 weight per unit of work on each level, over the
            job's candidates.
        cap: ``(4,)`` eq. 14's capacities of a later slot.
    """
    n, steps, slots = avail.shape
    # options per job: each step whose tail fits the slots alone, by value, then none
    opt_f = np.full((n, steps + 1), -1, dtype=np.int64)
    opt_v = np.zeros((n, steps + 1))
    opt_u = np.zeros((n, steps + 1, slots, LEVELS))
    n_opt = np.ones(n, dtype=np.int64)
    best = np.zeros(n)
    for j in range(n):
        k_opt = 0
        for f in np.argsort(-np.where(ok[j], value[j], -np.inf), kind="mergesort"):
            if not ok[j, f] or value[j, f] <= 0.0:
                continue
            least, fits = _least(need[j], avail[j], ok[j], f)
            if not fits:
                continue
            opt_f[j, k_opt], opt_v[j, k_opt] = f, value[j, f]
            for k in range(slots):
                opt_u[j, k_opt, k] = least[k] * unit[j]
            best[j] = max(best[j], value[j, f])
            k_opt += 1
        n_opt[j] = k_opt + 1  # the last option: no step (value 0, no cells)
    order = np.argsort(-best, kind="mergesort")
    rest = np.zeros(n + 1)
    for d in range(n - 1, -1, -1):
        rest[d] = rest[d + 1] + best[order[d]]
    room = cap * (1.0 + SLACK)
    used = np.zeros((slots, LEVELS))
    at = np.full(n, -1, dtype=np.int64)  # per depth: the option held
    top, target = -1.0, np.full(n, -1, dtype=np.int64)
    val, depth, nodes = 0.0, 0, 0
    while depth >= 0:
        nodes += 1
        if nodes > TARGET_LIMIT:
            return top, target, False
        if depth == n:
            if val > top:
                top = val
                for d in range(n):
                    target[order[d]] = opt_f[order[d], at[d]]
            depth -= 1
            continue
        j = order[depth]
        if at[depth] >= 0:
            used -= opt_u[j, at[depth]]
            val -= opt_v[j, at[depth]]
        at[depth] += 1
        while at[depth] < n_opt[j] and np.any(used + opt_u[j, at[depth]] > room):
            at[depth] += 1
        if at[depth] >= n_opt[j]:
            at[depth] = -1
            depth -= 1
            continue
        used += opt_u[j, at[depth]]
        val += opt_v[j, at[depth]]
        if val + rest[depth + 1] <= top:
            continue  # cannot beat the best found: the next option at this depth
        depth += 1
        if depth < n:
            at[depth] = -1
    return top, target, True


@njit
def _least(need: Any, avail: Any, ok: Any, f: int) -> tuple[Any, bool]:
    """Per later slot, the least fraction of it a job must run to meet step ``f`` and every
    valid step after it with the other slots full; False if the slots together fall short."""
    slots = avail.shape[1]
    least = np.zeros(slots)
    for g in range(f, need.shape[0]):
        if not ok[g]:
            continue
        total = avail[g].sum()
        if need[g] > total * (1.0 + SLACK):
            return least, False
        for k in range(slots):
            short = need[g] - (total - avail[g, k])
            if short > 0.0 and avail[g, k] > 0.0:
                least[k] = max(least[k], min(short / avail[g, k], 1.0))
    return least, True
