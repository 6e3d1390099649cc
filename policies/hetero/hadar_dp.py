"""Hadar's Algorithm 2: FIND_ALLOC and the payoff-maximizing choice of jobs (papers/hadar.md).

:func:`find_alloc` lists one job's candidate placements on the GPUs still free and their
payoffs; :func:`round_search` picks a subset of jobs and a placement each maximizing the
summed payoff, re-pricing the nodes after every placement (Algorithm 2, lines 10-12). The
search is a depth-first branch and bound (take one of a job's best placements, or skip it)
whose first leaf is the greedy choice; it is exact while it stays within its budget of
placement evaluations and falls back to the greedy completion after. A job's best payoff on
the empty cluster bounds what it can add anywhere deeper, since prices only rise as GPUs are
handed out. All compiled; the search walks its tree with an explicit stack, looks prices
up in a per-round table and allocates nothing per evaluation.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from simulator.jit import configure_cache, njit

configure_cache()  # before the @njit(cache=True) below

__all__ = ["Round", "find_alloc", "node_prices", "price_table", "round_search"]

Round = namedtuple("Round", ["node_type", "capacity", "speed", "demand", "remaining", "elapsed",
                             "value", "prev", "restart", "inter", "price", "n_types"])
"""One round's search inputs, per job (row) and node: ``speed[j, h]`` is job ``j``'s gang rate
on node ``h``'s type, ``prev`` the placements held now, ``restart`` the pause a changed
placement costs (0 for jobs not yet started), ``price[h, used]`` node ``h``'s price with
``used`` of its GPUs handed out (:func:`price_table`), ``inter[j]`` the job's speed spread
over 2 nodes and over more."""

_EPS = 1e-12


@njit
def node_prices(used: Any, capacity: Any, low: float, high: Any) -> Any:
    """Eq. 5: ``k = U_min (U_max / U_min)^(used / capacity)`` per node."""
    return low * (high / low) ** (used / capacity)


@njit
def price_table(capacity: Any, low: float, high: Any) -> Any:
    """Eq. 5 for every node (row) and every count of its GPUs in use (column), given
    ``U_min`` and per-node ``U_max``: the search looks prices up instead of raising powers."""
    top = capacity.max()
    table = np.empty((capacity.shape[0], top + 1))
    for used in range(top + 1):
        table[:, used] = node_prices(np.full(capacity.shape[0], used), capacity, low, high)
    return table


@njit
def _add(cand: Any, k: int) -> int:
    """Keep ``cand[k]`` unless one of the first ``k`` candidates equals it; the new count."""
    for c in range(k):
        same = True
        for h in range(cand.shape[1]):
            if cand[c, h] != cand[k, h]:
                same = False
                break
        if same:
            return k
    return k + 1


@njit
def _free_order(free: Any, price: Any, speed: Any, order: Any) -> int:
    """The nodes with free GPUs into ``order``: cheapest, then fastest, then emptiest (stable
    insertion sort); their number."""
    m = 0
    for h in range(free.shape[0]):
        if free[h] == 0:
            continue
        b = m
        while b > 0:
            o = order[b - 1]
            if price[h] != price[o]:
                if price[h] >= price[o]:
                    break
            elif speed[h] != speed[o]:
                if speed[h] <= speed[o]:
                    break
            elif free[h] <= free[o]:
                break
            order[b] = o
            b -= 1
        order[b] = h
        m += 1
    return m


@njit
def find_alloc(R: Any, j: int, free: Any, total: int, cand: Any, payoff: Any, price: Any,
               order: Any) -> int:
    """FIND_ALLOC: candidate placements of job ``j``'s gang of ``w`` GPUs on the ``free``
    GPUs (``total`` of them), and their payoffs.

    Candidates: the current placement ``prev`` if still free; per type, the cheapest node
    holding the whole gang (then the fullest); per bottleneck speed, the cheapest GPUs at least
    that fast (then the fastest, then the emptiest node), spread when needed. A candidate
    running at ``rate`` (the slowest node's ``speed``, times ``inter`` if spread) lasts
    ``remaining / rate`` (plus ``restart`` if it differs from ``prev``) and pays
    ``value / (elapsed + duration) - sum(price * GPUs) * duration``, prices from eq. 5; one
    on GPUs where the job's speed is 0 is never positive.

    Args:
        cand: ``(2 * n_types + 1, nodes)`` output rows; payoff: their payoffs.
        price, order: scratch, one entry per node.

    Returns:
        ``k``: the first ``k`` rows of ``cand`` are the positive-payoff placements, best first.
    """
    h_n, w = free.shape[0], R.demand[j]
    if total < w:
        return 0
    held, fits = 0, True
    for h in range(h_n):
        price[h] = R.price[h, R.capacity[h] - free[h]]
        held += R.prev[j, h]
        fits = fits and R.prev[j, h] <= free[h]
    k = 0
    if held > 0 and fits:
        cand[0] = R.prev[j]
        k = 1
    for t in range(R.n_types):
        best = -1
        for h in range(h_n):
            if R.node_type[h] == t and free[h] >= w and (
                    best < 0 or price[h] < price[best]
                    or (price[h] == price[best] and free[h] < free[best])):
                best = h
        if best >= 0:
            cand[k] = 0
            cand[k, best] = w
            k = _add(cand, k)
    m = _free_order(free, price, R.speed[j], order)
    for t in range(R.n_types):  # spread: each type's speed as the bottleneck
        level = -1.0
        for h in range(h_n):
            if R.node_type[h] == t and free[h] > 0:
                level = R.speed[j, h]
        if level < 0:
            continue
        cand[k] = 0
        left = w
        for a in range(m):
            if left == 0:
                break
            h = order[a]
            if R.speed[j, h] >= level:
                take = min(left, free[h])
                cand[k, h] = take
                left -= take
        if left == 0:
            k = _add(cand, k)
    for c in range(k):
        rate, nodes, cost, changed = np.inf, 0, 0.0, False
        for h in range(h_n):
            if cand[c, h] > 0:
                rate = min(rate, R.speed[j, h])
                nodes += 1
                cost += cand[c, h] * price[h]
            changed = changed or cand[c, h] != R.prev[j, h]
        if rate <= 0:  # GPUs of a type the job cannot run on (speed 0): never a choice
            payoff[c] = -np.inf
            continue
        if nodes > 1:
            rate *= R.inter[j, 0 if nodes == 2 else 1]
        duration = R.remaining[j] / rate + (R.restart[j] if changed else 0.0)
        payoff[c] = R.value[j] / (R.elapsed[j] + duration) - cost * duration
    for a in range(1, k):  # best first, stable
        b = a
        while b > 0 and payoff[b] > payoff[b - 1]:
            payoff[b], payoff[b - 1] = payoff[b - 1], payoff[b]
            for h in range(h_n):
                cand[b, h], cand[b - 1, h] = cand[b - 1, h], cand[b, h]
            b -= 1
    positive = 0
    while positive < k and payoff[positive] > 0:
        positive += 1
    return positive


@njit
def _take(free: Any, row: Any) -> int:
    """Hand ``row`` out of ``free``; the GPUs it takes."""
    gpus = 0
    for h in range(free.shape[0]):
        free[h] -= row[h]
        gpus += row[h]
    return gpus


@njit
def _record(out: Any, depth: int, job: Any, chosen: Any, nopt: Any, rows: Any) -> None:
    """The picks of the path's ``depth`` frames into ``out`` (other rows zero)."""
    out[:] = 0
    for d in range(depth):
        if chosen[d] < nopt[d]:
            out[job[d]] = rows[d, chosen[d]]


@njit
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
    at_total = np.zeros(n + 1, dtype=np.int64)
    price, by_price = np.empty(nodes), np.empty(nodes, dtype=np.int64)
    free, total = R.capacity.copy(), R.capacity.sum()
    suffix = np.zeros(n + 1)  # each job's best payoff on the empty cluster bounds the rest
    for a in range(n - 1, -1, -1):
        k = find_alloc(R, order[a], free, total, rows[0], pays[0], price, by_price)
        bound = pays[0, 0] if k else 0.0
        suffix[a] = bound if a == n - 1 else suffix[a + 1] + bound
    out[:] = 0
    best, evaluations, leaves, depth, i, value = 0.0, 0, 0, 0, 0, 0.0
    while True:  # a call: the jobs from i on, with free and value
        if evaluations >= budget:
            if not leaves:  # the first, greedy, path was cut short: complete it
                done = _record_greedy(R, order, i, free, total, value, best, out, depth, job,
                                      chosen, nopt, rows)
                leaves += 1
                if done > best + _EPS:
                    best = done
        else:
            k, pruned = 0, False
            while i < n and total > 0 and k == 0:
                if value + suffix[i] <= best + _EPS:
                    pruned = True  # nothing below can beat the best found
                    break
                evaluations += 1
                k = find_alloc(R, order[i], free, total, rows[depth], pays[depth], price,
                             by_price)
                i += 1
            if k:
                job[depth], nopt[depth], chosen[depth] = order[i - 1], k, -1
                at_i[depth], at_value[depth], at_total[depth] = i, value, total
                for c in range(free.shape[0]):
                    at_free[depth, c] = free[c]
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
        i, value, total = at_i[d], at_value[d], at_total[d]
        for c in range(free.shape[0]):
            free[c] = at_free[d, c]
        if chosen[d] < nopt[d]:
            value += pays[d, chosen[d]]
            total -= _take(free, rows[d, chosen[d]])


@njit
def _record_greedy(R: Any, order: Any, i: int, free: Any, total: int, value: float,
                   best: float, out: Any, depth: int, job: Any, chosen: Any, nopt: Any,
                   rows: Any) -> float:
    """Complete the path greedily (each job's best placement) from ``order[i]``; its value,
    recorded in ``out`` if it beats ``best``."""
    width, nodes = rows.shape[1], rows.shape[2]
    cand, pay = np.zeros((width, nodes), dtype=np.int64), np.zeros(width)
    price, by_price = np.empty(nodes), np.empty(nodes, dtype=np.int64)
    picks = np.zeros((order.shape[0], nodes), dtype=np.int64)
    taken = np.zeros(order.shape[0], dtype=np.bool_)
    free = free.copy()
    for a in range(i, order.shape[0]):
        if total == 0:
            break
        if find_alloc(R, order[a], free, total, cand, pay, price, by_price):
            value += pay[0]
            picks[a] = cand[0]
            taken[a] = True
            total -= _take(free, cand[0])
    if value > best + _EPS:
        _record(out, depth, job, chosen, nopt, rows)
        for a in range(order.shape[0]):
            if taken[a]:
                out[order[a]] = picks[a]
    return value
