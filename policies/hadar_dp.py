"""Hadar's Algorithm 2: FIND_ALLOC and the payoff-maximizing choice of jobs (papers/hadar.md).

:func:`find_alloc` (compiled) lists one job's candidate placements on the GPUs still free and
their payoffs; :class:`RoundSearch` picks a subset of jobs and a placement each maximizing
the summed payoff, re-pricing the nodes after every placement (Algorithm 2, lines 10-12).
The search is a depth-first branch and bound (take one of a job's best placements, or skip
it) whose first leaf is the greedy choice; it is exact while it stays within its budget of
placement evaluations and falls back to the greedy completion after. A job's best payoff on
the empty cluster bounds what it can add anywhere deeper, since prices only rise as GPUs are
handed out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from simulator.jit import configure_cache

configure_cache()  # before the @njit(cache=True) below

__all__ = ["RoundSearch", "find_alloc", "node_prices"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Picks = list[tuple[int, IntArray]]

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


@dataclass
class RoundSearch:
    """Algorithm 2 over one round's jobs (per-job arrays indexed by job).

    Attributes:
        rate_type: ``(jobs, types)`` progress rate of each job's whole gang on each type.
        restart: per job, the pause a changed placement costs (0 for jobs not yet started).
        low, high: ``U_min`` and per-node ``U_max`` of the price function.
        budget: placement evaluations the exact search may spend.
    """

    node_type: IntArray
    capacity: IntArray
    rate_type: FloatArray
    demand: IntArray
    remaining: FloatArray
    elapsed: FloatArray
    value: FloatArray
    prev: IntArray
    restart: FloatArray
    inter: float
    low: float
    high: FloatArray
    budget: int
    evaluations: int = 0
    leaves: int = 0
    best: tuple[float, Picks] = (0.0, [])
    suffix: FloatArray = field(init=False, repr=False)
    _cand: IntArray = field(init=False, repr=False)
    _payoff: FloatArray = field(init=False, repr=False)
    _speed: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n_types = self.rate_type.shape[1]
        self._cand = np.zeros((2 * n_types + 1, self.node_type.shape[0]), dtype=np.int64)
        self._payoff = np.zeros(2 * n_types + 1)
        self._speed = np.ascontiguousarray(self.rate_type[:, self.node_type])

    def placements(self, j: int, free: IntArray) -> list[tuple[float, IntArray]]:
        """Job ``j``'s positive-payoff placements on ``free``, best first."""
        self.evaluations += 1
        if free.sum() < self.demand[j]:
            return []
        k = find_alloc(int(self.demand[j]), free, self.capacity, self.low, self.high,
                       self._speed[j], self.prev[j], self.node_type, self.rate_type.shape[1],
                       self.inter, float(self.remaining[j]), float(self.elapsed[j]),
                       float(self.value[j]), float(self.restart[j]), self._cand, self._payoff)
        return [(float(self._payoff[i]), self._cand[i].copy()) for i in range(k)]

    def run(self, order: IntArray) -> Picks:
        """The chosen ``(job, placement row)`` pairs for jobs visited in ``order``."""
        free = self.capacity.astype(np.int64)
        bound = np.array([max((p for p, _ in self.placements(int(j), free)), default=0.0)
                          for j in order])
        self.suffix = np.append(np.cumsum(bound[::-1])[::-1], 0.0)
        self.evaluations = 0
        self._dfs(order, 0, free, 0.0, [])
        return self.best[1]

    def _dfs(self, order: IntArray, i: int, free: IntArray, value: float, picks: Picks) -> None:
        if self.evaluations >= self.budget:
            if not self.leaves:  # the first, greedy, path was cut short: complete it
                self._greedy(order, i, free, value, picks)
            return
        options: list[tuple[float, IntArray]] = []
        while i < order.size and free.any() and not options:
            if value + self.suffix[i] <= self.best[0] + _EPS:
                return  # nothing below can beat the best found
            options = self.placements(int(order[i]), free)
            i += 1
        if not options:
            self.leaves += 1
            if value > self.best[0] + _EPS:
                self.best = (value, picks)
            return
        j = int(order[i - 1])
        for payoff, row in options:
            self._dfs(order, i, free - row, value + payoff, [*picks, (j, row)])
        self._dfs(order, i, free, value, picks)

    def _greedy(self, order: IntArray, i: int, free: IntArray, value: float,
                picks: Picks) -> None:
        for j in order[i:]:
            if not free.any():
                break
            options = self.placements(int(j), free)
            if options:
                value += options[0][0]
                picks = [*picks, (int(j), options[0][1])]
                free = free - options[0][1]
        self.leaves += 1
        if value > self.best[0] + _EPS:
            self.best = (value, picks)
