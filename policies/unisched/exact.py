"""An exact selector for UniSched's common MILP shape: a multiple-choice knapsack over cells.

The selector MILP (:mod:`policies.unisched.milp`) couples three things: the binary choice of a
candidate per job in the current lease (slot 0), the fractional plan of the later slots, and
the deadline steps each job meets. Give every job the whole of every later slot on its
consolidated candidate (its fastest, ``phi`` 1) and the later slots stop coupling the jobs:
whether a job meets a step then depends only on its own choice for slot 0, and the MILP
becomes a multiple-choice knapsack. Each job picks one option (nothing, or one of its
candidates) worth its reward for running now plus the best step that option lets it meet,
under slot 0's four nested cell capacities (eq. 14). That knapsack is a relaxation of the
MILP, so its optimum is the MILP's whenever one plan of the later slots realises every job's
best step whatever slot 0 holds (:func:`_later_plan`): one that runs every job whose steps
hang on slot 0 through each later slot, and gets every other job with a reachable step the
work all its steps need without slot 0. The plan is checked by Proposition 1 (all such jobs
fit the whole cluster at once), else built earliest deadline first; if neither finds one,
HiGHS decides.

The knapsack is solved exactly by depth-first branch and bound (compiled), with the bound of a
fractional knapsack on each cell level alone (the least of the four), in two passes: the
first finds the optimum, the second applies the **tie rule**: among assignments within
:data:`TIE_REL` of that optimum, the answer is the first in the search's order. Jobs are
ranked by the value of their best option (more first; the instance's job order among equal
values) and each job's options by value (more first; candidate order among equals, so the
consolidated candidate first), with running nothing last. At the first job in that ranking
where two assignments differ, the one whose option ranks earlier wins: so between identical
jobs, the earlier one runs.
A borderline deadline step (within HiGHS's feasibility tolerance) and a search past
:data:`SEARCH_LIMIT` nodes go back to HiGHS (``None``). The result does not depend on
wall-clock time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from policies.cells import LEVELS, NEST, fits_cells
from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["SEARCH_LIMIT", "TIE_REL", "solve_knapsack"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TIE_REL = 1e-9
"""Two assignments within this fraction of the objective count as tied (the tie rule picks)."""
SEARCH_LIMIT = 200_000
"""Branch-and-bound nodes before the instance goes back to HiGHS (a work limit, not a time)."""
BORDER = 1e-5
"""A deadline step met or missed by less than this fraction of its work is HiGHS's to judge
(its feasibility tolerance scales with the row, which is divided by the work)."""


def solve_knapsack(inp: Any) -> tuple[IntArray, IntArray, float] | None:
    """The selector's answer (its optimum, ties broken by the module's rule) if the instance
    has the knapsack shape.

    Args:
        inp: a :class:`policies.unisched.milp.SelectorInput`.

    Returns:
        Per job the candidate run now and the deadline step met (-1: none), and the
        objective; or ``None`` when HiGHS must decide (later slots no plan certifies, a
        borderline step, or :data:`SEARCH_LIMIT`).
    """
    n_jobs = inp.now_value.shape[0]
    start = np.searchsorted(inp.cand_job, np.arange(n_jobs))
    step_ok = np.isfinite(inp.work_s) & (inp.deadline_s > 0)
    dl = step_ok.any(axis=1)
    weight = (inp.cand_cells @ NEST).astype(np.int64)  # (C, 4) eq. 14's weights
    first = start[dl]
    if dl.any() and np.any(inp.cand_phi[first] < np.maximum.reduceat(inp.cand_phi, start)[dl]):
        return None
    edges = np.concatenate([[0.0], np.cumsum(inp.slot_s)])
    deadline = np.where(step_ok, inp.deadline_s, 0.0)
    avail = np.clip(deadline[:, :, None] - edges[None, None, :-1], 0.0,
                    inp.slot_s[None, None, :])  # (J, F, K)
    now_part, later_part = avail[:, :, 0], avail[:, :, 1:].sum(axis=2)
    work = np.where(step_ok, inp.work_s, 0.0)
    value = np.where(step_ok, inp.step_value, 0.0)
    scale = np.maximum(work, 1.0)
    # option 0 of each job: run nothing now; then its candidates (if it may start)
    idle, idle_step, border = _step_gain(later_part - work, scale, step_ok, value)
    if border:
        return None
    cand_job = inp.cand_job
    gain, cand_step, border = _step_gain(
        inp.cand_phi[:, None] * now_part[cand_job] + later_part[cand_job] - work[cand_job],
        scale[cand_job], step_ok[cand_job], value[cand_job])
    if border:
        return None
    if dl.any() and not fits_cells(inp.cand_cells[first].sum(axis=0), inp.free_later):
        # a job that misses a step without slot 0 even with every later slot gets them all
        # (if some option of it meets a step); the others, what meets all their steps
        urgent = np.any(step_ok & (later_part < work), axis=1)
        best = idle.copy()
        np.maximum.at(best, cand_job, np.where(inp.may_start[cand_job], gain, 0.0))
        need = np.where(step_ok & ~urgent[:, None], work, 0.0)
        if not _later_plan(weight[first], avail[dl, :, 1:], need[dl], (urgent & (best > 0))[dl],
                           np.where(step_ok, inp.deadline_s, np.inf)[dl],
                           (inp.free_later @ NEST).astype(np.int64)):
            return None
    delta = inp.now_value[cand_job] * inp.cand_phi + gain - idle[cand_job]
    base = float(idle.sum())
    cap = (inp.free_now @ NEST).astype(np.int64)
    usable = inp.may_start[cand_job] & np.all(weight <= cap, axis=1)
    tol = TIE_REL * max(1.0, abs(base) + float(np.maximum(delta, 0.0).sum()))
    keep = np.flatnonzero(usable & (delta > -tol))
    found, ok = _branch_and_bound(cand_job[keep], weight[keep], delta[keep], cap, tol,
                                  -np.inf, SEARCH_LIMIT)
    if not ok:
        return None
    pick, ok = _branch_and_bound(cand_job[keep], weight[keep], delta[keep], cap, tol,
                                 float(delta[keep][found].sum()) - tol, SEARCH_LIMIT)
    if not ok:
        return None
    choice = np.full(n_jobs, -1, dtype=np.int64)
    chosen = keep[pick]
    choice[cand_job[chosen]] = chosen
    step = idle_step.copy()
    step[cand_job[chosen]] = cand_step[chosen]
    total = base + float(delta[chosen].sum())
    return choice, step, total


def _step_gain(margin: FloatArray, scale: FloatArray, ok: Any, value: FloatArray
               ) -> tuple[FloatArray, IntArray, bool]:
    """Per row: the best reward of a step from which on every step is met (eq. 4 with the
    steps' monotone indicators), that step (-1: none), and whether any margin is borderline.

    ``margin`` is the work done before each step's deadline less the work it needs."""
    rel = margin / scale
    if np.any(ok & (rel < 0.0) & (rel > -BORDER)):
        return np.zeros(0), np.zeros(0, dtype=np.int64), True
    met = rel >= 0.0
    n, steps = margin.shape
    gain, step = np.zeros(n), np.full(n, -1, dtype=np.int64)
    tail = np.ones(n, dtype=bool)  # every valid step from f on is met
    for f in range(steps - 1, -1, -1):
        tail &= met[:, f] | ~ok[:, f]
        better = ok[:, f] & tail & (value[:, f] > gain)
        gain[better], step[better] = value[better, f], f
    return gain, step, False


@njit
def _later_plan(weight: Any, avail: Any, need: Any, full: Any, deadline: Any, cap: Any
                ) -> bool:
    """Whether a plan of the later slots (consolidated candidates) runs every ``full`` job
    through each later slot before its last deadline and gets every other job ``need``
    seconds of work before each step's deadline: earliest deadline first, slot by slot (a
    plan found certifies; none found sends the instance to HiGHS).

    Args:
        weight: ``(D, 4)`` each job's consolidated cells, as eq. 14's weights.
        avail: ``(D, F, K)`` seconds of each later slot before each step's deadline.
        need: ``(D, F)`` work each step needs (0: none).
        full: ``(D,)`` the job runs every later slot.
        deadline: ``(D, F)`` the steps' deadlines (inf: no step).
        cap: ``(4,)`` eq. 14's capacities of a later slot.
    """
    n_jobs, steps, slots = avail.shape
    done = np.zeros((n_jobs, steps))
    for k in range(slots):
        room = cap.astype(np.float64)
        for j in range(n_jobs):
            if full[j] and np.any(avail[j, :, k] > 0.0):
                room -= weight[j]
        if np.any(room < 0.0):
            return False
        key = np.full(n_jobs, np.inf)  # the earliest deadline a job still falls short of
        for j in range(n_jobs):
            for f in range(steps):
                if not full[j] and need[j, f] > done[j, f]:
                    key[j] = min(key[j], deadline[j, f])
        for j in np.argsort(key, kind="mergesort"):
            if key[j] == np.inf:
                break
            x = 0.0
            for f in range(steps):
                short = need[j, f] - done[j, f]
                if short > 0.0:
                    if avail[j, f, k] <= 0.0:
                        return False  # that deadline has passed
                    x = max(x, short / avail[j, f, k])
            x = min(x, 1.0)
            for i in range(LEVELS):
                if weight[j, i] > 0:
                    x = min(x, room[i] / weight[j, i])
            room -= x * weight[j]
            done[j] += x * avail[j, :, k]
    return bool(np.all(need <= done * (1.0 + 1e-12) + 1e-9))


@njit
def _bound(depth: int, rank: Any, lists: Any, finite: Any, free_sum: Any, dens: Any,
           best: Any, cap: Any) -> float:
    """Fractional knapsack on each cell level alone over the jobs not yet fixed; the least.

    ``lists[i]`` holds the jobs by density on level ``i``, those taking none of it
    (``free_sum[i, depth]``: their best values summed over unfixed jobs) before ``finite[i]``."""
    out = np.inf
    for i in range(LEVELS):
        room, total = float(cap[i]), free_sum[i, depth]
        for q in range(finite[i], lists.shape[1]):
            if room <= 0.0 or total >= out:
                break
            j = lists[i, q]
            if rank[j] < depth:
                continue
            if dens[i, j] <= 0.0:
                break
            take = min(best[j], room * dens[i, j])
            total += take
            room -= take / dens[i, j]
        out = min(out, total)
    return out


@njit
def _branch_and_bound(opt_job: Any, opt_w: Any, opt_d: Any, cap: Any, tol: float,
                      target: float, node_limit: int) -> tuple[Any, bool]:
    """Options picked (indices into the option arrays, at most one per job, their weights
    summed within ``cap`` on every level), and False if ``node_limit`` nodes did not settle it.

    Jobs are branched on in order of their best option's value (the arrays' order among
    equals), each job's options best first (the arrays' order among equals), then running
    nothing. With ``target`` -inf: an optimum to within ``tol``. Otherwise: the first
    assignment in that order worth at least ``target`` (the tie rule)."""
    jobs = np.unique(opt_job)
    n = jobs.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), True
    lex = target > -np.inf
    local = np.searchsorted(jobs, opt_job)
    best = np.zeros(n)
    for o in range(opt_d.shape[0]):
        best[local[o]] = max(best[local[o]], opt_d[o])
    order = np.argsort(-best, kind="mergesort")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    # options of each job as rows of a table (-1 padded), in the order they are tried
    width = 1
    counts = np.zeros(n, dtype=np.int64)
    for o in range(opt_d.shape[0]):
        counts[local[o]] += 1
        width = max(width, counts[local[o]])
    table = np.full((n, width), -1, dtype=np.int64)
    fill = np.zeros(n, dtype=np.int64)
    for o in np.argsort(-opt_d, kind="mergesort"):
        table[local[o], fill[local[o]]] = o
        fill[local[o]] += 1
    # per level: each job's best value per unit of that level's weight (inf: an option that
    # takes none of it), jobs by that density
    dens = np.zeros((LEVELS, n))
    for o in range(opt_d.shape[0]):
        j = local[o]
        for i in range(LEVELS):
            if opt_d[o] > 0.0:
                d = np.inf if opt_w[o, i] == 0 else opt_d[o] / opt_w[o, i]
                dens[i, j] = max(dens[i, j], d)
    lists = np.empty((LEVELS, n), dtype=np.int64)
    finite = np.zeros(LEVELS, dtype=np.int64)
    free_sum = np.zeros((LEVELS, n + 1))  # per level and depth: see _bound
    for i in range(LEVELS):
        lists[i] = np.argsort(-dens[i], kind="mergesort")
        for d in range(n - 1, -1, -1):
            j = order[d]
            free_sum[i, d] = free_sum[i, d + 1] + (best[j] if dens[i, j] == np.inf else 0.0)
            finite[i] += dens[i, j] == np.inf
    used = np.zeros(LEVELS, dtype=np.int64)
    slot = np.full(n, -1, dtype=np.int64)  # per depth: position in the job's table, width: none
    incumbent, best_pick = -np.inf, np.full(n, -1, dtype=np.int64)
    current = np.full(n, -1, dtype=np.int64)
    value, nodes, depth = 0.0, 0, 0
    while depth >= 0:
        nodes += 1
        if nodes > node_limit:
            return best_pick, False
        if depth == n:  # a leaf passes the bound test below only if worth the limit
            if lex:
                return current[current >= 0].copy(), True
            incumbent = value
            best_pick[:] = current
            depth -= 1
            continue
        j = order[depth]
        # undo the option this depth held, then move to its next one
        s = slot[depth]
        if s >= 0 and s < width and table[j, s] >= 0:
            o = table[j, s]
            used -= opt_w[o]
            value -= opt_d[o]
            current[depth] = -1
        s += 1
        while s < width and table[j, s] >= 0:
            o = table[j, s]
            if np.all(used + opt_w[o] <= cap):
                break
            s += 1
        if s < width and table[j, s] < 0:
            s = width
        if s > width:
            slot[depth] = -1
            depth -= 1
            continue
        slot[depth] = s
        if s < width:
            o = table[j, s]
            used += opt_w[o]
            value += opt_d[o]
            current[depth] = o
        limit = target if lex else incumbent + tol
        if value + _bound(depth + 1, rank, lists, finite, free_sum, dens, best,
                          cap - used) < limit:
            continue  # this option cannot reach the limit: try the next at this depth
        if depth + 1 < n:
            slot[depth + 1] = -1
        depth += 1
    if lex:
        return np.zeros(0, dtype=np.int64), False
    return best_pick[best_pick >= 0], True
