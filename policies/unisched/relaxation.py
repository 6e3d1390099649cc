"""The linear relaxation behind UniSched's exact selector (:mod:`policies.unisched.exact`):
per cell level, the multiple-choice knapsack of the jobs not yet fixed, each job's options as
the convex hull of their values over their cells on that level, filled greedily.

The branch and bound asks for it at every node. The hull steps of all jobs are kept in one
list per level, by value per cell, and the steps of the jobs the search has fixed are
unlinked from it as it goes deeper and linked back as it backtracks (dancing links), so a
bound scans only the steps it may take. The scan's arithmetic is that of scanning every step
and skipping the fixed jobs' (the search as it was), so its bounds are the same to the bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.cells import LEVELS
from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["level_bound", "linked_steps", "unlink"]


@njit
def linked_steps(opt_w: Any, opt_d: Any, first: Any, order: Any, rank: Any, levels: int
                 ) -> tuple[Any, Any, Any, Any, Any, Any, Any]:
    """The steps of the first ``levels`` levels (the others left empty), for options
    ``first[j]`` to ``first[j + 1]`` of each job ``j``, jobs ranked ``order`` (``rank`` its
    inverse).

    Returns:
        ``(inc_w, inc_v, nxt, prv, own, own_at, base_sum)``: per level the steps' weights and
        values by value per cell, most first; their list (``nxt[i, -1]`` its head, -1 its
        end) and its back links; the steps of the job at rank ``r`` in
        ``own[i, own_at[i, r]:own_at[i, r + 1]]``; and what the jobs at ranks ``d`` on are
        worth without the level, in ``base_sum[i, d]``.
    """
    n, n_opt = order.shape[0], opt_d.shape[0]
    inc_job = np.zeros((LEVELS, n_opt), dtype=np.int64)
    inc_w, inc_v = np.zeros((LEVELS, n_opt)), np.zeros((LEVELS, n_opt))
    nxt, prv = np.full((LEVELS, n_opt + 1), -1), np.full((LEVELS, n_opt + 1), -1)
    own, own_at = np.zeros((LEVELS, n_opt), dtype=np.int64), np.zeros((LEVELS, n + 1), np.int64)
    base_sum = np.zeros((LEVELS, n + 1))
    for i in range(levels):
        base = np.zeros(n)
        m = 0
        for j in range(n):
            a, b = first[j], first[j + 1]
            k, base[j] = _hull_steps(opt_w[a:b, i], opt_d[a:b], inc_w[i, m:], inc_v[i, m:])
            inc_job[i, m:m + k] = j
            m += k
        by = np.argsort(-(inc_v[i, :m] / inc_w[i, :m]), kind="mergesort")
        inc_job[i, :m], inc_w[i, :m], inc_v[i, :m] = inc_job[i, by], inc_w[i, by], inc_v[i, by]
        prev = n_opt  # the head, also at -1
        for q in range(m):
            nxt[i, prev], prv[i, q] = q, prev
            prev = q
        step_rank = rank[inc_job[i, :m]]
        own[i, :m] = np.argsort(step_rank, kind="mergesort")
        own_at[i] = np.searchsorted(step_rank[own[i, :m]], np.arange(n + 1))
        for d in range(n - 1, -1, -1):
            base_sum[i, d] = base_sum[i, d + 1] + base[order[d]]
    return inc_w, inc_v, nxt, prv, own, own_at, base_sum


@njit
def level_bound(depth: int, nxt: Any, inc_w: Any, inc_v: Any, base_sum: Any, cap: Any,
                dp: Any, offset: Any, price: Any) -> float:
    """The least of upper bounds on what the jobs not yet fixed (ranks ``depth`` on) can add
    within ``cap``: per cell level, the linear relaxation of the multiple-choice knapsack on
    that level alone; and, where ``dp`` has rows, per level the Lagrangian relaxation of the
    other three at ``price``, that level's knapsack solved exactly
    (:mod:`policies.unisched.pricing`, level ``i`` in columns ``offset[i]:offset[i + 1]``).

    On level ``i`` a job is worth its best option that takes none of the level (summed over
    the unfixed jobs in ``base_sum[i, depth]``), plus the steps of the upper convex hull of
    its options over their weight on the level (``inc_*[i]``, by value per cell, most
    first): filled greedily, the last step fractionally, that is the relaxation's optimum
    (each job's own steps come in falling order). The steps of the unfixed jobs are linked
    in that order, from ``nxt[i, -1]`` (see :func:`unlink`)."""
    if depth == base_sum.shape[1] - 1:
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
        q = nxt[i, -1]
        while q >= 0:
            if room <= 0.0 or total >= out:
                break
            if inc_w[i, q] <= room:
                total += inc_v[i, q]
                room -= inc_w[i, q]
            else:
                total += inc_v[i, q] * room / inc_w[i, q]
                room = 0.0
            q = nxt[i, q]
        out = min(out, total)
    return out


@njit
def unlink(fixed: int, depth: int, nxt: Any, prv: Any, own: Any, own_at: Any) -> int:
    """Unlink the steps of the jobs at ranks ``fixed`` to ``depth - 1`` from every level's
    list, or link back those at ranks ``depth`` to ``fixed - 1`` (last unlinked, first
    linked back: the lists are dancing links); return ``depth``, the ranks now unlinked.
    ``own[i, own_at[i, r]:own_at[i, r + 1]]``: the steps on level ``i`` of the job at rank
    ``r``. So a bound skips no fixed job's steps: scanning past them made every node of a
    deep search cost as much as the instance has options."""
    while fixed < depth:
        for i in range(LEVELS):
            for k in range(own_at[i, fixed], own_at[i, fixed + 1]):
                q = own[i, k]
                nxt[i, prv[i, q]] = nxt[i, q]
                if nxt[i, q] >= 0:
                    prv[i, nxt[i, q]] = prv[i, q]
        fixed += 1
    while fixed > depth:
        fixed -= 1
        for i in range(LEVELS):
            for k in range(own_at[i, fixed + 1] - 1, own_at[i, fixed] - 1, -1):
                q = own[i, k]
                nxt[i, prv[i, q]] = q
                if nxt[i, q] >= 0:
                    prv[i, nxt[i, q]] = q
    return fixed


@njit
def _hull_steps(w: Any, v: Any, sw: Any, sv: Any) -> tuple[int, float]:
    """Upper concave hull of the points ``(w, v)`` and ``(0, 0)`` on the rising side: its
    steps (weight, value), slopes falling, written to ``sw`` and ``sv``; their count, and the
    hull's value at weight 0."""
    base = 0.0
    for o in range(w.shape[0]):
        if w[o] == 0:
            base = max(base, v[o])
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
    return k, base
