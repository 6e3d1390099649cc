"""The Lagrangian bound of UniSched's exact selector (:mod:`policies.unisched.exact`): prices
of the four cell levels, and per level the knapsack solved exactly with the other levels
priced."""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.cells import LEVELS
from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["priced_table", "prices", "table_pick"]

SWEEPS, BISECTIONS = 3, 40
"""Coordinate descent on the levels' prices: sweeps over the four levels, bisection steps."""


@njit
def prices(job: Any, weight: Any, delta: Any, cap: Any) -> Any:
    """Prices of the four cell levels for the Lagrangian bound: coordinate descent on its
    dual, ``sum_j max(0, max_o delta_o - price . weight_o) + price . cap``, each level's
    price set by bisection where the cells the jobs' best options take meet the capacity
    (any non-negative prices give a valid bound; these come close to the linear
    relaxation's duals, and depend on nothing but the instance). ``job``: the options'
    jobs, ascending."""
    n = job.max() + 1 if job.shape[0] else 0
    first = np.searchsorted(job, np.arange(n + 1))
    # per level: the top of its bisection, and the jobs some option of which takes the level
    # (the others take none of it at any price)
    top, count = np.zeros(LEVELS), np.zeros(LEVELS, np.int64)
    takers = np.zeros((LEVELS, n), np.int64)
    for i in range(LEVELS):
        for o in range(job.shape[0]):
            if weight[o, i] > 0:
                top[i] = max(top[i], delta[o] / weight[o, i])
        for j in range(n):
            if np.any(weight[first[j]:first[j + 1], i] > 0):
                takers[i, count[i]] = j
                count[i] += 1
    price = np.zeros(LEVELS)
    for _ in range(SWEEPS):
        before = price.copy()
        for i in range(LEVELS):
            lo, hi = 0.0, top[i]
            for _ in range(BISECTIONS):
                price[i] = 0.5 * (lo + hi)
                if _taken(first, takers[i, :count[i]], weight, delta, price, i) > cap[i]:
                    lo = price[i]
                else:
                    hi = price[i]
            price[i] = hi
        if np.all(price == before):
            break  # a sweep that changes nothing: the next ones would repeat it
    return price


@njit
def _taken(first: Any, jobs: Any, weight: Any, delta: Any, price: Any, level: int) -> float:
    """Cells of ``level`` the best options of ``jobs`` (their options at ``first[j]`` up to
    ``first[j + 1]``) take at ``price`` (the dual's slope)."""
    total = 0.0
    for j in jobs:
        best, take = 0.0, 0.0
        for o in range(first[j], first[j + 1]):
            worth = delta[o]
            for i in range(LEVELS):
                worth -= price[i] * weight[o, i]
            if worth > best:
                best, take = worth, weight[o, level]
        total += take
    return total


@njit
def priced_table(order: Any, first: Any, opt_w: Any, opt_d: Any, cap: Any, price: Any
                  ) -> tuple[Any, Any]:
    """Per level ``i``, ``dp[d, offset[i] + c]``: the most the jobs at ranks ``d`` on can add
    with ``c`` cells of level ``i``, the other levels' cells paid for at ``price`` (each
    level's knapsack solved exactly by dynamic programming)."""
    n = order.shape[0]
    offset = np.zeros(LEVELS + 1, dtype=np.int64)
    for i in range(LEVELS):
        offset[i + 1] = offset[i] + max(cap[i], 0) + 1
    dp = np.zeros((n + 1, offset[LEVELS]))
    for i in range(LEVELS):
        worth = _worth(opt_w, opt_d, price, i)
        lo, room = offset[i], offset[i + 1] - offset[i] - 1
        for d in range(n - 1, -1, -1):
            j = order[d]
            dp[d, lo:lo + room + 1] = dp[d + 1, lo:lo + room + 1]
            for o in range(first[j], first[j + 1]):
                w = opt_w[o, i]
                for c in range(w, room + 1):
                    dp[d, lo + c] = max(dp[d, lo + c], dp[d + 1, lo + c - w] + worth[o])
    return dp, offset


@njit
def _worth(opt_w: Any, opt_d: Any, price: Any, level: int) -> Any:
    """Each option's value less the other levels' cells at ``price``."""
    worth = opt_d.copy()
    for other in range(LEVELS):
        if other != level:
            worth -= price[other] * opt_w[:, other]
    return worth


@njit
def table_pick(dp: Any, offset: Any, level: int, order: Any, first: Any, opt_w: Any,
                opt_d: Any, price: Any) -> Any:
    """The options (by rank, -1: none) of an optimum of ``level``'s table (traced back)."""
    n = order.shape[0]
    worth = _worth(opt_w, opt_d, price, level)
    lo, c = offset[level], offset[level + 1] - offset[level] - 1
    pick = np.full(n, -1, dtype=np.int64)
    for d in range(n):
        if dp[d, lo + c] == dp[d + 1, lo + c]:
            continue
        for o in range(first[order[d]], first[order[d] + 1]):
            w = opt_w[o, level]
            if w <= c and dp[d, lo + c] == dp[d + 1, lo + c - w] + worth[o]:
                pick[d] = o
                c -= w
                break
    return pick
