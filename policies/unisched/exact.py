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
counted step (:mod:`policies.unisched.later`). Checked in turn: Proposition 1 (all deadline
jobs fit the whole cluster at once); a plan that works whatever slot 0 holds (every job whose
steps hang on slot 0 runs through each later slot, every other job gets the work all its
steps need without slot 0); and a plan for the slot 0 the knapsack chose. Plans are built
slot by slot, first what each job must run in the slot because the later ones cannot give it
enough, then earliest deadline first; if none is found, HiGHS decides. The set-up is
compiled as well as the search: on the small instances of a search's short rounds (tens of
jobs, thousands of boundaries an evaluation) NumPy's per-call overhead was most of the cost.

The knapsack is solved exactly by depth-first branch and bound (compiled), in two passes: the
first finds the optimum, the second applies the **tie rule**: among assignments within
:data:`TIE_REL` of that optimum, the answer is the first in the search's order. Jobs are
ranked by the value of their best option (more first; the instance's job order among equal
values) and each job's options by value (more first; candidate order among equals, so the
consolidated candidate first), with running nothing last. At the first job in that ranking
where two assignments differ, the one whose option ranks earlier wins: so between identical
jobs, the earlier one runs. The bound is the least of, per cell level, the linear relaxation
of the multiple-choice knapsack on that level alone (each job's options as their convex
hull: :mod:`policies.unisched.relaxation`); past :data:`PLAIN_LIMIT` nodes the search starts
again with, per level, that level's knapsack solved exactly by dynamic programming with the
other levels priced (a Lagrangian relaxation, prices by coordinate descent on its dual:
:mod:`policies.unisched.pricing`).
Bounds change how soon the search ends, not the value of its answer (beyond :data:`TIE_REL`).
A borderline deadline step (within HiGHS's feasibility tolerance: :data:`BORDER`, unless
read ``strict``-ly, as exact arithmetic reads it), a search past :data:`SEARCH_LIMIT` nodes
(:data:`LIMIT`) and a spread candidate faster than the consolidated one (:data:`SHAPE`) go back
to HiGHS. Where no later plan realises every counted step (the later slots are overloaded),
the steps whose reward does not hang on slot 0 are bounded in the later slots alone
(:mod:`policies.unisched.overload`); a plan that reaches that bound certifies the knapsack's
choice for slot 0 with the MILP's objective. An optimum nothing certifies goes back to HiGHS
too, but with the knapsack's choice (:data:`UNPLANNED`), which a run whose HiGHS budget is
spent takes instead (:mod:`policies.unisched.policy`). The result does not depend on
wall-clock time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from policies.cells import LEVELS, NEST, fits_cells
from policies.unisched.later import later_plan
from policies.unisched.overload import certify_overloaded
from policies.unisched.pricing import priced_table, prices, table_pick
from policies.unisched.relaxation import level_bound, linked_steps, unlink
from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["BORDER", "CERTIFIED", "LIMIT", "SEARCH_LIMIT", "SHAPE", "TIE_REL", "UNPLANNED",
           "solve_arrays", "solve_input", "solve_knapsack"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TIE_REL = 1e-9
"""Two assignments within this fraction of the objective count as tied (the tie rule picks)."""
SEARCH_LIMIT = 200_000
"""Branch-and-bound nodes before the instance goes back to HiGHS (a work limit, not a time)."""
PLAIN_LIMIT = 2_000
"""Nodes the search tries with the per-level bounds alone before it prices the levels."""
MARGIN = 1e-5
"""A deadline step met or missed by less than this fraction of its work is HiGHS's to judge
(its feasibility tolerance scales with the row, which is divided by the work)."""
CERTIFIED, UNPLANNED, BORDER, LIMIT, SHAPE = 0, 1, 2, 3, 4
""":func:`solve_arrays`'s verdicts: the MILP's optimum; the knapsack's optimum, which no plan of
the later slots was found to certify (the later slots are overloaded: which deadline jobs get
them is the MILP's decision); and no answer: a borderline step, :data:`SEARCH_LIMIT`, or a
spread candidate faster than the consolidated one."""


def solve_knapsack(inp: Any, *, unplanned: bool = False
                   ) -> tuple[IntArray, IntArray, float] | None:
    """The selector's answer (its optimum, ties broken by the module's rule) if the instance
    has the knapsack shape.

    Args:
        inp: a :class:`policies.unisched.milp.SelectorInput`.
        unplanned: also answer with the knapsack's optimum where no later plan certifies it
            (:data:`UNPLANNED`: its steps and objective are then the relaxation's).

    Returns:
        Per job the candidate run now and the deadline step met (-1: none), and the
        objective; or ``None`` when HiGHS must decide (later slots no plan certifies, unless
        ``unplanned``; a borderline step; :data:`SEARCH_LIMIT`).
    """
    verdict, choice, step, total = solve_input(inp)
    answered = verdict == CERTIFIED or (unplanned and verdict == UNPLANNED)
    return (choice, step, total) if answered else None


def solve_input(inp: Any, *, strict: bool = False) -> tuple[int, IntArray, IntArray, float]:
    """:func:`solve_arrays` on a :class:`policies.unisched.milp.SelectorInput`."""
    return solve_arrays(
        inp.cand_cells, inp.cand_job, inp.cand_phi, inp.now_value, inp.may_start, inp.work_s,
        inp.deadline_s, inp.step_value, inp.slot_s, inp.free_now, inp.free_later, strict)


@njit
def solve_arrays(cand_cells: Any, cand_job: Any, cand_phi: Any, now_value: Any,
                 may_start: Any, work_s: Any, deadline_s: Any, step_value: Any, slot_s: Any,
                 free_now: Any, free_later: Any, strict: bool) -> tuple[int, Any, Any, float]:
    """:func:`solve_knapsack` on the input's arrays (compiled: the set-up is most of a small
    instance's cost; a round kernel calls it too), with its verdict (:data:`CERTIFIED`,
    :data:`UNPLANNED`, or one without an answer, the arrays then empty). ``strict``: a step
    missed by less than :data:`MARGIN` of its work is missed (exact arithmetic), where
    otherwise the verdict is :data:`BORDER` (HiGHS's tolerance might count it met)."""
    n_jobs, steps = work_s.shape
    n_cand, slots = cand_job.shape[0], slot_s.shape[0]
    none = np.zeros(0, dtype=np.int64)
    start = np.searchsorted(cand_job, np.arange(n_jobs))
    step_ok = np.isfinite(work_s) & (deadline_s > 0.0)
    dl = np.zeros(n_jobs, dtype=np.bool_)
    for j in range(n_jobs):
        dl[j] = np.any(step_ok[j])
    weight = np.zeros((n_cand, LEVELS), dtype=np.int64)  # eq. 14's weights
    for c in range(n_cand):
        weight[c] = _nested(cand_cells[c])
    rows = np.flatnonzero(dl)
    first = start[rows]
    for r in rows:
        end = start[r + 1] if r + 1 < n_jobs else n_cand
        if np.any(cand_phi[start[r]:end] > cand_phi[start[r]]):
            return SHAPE, none, none, 0.0  # the consolidated candidate is not the fastest
    edges = np.zeros(slots + 1)
    for k in range(slots):
        edges[k + 1] = edges[k] + slot_s[k]
    avail = np.zeros((n_jobs, steps, slots))
    now_part, later_part = np.zeros((n_jobs, steps)), np.zeros((n_jobs, steps))
    work, value = np.zeros((n_jobs, steps)), np.zeros((n_jobs, steps))
    for j in range(n_jobs):
        for f in range(steps):
            if step_ok[j, f]:
                for k in range(slots):
                    avail[j, f, k] = min(max(deadline_s[j, f] - edges[k], 0.0), slot_s[k])
                work[j, f], value[j, f] = work_s[j, f], step_value[j, f]
            now_part[j, f] = avail[j, f, 0]
            later_part[j, f] = _np_sum(avail[j, f, 1:])
    scale = np.maximum(work, 1.0)
    # option 0 of each job: run nothing now; then its candidates (if it may start)
    idle, idle_step, border = _step_gain(later_part - work, scale, step_ok, value, strict)
    if border:
        return BORDER, none, none, 0.0
    margin = np.zeros((n_cand, steps))
    for c in range(n_cand):
        j = cand_job[c]
        margin[c] = cand_phi[c] * now_part[j] + later_part[j] - work[j]
    gain, cand_step, border = _step_gain(margin, scale[cand_job], step_ok[cand_job],
                                         value[cand_job], strict)
    if border:
        return BORDER, none, none, 0.0
    later_cap = _nested(free_later)
    deadline_or_inf = np.where(step_ok, deadline_s, np.inf)[rows]
    later_avail = np.ascontiguousarray(avail[rows][:, :, 1:])
    taken = np.zeros(LEVELS, dtype=np.int64)
    for c in first:
        taken += cand_cells[c]
    planned = first.shape[0] == 0 or fits_cells(taken, free_later)
    if not planned:
        # a job that misses a step without slot 0 even with every later slot gets them all
        # (if some option of it meets a step); the others, what meets all their steps
        urgent = np.zeros(n_jobs, dtype=np.bool_)
        for j in range(n_jobs):
            urgent[j] = np.any(step_ok[j] & (later_part[j] < work[j]))
        best = idle.copy()
        for c in range(n_cand):
            best[cand_job[c]] = max(best[cand_job[c]], gain[c] if may_start[cand_job[c]] else 0.0)
        need = np.zeros((n_jobs, steps))
        for j in range(n_jobs):
            if not urgent[j]:
                need[j] = np.where(step_ok[j], work[j], 0.0)
        planned = later_plan(weight[first], later_avail, need[rows], (urgent & (best > 0.0))[rows],
                             deadline_or_inf, later_cap)
    delta = now_value[cand_job] * cand_phi + gain - idle[cand_job]
    base = _np_sum(idle)
    cap = _nested(free_now)
    tol = TIE_REL * max(1.0, abs(base) + _np_sum(np.maximum(delta, 0.0)))
    usable = np.zeros(n_cand, dtype=np.bool_)
    for c in range(n_cand):
        usable[c] = may_start[cand_job[c]] and np.all(weight[c] <= cap) and delta[c] > -tol
    keep = np.flatnonzero(usable)
    pick, ok = _search(cand_job[keep], weight[keep], delta[keep], cap, tol)
    if not ok:
        return LIMIT, none, none, 0.0
    choice = np.full(n_jobs, -1, dtype=np.int64)
    chosen = keep[pick]
    choice[cand_job[chosen]] = chosen
    step = idle_step.copy()
    step[cand_job[chosen]] = cand_step[chosen]
    total = base + _np_sum(delta[chosen])
    if not planned:
        # the later slots must realise the steps the knapsack counted, for this slot 0
        now_work = np.zeros((n_jobs, steps))
        for c in chosen:
            now_work[cand_job[c]] = cand_phi[c] * now_part[cand_job[c]]
        need = np.zeros((n_jobs, steps))
        for j in range(n_jobs):
            for f in range(steps):
                if step_ok[j, f] and step[j] >= 0 and f >= step[j]:
                    need[j, f] = max(work[j, f] - now_work[j, f], 0.0)
        if not later_plan(weight[first], later_avail, need[rows],
                          np.zeros(first.shape[0], dtype=np.bool_), deadline_or_inf,
                          later_cap):
            done, final, loose, top = certify_overloaded(
                step, cand_job, cand_phi, weight, may_start, gain, idle, step_ok, work, value,
                avail, now_part, now_work, deadline_or_inf, later_cap, rows, first)
            if not done:
                return UNPLANNED, choice, step, total
            return CERTIFIED, choice, final, total - _np_sum(idle[loose]) + top
    return CERTIFIED, choice, step, total


@njit
def _nested(cells: Any) -> Any:
    """Eq. 14's weights of a cell multiset ``(4,)``: the level-i cells it holds, per level."""
    out = np.zeros(LEVELS, dtype=np.int64)
    for i in range(LEVELS):
        total = 0.0
        for g in range(LEVELS):
            total += cells[g] * NEST[g, i]
        out[i] = int(total)
    return out


@njit
def _np_sum(a: Any) -> float:
    """``a.sum()`` as NumPy adds a 1-D float array (pairwise, eight accumulators per block of
    up to 128), so that the objective and the tie tolerance are NumPy's to the last bit."""
    n = a.shape[0]
    if n < 8:
        total = 0.0
        for x in a:
            total += x
        return total
    if n <= 128:
        r = a[:8].copy()
        i = 8
        while i < n - n % 8:
            r += a[i:i + 8]
            i += 8
        total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            total += a[i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return _np_sum(a[:half]) + _np_sum(a[half:])


@njit
def _search(job: Any, weight: Any, delta: Any, cap: Any, tol: float) -> tuple[Any, bool]:
    """The tie rule's optimal options (indices), and False past :data:`SEARCH_LIMIT` nodes.

    The first try bounds each cell level alone; if it does not settle within
    :data:`PLAIN_LIMIT` nodes, the levels are priced by the dual of the knapsack's linear
    relaxation (:mod:`policies.unisched.pricing`) and the search starts again with the
    Lagrangian bound too."""
    pick, ok = _branch_and_bound(job, weight, delta, cap, tol, PLAIN_LIMIT, False,
                                 np.zeros(LEVELS))
    if not ok:
        pick, ok = _branch_and_bound(job, weight, delta, cap, tol, SEARCH_LIMIT, True,
                                     prices(job, weight, delta, cap))
    return pick, ok


@njit
def _step_gain(margin: Any, scale: Any, ok: Any, value: Any, strict: bool
               ) -> tuple[Any, Any, bool]:
    """Per row: the best reward of a step from which on every step is met (eq. 4 with the
    steps' monotone indicators), that step (-1: none), and whether any margin is borderline
    (never if ``strict``).

    ``margin`` is the work done before each step's deadline less the work it needs."""
    n, steps = margin.shape
    gain, step = np.zeros(n), np.full(n, -1, dtype=np.int64)
    for r in range(n):
        tail = True  # every valid step from f on is met
        for f in range(steps - 1, -1, -1):
            rel = margin[r, f] / scale[r, f]
            if ok[r, f] and -MARGIN < rel < 0.0 and not strict:
                return gain, step, True
            tail = tail and (rel >= 0.0 or not ok[r, f])
            if ok[r, f] and tail and value[r, f] > gain[r]:
                gain[r], step[r] = value[r, f], f
    return gain, step, False


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
    first = np.searchsorted(local, np.arange(n + 1))  # options grouped by job
    # per level, the linear relaxation's steps (the priced bound does without them)
    inc_w, inc_v, nxt, prv, own, own_at, base_sum = linked_steps(
        opt_w, opt_d, first, order, rank, 0 if priced_bound else LEVELS)
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
    target, fixed = -np.inf, 0
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
            if not priced_bound:
                fixed = unlink(fixed, depth + 1, nxt, prv, own, own_at)
            if value + level_bound(depth + 1, nxt, inc_w, inc_v, base_sum, cap - used, dp,
                                   offset, price) < limit:
                continue  # this option cannot reach the limit: try the next at this depth
            if depth + 1 < n:
                slot[depth + 1] = -1
            depth += 1
        target = opt_d[best_pick[best_pick >= 0]].sum() - tol
    return best_pick[:0], False
