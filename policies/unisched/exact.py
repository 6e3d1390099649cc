"""An exact selector for UniSched's common MILP shape: a multiple-choice knapsack over cells.

The selector MILP (:mod:`policies.unisched.milp`) couples three things: the binary choice of a
candidate per job in the current lease (slot 0), the fractional plan of the later slots, and
the deadline steps each job meets. Give every job the whole of every later slot on its
consolidated candidate (its fastest, ``phi`` 1) and the later slots stop coupling the jobs:
whether a job meets a step then depends only on its own choice for slot 0, and the MILP
becomes a multiple-choice knapsack. Each job picks one option (nothing, or one of its
candidates) worth its reward for running now plus the best step that option lets it meet,
under slot 0's four nested cell capacities (eq. 14). That knapsack is a relaxation of the
MILP, so its optimum is the MILP's whenever a plan of the later slots realises every job's
counted step (:func:`_later_plan`). Checked in turn: Proposition 1 (all deadline jobs fit the
whole cluster at once); a plan that works whatever slot 0 holds (every job whose steps hang on
slot 0 runs through each later slot, every other job gets the work all its steps need without
slot 0); and a plan for the slot 0 the knapsack chose. Plans are built slot by slot, first
what each job must run in the slot because the later ones cannot give it enough, then
earliest deadline first; if none is found, HiGHS decides.

The knapsack is solved exactly by depth-first branch and bound (compiled), in two passes: the
first finds the optimum, the second applies the **tie rule**: among assignments within
:data:`TIE_REL` of that optimum, the answer is the first in the search's order. Jobs are
ranked by the value of their best option (more first; the instance's job order among equal
values) and each job's options by value (more first; candidate order among equals, so the
consolidated candidate first), with running nothing last. At the first job in that ranking
where two assignments differ, the one whose option ranks earlier wins: so between identical
jobs, the earlier one runs. The bound is the least of, per cell level, the linear relaxation
of the multiple-choice knapsack on that level alone (each job's options as their convex
hull); past :data:`PLAIN_LIMIT` nodes the search starts again with, per level, that level's
knapsack solved exactly by dynamic programming with the other levels priced (a Lagrangian
relaxation, prices by coordinate descent on its dual: :mod:`policies.unisched.pricing`).
Bounds change how soon the search ends, not the value of its answer (beyond :data:`TIE_REL`).
A borderline deadline step (within HiGHS's feasibility tolerance) and a search past
:data:`SEARCH_LIMIT` nodes go back to HiGHS (``None``). The result does not depend on
wall-clock time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from policies.cells import LEVELS, NEST, fits_cells
from policies.unisched.pricing import priced_table, prices, table_pick
from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["SEARCH_LIMIT", "TIE_REL", "solve_knapsack"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TIE_REL = 1e-9
"""Two assignments within this fraction of the objective count as tied (the tie rule picks)."""
SEARCH_LIMIT = 200_000
"""Branch-and-bound nodes before the instance goes back to HiGHS (a work limit, not a time)."""
PLAIN_LIMIT = 2_000
"""Nodes the search tries with the per-level bounds alone before it prices the levels."""
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
    later_cap = (inp.free_later @ NEST).astype(np.int64)
    deadline_or_inf = np.where(step_ok, inp.deadline_s, np.inf)[dl]
    planned = not dl.any() or fits_cells(inp.cand_cells[first].sum(axis=0), inp.free_later)
    if not planned:
        # a job that misses a step without slot 0 even with every later slot gets them all
        # (if some option of it meets a step); the others, what meets all their steps
        urgent = np.any(step_ok & (later_part < work), axis=1)
        best = idle.copy()
        np.maximum.at(best, cand_job, np.where(inp.may_start[cand_job], gain, 0.0))
        need = np.where(step_ok & ~urgent[:, None], work, 0.0)
        planned = _later_plan(weight[first], avail[dl, :, 1:], need[dl],
                              (urgent & (best > 0))[dl], deadline_or_inf, later_cap)
    delta = inp.now_value[cand_job] * inp.cand_phi + gain - idle[cand_job]
    base = float(idle.sum())
    cap = (inp.free_now @ NEST).astype(np.int64)
    usable = inp.may_start[cand_job] & np.all(weight <= cap, axis=1)
    tol = TIE_REL * max(1.0, abs(base) + float(np.maximum(delta, 0.0).sum()))
    keep = np.flatnonzero(usable & (delta > -tol))
    pick = _search(cand_job[keep], weight[keep], delta[keep], cap, tol)
    if pick is None:
        return None
    choice = np.full(n_jobs, -1, dtype=np.int64)
    chosen = keep[pick]
    choice[cand_job[chosen]] = chosen
    step = idle_step.copy()
    step[cand_job[chosen]] = cand_step[chosen]
    if not planned:
        # the later slots must realise the steps the knapsack counted, for this slot 0
        now_work = np.zeros((n_jobs, work.shape[1]))
        now_work[cand_job[chosen]] = inp.cand_phi[chosen, None] * now_part[cand_job[chosen]]
        counted = (step_ok & (np.arange(work.shape[1])[None, :] >= step[:, None])
                   & (step[:, None] >= 0))
        need = np.where(counted, np.maximum(work - now_work, 0.0), 0.0)
        if not _later_plan(weight[first], avail[dl, :, 1:], need[dl],
                           np.zeros(int(dl.sum()), np.bool_), deadline_or_inf, later_cap):
            return None
    total = base + float(delta[chosen].sum())
    return choice, step, total


def _search(job: IntArray, weight: IntArray, delta: FloatArray, cap: IntArray, tol: float
            ) -> IntArray | None:
    """The tie rule's optimal options (indices), or ``None`` past :data:`SEARCH_LIMIT` nodes.

    The first try bounds each cell level alone; if it does not settle within
    :data:`PLAIN_LIMIT` nodes, the levels are priced by the dual of the knapsack's linear
    relaxation (:mod:`policies.unisched.pricing`) and the search starts again with the
    Lagrangian bound too."""
    pick, ok = _branch_and_bound(job, weight, delta, cap, tol, PLAIN_LIMIT, False,
                                 np.zeros(LEVELS))
    if not ok:
        pick, ok = _branch_and_bound(job, weight, delta, cap, tol, SEARCH_LIMIT, True,
                                     prices(job, weight, delta, cap))
    return pick if ok else None


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
    seconds of work before each step's deadline. Built slot by slot: first what each job
    must run in this slot because the slots after it cannot give it enough, then earliest
    deadline first (a plan found certifies; none found sends the instance to HiGHS).

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
    after = np.zeros((n_jobs, steps, slots))  # seconds of the slots after k before each step
    for k in range(slots - 2, -1, -1):
        after[:, :, k] = after[:, :, k + 1] + avail[:, :, k + 1]
    least = np.zeros(n_jobs)
    for k in range(slots):
        room = cap.astype(np.float64)
        for j in range(n_jobs):
            if full[j] and np.any(avail[j, :, k] > 0.0):
                room -= weight[j]
        key = np.full(n_jobs, np.inf)  # the earliest deadline a job still falls short of
        for j in range(n_jobs):
            least[j] = 0.0
            for f in range(steps):
                short = need[j, f] - done[j, f]
                if not full[j] and short > 0.0:
                    key[j] = min(key[j], deadline[j, f])
                    late = short - after[j, f, k]
                    if late > 0.0:
                        if avail[j, f, k] <= 0.0:
                            return False  # that deadline has passed
                        least[j] = max(least[j], late / avail[j, f, k])
            if least[j] > 1.0 + 1e-12:
                return False
            least[j] = min(least[j], 1.0)
            room -= least[j] * weight[j]
        if np.any(room < -1e-9):
            return False
        room = np.maximum(room, 0.0)
        for j in np.argsort(key, kind="mergesort"):
            if key[j] == np.inf:
                break
            x = least[j]
            for f in range(steps):
                short = need[j, f] - done[j, f]
                if short > 0.0 and avail[j, f, k] > 0.0:
                    x = max(x, short / avail[j, f, k])
            x = min(x, 1.0) - least[j]
            for i in range(LEVELS):
                if weight[j, i] > 0:
                    x = min(x, room[i] / weight[j, i])
            room -= x * weight[j]
            done[j] += (least[j] + x) * avail[j, :, k]
    return bool(np.all(need <= done * (1.0 + 1e-12) + 1e-9))


@njit
def _bound(depth: int, rank: Any, inc_job: Any, inc_w: Any, inc_v: Any, n_inc: Any,
           base_sum: Any, cap: Any, dp: Any, offset: Any, price: Any) -> float:
    """The least of upper bounds on what the jobs not yet fixed (ranks ``depth`` on) can add
    within ``cap``: per cell level, the linear relaxation of the multiple-choice knapsack on
    that level alone; and, where ``dp`` has rows, per level the Lagrangian relaxation of the
    other three at ``price``, that level's knapsack solved exactly
    (:mod:`policies.unisched.pricing`, level ``i`` in columns ``offset[i]:offset[i + 1]``).

    On level ``i`` a job is worth its best option that takes none of the level (summed over
    the unfixed jobs in ``base_sum[i, depth]``), plus the steps of the upper convex hull of
    its options over their weight on the level (``inc_*[i, :n_inc[i]]``, by value per cell,
    most first): filled greedily, the last step fractionally, that is the relaxation's
    optimum (each job's own steps come in falling order)."""
    if depth == rank.shape[0]:
        return 0.0  # every job fixed (the search's leaves rely on it)
    out = np.inf
    for i in range(LEVELS if dp.shape[0] else 0):
        total = dp[depth, offset[i] + min(max(cap[i], 0), offset[i + 1] - offset[i] - 1)]
        for other in range(LEVELS):
            if other != i:
                total += price[other] * max(cap[other], 0)
        out = min(out, total)
    for i in range(0 if dp.shape[0] else LEVELS):
        room, total = float(cap[i]), base_sum[i, depth]
        for q in range(n_inc[i]):
            if room <= 0.0 or total >= out:
                break
            if rank[inc_job[i, q]] < depth:
                continue
            if inc_w[i, q] <= room:
                total += inc_v[i, q]
                room -= inc_w[i, q]
            else:
                total += inc_v[i, q] * room / inc_w[i, q]
                room = 0.0
        out = min(out, total)
    return out


@njit
def _hull_steps(w: Any, v: Any) -> tuple[Any, Any, float]:
    """Upper concave hull of the points ``(w, v)`` and ``(0, 0)`` on the rising side: its
    value at weight 0, and its steps (weight, value), slopes falling."""
    base = 0.0
    for o in range(w.shape[0]):
        if w[o] == 0:
            base = max(base, v[o])
    sw, sv = np.zeros(w.shape[0]), np.zeros(w.shape[0])
    k = 0
    at_w, at_v = 0.0, base
    while True:  # gift wrapping: the steepest rise from the current point
        pick, slope = -1, 0.0
        for o in range(w.shape[0]):
            if w[o] > at_w and v[o] > at_v:
                s = (v[o] - at_v) / (w[o] - at_w)
                if s > slope or (s == slope and w[o] > w[pick]):
                    pick, slope = o, s
        if pick < 0:
            break
        sw[k], sv[k] = w[pick] - at_w, v[pick] - at_v
        k += 1
        at_w, at_v = float(w[pick]), float(v[pick])
    return sw[:k], sv[:k], base


@njit
def _branch_and_bound(opt_job: Any, opt_w: Any, opt_d: Any, cap: Any, tol: float,
                      node_limit: int, priced_bound: bool, price: Any) -> tuple[Any, bool]:
    """The tie rule's options (indices into the option arrays, at most one per job, their
    weights summed within ``cap`` on every level), and False if a pass took more than
    ``node_limit`` nodes.

    Jobs are branched on in order of their best option's value (the arrays' order among
    equals), each job's options best first (the arrays' order among equals), then running
    nothing. The first pass finds an optimum to within ``tol``; the second, the first
    assignment in that order worth at least that optimum less ``tol`` (the tie rule).
    ``priced_bound``: bound with the levels' exact tables at ``price`` too, each table's
    optimum that fits every level the first incumbent."""
    jobs = np.unique(opt_job)
    n = jobs.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), True
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
    # per level: each job's options as the steps of their convex hull, all jobs' steps by
    # value per cell (see _bound)
    n_opt = opt_d.shape[0]
    inc_job = np.zeros((LEVELS, n_opt), dtype=np.int64)
    inc_w, inc_v = np.zeros((LEVELS, n_opt)), np.zeros((LEVELS, n_opt))
    n_inc = np.zeros(LEVELS, dtype=np.int64)
    base_sum = np.zeros((LEVELS, n + 1))  # per level and depth
    first = np.searchsorted(local, np.arange(n + 1))  # options grouped by job
    for i in range(LEVELS):
        base = np.zeros(n)
        for j in range(n):
            a, b = first[j], first[j + 1]
            sw, sv, base[j] = _hull_steps(opt_w[a:b, i].astype(np.float64), opt_d[a:b])
            for q in range(sw.shape[0]):
                inc_job[i, n_inc[i]], inc_w[i, n_inc[i]], inc_v[i, n_inc[i]] = j, sw[q], sv[q]
                n_inc[i] += 1
        m = n_inc[i]
        by = np.argsort(-(inc_v[i, :m] / inc_w[i, :m]), kind="mergesort")
        inc_job[i, :m], inc_w[i, :m], inc_v[i, :m] = inc_job[i, by], inc_w[i, by], inc_v[i, by]
        for d in range(n - 1, -1, -1):
            base_sum[i, d] = base_sum[i, d + 1] + base[order[d]]
    dp, offset = np.zeros((0, 0)), np.zeros(LEVELS + 1, dtype=np.int64)
    if priced_bound:
        dp, offset = priced_table(order, first, opt_w, opt_d, cap, price)
    incumbent, best_pick = -np.inf, np.full(n, -1, dtype=np.int64)
    for i in range(LEVELS if priced_bound else 0):
        # each level's exact optimum, where it fits every level, starts the search
        pick = table_pick(dp, offset, i, order, first, opt_w, opt_d, price)
        on = pick[pick >= 0]
        worth = opt_d[on].sum()
        if worth > incumbent and np.all(opt_w[on].sum(axis=0) <= cap):
            incumbent, best_pick[:] = worth, pick
    target = -np.inf
    for lex in (False, True):  # the optimum to within tol, then the tie rule's answer
        used = np.zeros(LEVELS, dtype=np.int64)
        slot = np.full(n, -1, dtype=np.int64)  # per depth: position in the job's table
        current = np.full(n, -1, dtype=np.int64)
        value, nodes, depth, done = 0.0, 0, 0, False
        while depth >= 0 and not done:
            nodes += 1
            if nodes > node_limit:
                return best_pick[:0], False
            if depth == n:  # a leaf passes the bound test below only if worth the limit
                if lex:
                    return current[current >= 0].copy(), True
                incumbent = value
                best_pick[:] = current
                depth -= 1
                continue
            j = order[depth]
            # undo the option this depth held, then move to its next one (width: none)
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
            if value + _bound(depth + 1, rank, inc_job, inc_w, inc_v, n_inc, base_sum,
                              cap - used, dp, offset, price) < limit:
                continue  # this option cannot reach the limit: try the next at this depth
            if depth + 1 < n:
                slot[depth + 1] = -1
            depth += 1
        target = opt_d[best_pick[best_pick >= 0]].sum() - tol
    return best_pick[:0], False
