"""Hadar's Algorithm 2: FIND_ALLOC and the payoff-maximizing choice of jobs (papers/hadar.md).

:func:`find_alloc` lists one job's candidate placements on the GPUs still free and their
payoffs; :func:`round_search` picks a subset of jobs and a placement each maximizing the
summed payoff, re-pricing the nodes after every placement (Algorithm 2, lines 10-12). The
search is a depth-first branch and bound (take one of a job's best placements, or skip it)
whose first leaf is the greedy choice; it is exact while it stays within its budget of
placement evaluations and falls back to the greedy completion after. A job's best payoff on
the empty cluster bounds what it can add anywhere deeper, since prices only rise as GPUs are
handed out. All compiled; the search walks its tree with an explicit stack.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numba as nb
import numpy as np

from simulator.jit import configure_cache

configure_cache()  # before the @njit(cache=True) below

__all__ = ["Round", "find_alloc", "node_prices", "round_search"]

Round = namedtuple("Round", ["node_type", "capacity", "speed", "demand", "remaining", "elapsed",
                             "value", "prev", "restart", "inter", "low", "high", "n_types"])
"""One round's search inputs, per job (row) and node: ``speed[j, h]`` is job ``j``'s gang rate
on node ``h``'s type, ``prev`` the placements held now, ``restart`` the pause a changed
placement costs (0 for jobs not yet started), ``low``/``high`` ``U_min`` and per-node
``U_max`` of the price function (:func:`node_prices`), ``inter`` the spread slowdown."""

_EPS = 1e-12


@nb.njit(cache=True)
def node_prices(used: Any, capacity: Any, low: float, high: Any) -> Any:
    """Eq. 5: ``k = U_min (U_max / U_min)^(used / capacity)`` per node."""
    return low * (high / low) ** (used / capacity)


@nb.njit(cache=True)
def _add(cand: Any, k: int, row: Any) -> int:
    """Append ``row`` to the first ``k`` candidates unless already there; new count."""
    for c in range(k):
        if np.array_equal(cand[c], row):
            return k
    cand[k] = row
    return k + 1


@nb.njit(cache=True)
def _before(a: int, b: int, price: Any, speed: Any, free: Any) -> bool:
    """Node ``a`` is taken before ``b``: cheaper, then faster, then emptier."""
    if price[a] != price[b]:
        return bool(price[a] < price[b])
    if speed[a] != speed[b]:
        return bool(speed[a] > speed[b])
    return bool(free[a] > free[b])


@nb.njit(cache=True)
def find_alloc(w: int, free: Any, capacity: Any, low: float, high: Any, speed: Any, prev: Any,
               node_type: Any, n_types: int, inter: float, remaining: float, elapsed: float,
               value: float, restart_s: float, cand: Any, payoff: Any) -> int:
    """FIND_ALLOC: candidate placements of one gang of ``w`` GPUs, and their payoffs.

    Candidates: the current placement ``prev`` if still free; per type, the cheapest node
    holding the whole gang (then the fullest); per bottleneck speed, the cheapest GPUs at least
    that fast (then the fastest, then the emptiest node), spread when needed. A candidate
    running at ``rate`` (the slowest node's ``speed``, times ``inter`` if spread) lasts
    ``remaining / rate`` (plus ``restart_s`` if it differs from ``prev``) and pays
    ``value / (elapsed + duration) - sum(price * GPUs) * duration``, prices from eq. 5.

    Args:
        cand: ``(2 * n_types + 1, nodes)`` output rows; payoff: their payoffs.

    Returns:
        ``k``: the first ``k`` rows of ``cand`` are the positive-payoff placements, best first.
    """
    h_n = free.shape[0]
    price = node_prices(capacity - free, capacity, low, high)
    k = 0
    if prev.sum() > 0 and np.all(prev <= free):
        k = _add(cand, k, prev)
    row = np.zeros(h_n, dtype=np.int64)
    for t in range(n_types):
        best = -1
        for h in range(h_n):
            if node_type[h] == t and free[h] >= w and (
                    best < 0 or price[h] < price[best]
                    or (price[h] == price[best] and free[h] < free[best])):
                best = h
        if best >= 0:
            row[:] = 0
            row[best] = w
            k = _add(cand, k, row)
    order = np.arange(h_n)  # cheapest, then fastest, then emptiest: insertion sort
    for a in range(1, h_n):
        h, b = order[a], a
        while b > 0 and _before(h, order[b - 1], price, speed, free):
            order[b] = order[b - 1]
            b -= 1
        order[b] = h
    for t in range(n_types):  # spread: each type's speed as the bottleneck
        level = -1.0
        for h in range(h_n):
            if node_type[h] == t and free[h] > 0:
                level = speed[h]
        if level < 0:
            continue
        row[:] = 0
        left = w
        for h in order:
            if left == 0:
                break
            if speed[h] >= level and free[h] > 0:
                take = min(left, free[h])
                row[h] = take
                left -= take
        if left == 0:
            k = _add(cand, k, row)
    for c in range(k):
        rate, nodes, cost, changed = np.inf, 0, 0.0, False
        for h in range(h_n):
            if cand[c, h] > 0:
                rate = min(rate, speed[h])
                nodes += 1
                cost += cand[c, h] * price[h]
            changed = changed or cand[c, h] != prev[h]
        if nodes > 1:
            rate *= inter
        duration = remaining / rate + (restart_s if changed else 0.0)
        payoff[c] = value / (elapsed + duration) - cost * duration
    for a in range(1, k):  # best first, stable
        b = a
        while b > 0 and payoff[b] > payoff[b - 1]:
            payoff[b], payoff[b - 1] = payoff[b - 1], payoff[b]
            row[:] = cand[b]
            cand[b] = cand[b - 1]
            cand[b - 1] = row
            b -= 1
    positive = 0
    while positive < k and payoff[positive] > 0:
        positive += 1
    return positive


@nb.njit(cache=True)
def _options(R: Any, j: int, free: Any, cand: Any, payoff: Any) -> int:
    """Job ``j``'s positive-payoff placements on ``free`` into ``cand``/``payoff``, best
    first; their number."""
    if free.sum() < R.demand[j]:
        return 0
    return find_alloc(R.demand[j], free, R.capacity, R.low, R.high, R.speed[j], R.prev[j],
                      R.node_type, R.n_types, R.inter, R.remaining[j], R.elapsed[j],
                      R.value[j], R.restart[j], cand, payoff)


@nb.njit(cache=True)
def _record(out: Any, depth: int, job: Any, chosen: Any, nopt: Any, rows: Any) -> None:
    """The picks of the path's ``depth`` frames into ``out`` (other rows zero)."""
    out[:] = 0
    for d in range(depth):
        if chosen[d] < nopt[d]:
            out[job[d]] = rows[d, chosen[d]]


@nb.njit(cache=True)
def round_search(R: Any, order: Any, budget: int, out: Any) -> float:
    """Algorithm 2 for jobs visited in ``order``: the best summed payoff found, its
    placements in ``out`` (``(jobs, nodes)``, zero for jobs left out).

    The depth-first search keeps one frame per job taken or skipped on the current path:
    its placements, the branch it is in (each placement, then skipping) and the GPUs free,
    value and next job where it began.
    """
    n, nodes, width = order.shape[0], R.capacity.shape[0], 2 * R.n_types + 1
    rows = np.zeros((n + 1, width, nodes), dtype=np.int64)
    pays = np.zeros((n + 1, width))
    job, nopt = np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)
    chosen, at_i = np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)
    at_value, at_free = np.zeros(n + 1), np.zeros((n + 1, nodes), dtype=np.int64)
    suffix = np.zeros(n + 1)  # each job's best payoff on the empty cluster bounds the rest
    for a in range(n - 1, -1, -1):
        k = _options(R, order[a], R.capacity, rows[0], pays[0])
        bound = pays[0, 0] if k else 0.0
        suffix[a] = bound if a == n - 1 else suffix[a + 1] + bound
    out[:] = 0
    best, evaluations, leaves, depth = 0.0, 0, 0, 0
    i, value, free = 0, 0.0, R.capacity.copy()
    while True:  # a call: the jobs from i on, with free and value
        if evaluations >= budget:
            if not leaves:  # the first, greedy, path was cut short: complete it
                done = _record_greedy(R, order, i, free, value, best, out, depth, job,
                                      chosen, nopt, rows)
                leaves += 1
                if done > best + _EPS:
                    best = done
        else:
            k, pruned = 0, False
            while i < n and free.any() and k == 0:
                if value + suffix[i] <= best + _EPS:
                    pruned = True  # nothing below can beat the best found
                    break
                evaluations += 1
                k = _options(R, order[i], free, rows[depth], pays[depth])
                i += 1
            if k:
                job[depth], nopt[depth], chosen[depth] = order[i - 1], k, -1
                at_i[depth], at_value[depth], at_free[depth] = i, value, free
                depth += 1
            elif not pruned:
                leaves += 1
                if value > best + _EPS:
                    best = value
                    _record(out, depth, job, chosen, nopt, rows)
        while depth and chosen[depth - 1] == nopt[depth - 1]:  # return from finished frames
            depth -= 1
        if not depth:
            return best
        d = depth - 1  # the frame's next branch: its next placement, or skipping the job
        chosen[d] += 1
        i, value, free = at_i[d], at_value[d], at_free[d].copy()
        if chosen[d] < nopt[d]:
            value += pays[d, chosen[d]]
            free -= rows[d, chosen[d]]


@nb.njit(cache=True)
def _record_greedy(R: Any, order: Any, i: int, free: Any, value: float, best: float,
                   out: Any, depth: int, job: Any, chosen: Any, nopt: Any, rows: Any
                   ) -> float:
    """Complete the path greedily (each job's best placement) from ``order[i]``; its value,
    recorded in ``out`` if it beats ``best``."""
    width, nodes = rows.shape[1], rows.shape[2]
    cand, pay = np.zeros((width, nodes), dtype=np.int64), np.zeros(width)
    picks = np.zeros((order.shape[0], nodes), dtype=np.int64)
    taken = np.zeros(order.shape[0], dtype=np.bool_)
    free = free.copy()
    for a in range(i, order.shape[0]):
        if not free.any():
            break
        if _options(R, order[a], free, cand, pay):
            value += pay[0]
            picks[a] = cand[0]
            taken[a] = True
            free -= cand[0]
    if value > best + _EPS:
        _record(out, depth, job, chosen, nopt, rows)
        for a in range(order.shape[0]):
            if taken[a]:
                out[order[a]] = picks[a]
    return value
