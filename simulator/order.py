"""A stable sort for kernels that compiles in a fraction of a second, and its first few.

numba's own ``np.argsort(kind="mergesort")`` and ``ndarray.sort`` compile a generic
implementation each (closures, recursion, insertion-sort tails): about 1.5-2 CPU-s apiece,
paid by the first run of every policy that sorts. :func:`stable_order` is a plain merge sort with
the same result as numpy's stable sort (ties keep their input order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator.jit import njit

__all__ = ["first_heap", "first_in_order", "pop_first", "stable_order"]


@njit
def stable_order(keys: Any) -> Any:
    """The indices that sort ``keys`` ascending, equal keys in input order (as
    ``np.argsort(keys, kind="stable")``; NaN keys are not expected).

    A natural merge sort: the runs already in ``keys`` (ascending, or strictly descending
    and reversed) are merged pairwise, so keys that arrive sorted either way (a queue in
    arrival order, classes in size order) cost one pass, and nearly sorted ones a few.
    """
    n = keys.shape[0]
    order = np.empty(n, dtype=np.int64)
    starts = np.empty(n + 1, dtype=np.int64)  # where each run starts, then n
    runs = 0
    i = 0
    while i < n:
        starts[runs] = i
        runs += 1
        j = i + 1
        if j < n and keys[j] < keys[i]:  # strictly descending: no ties to keep in order
            while j < n and keys[j] < keys[j - 1]:
                j += 1
            for k in range(i, j):
                order[k] = i + j - 1 - k
        else:
            while j < n and keys[j] >= keys[j - 1]:
                j += 1
            for k in range(i, j):
                order[k] = k
        i = j
    starts[runs] = n
    if runs <= 1:
        return order
    spare = np.empty(n, dtype=np.int64)
    while runs > 1:
        merged = 0
        for r in range(0, runs, 2):
            lo = starts[r]
            mid, hi = starts[min(r + 1, runs)], starts[min(r + 2, runs)]
            i, j = lo, mid
            for k in range(lo, hi):
                if i < mid and (j >= hi or keys[order[i]] <= keys[order[j]]):
                    spare[k] = order[i]
                    i += 1
                else:
                    spare[k] = order[j]
                    j += 1
            starts[merged] = lo
            merged += 1
        starts[merged] = n
        runs = merged
        order, spare = spare, order
    return order


@njit(_nrt=False)
def _before(keys: Any, a: int, b: int, later_first: bool) -> bool:
    """Whether ``a`` comes before ``b``: the smaller key, ties by position (the later first
    when ``later_first``)."""
    return keys[a] < keys[b] or (keys[a] == keys[b] and (a > b) == later_first)


@njit(_nrt=False)
def _sift(heap: Any, p: int, m: int, keys: Any, later_first: bool) -> None:
    """Move ``heap[p]`` down among the first ``m`` entries until no child comes before it."""
    while True:
        c = 2 * p + 1
        if c >= m:
            return
        if c + 1 < m and _before(keys, heap[c + 1], heap[c], later_first):
            c += 1
        if not _before(keys, heap[c], heap[p], later_first):
            return
        heap[p], heap[c] = heap[c], heap[p]
        p = c


@njit
def first_heap(keys: Any, take: Any, later_first: bool) -> tuple[Any, int]:
    """The indices ``i`` with ``take[i]`` as a heap whose root, ``heap[0]``, comes first in
    ascending ``keys`` order, equal keys by index (as :func:`stable_order` orders them), or
    by index descending when ``later_first``; and their count. :func:`pop_first` takes the
    root off, so the order is read from its start in O(n + read x log n), and what is never
    read is never sorted. NaN keys are not expected."""
    heap = np.flatnonzero(take)
    m = heap.shape[0]
    for p in range(m // 2 - 1, -1, -1):
        _sift(heap, p, m, keys, later_first)
    return heap, m


@njit(_nrt=False)
def pop_first(heap: Any, m: int, keys: Any, later_first: bool) -> int:
    """Take the root off a :func:`first_heap` of ``m`` entries; return the count left."""
    m -= 1
    heap[0] = heap[m]
    _sift(heap, 0, m, keys, later_first)
    return m


@njit
def first_in_order(keys: Any, take: Any, k: int, later_first: bool) -> Any:
    """The first ``k`` (fewer if fewer) of the indices ``i`` with ``take[i]`` in
    :func:`first_heap`'s order."""
    heap, m = first_heap(keys, take, later_first)
    order = np.empty(min(k, m), dtype=np.int64)
    for j in range(order.shape[0]):
        order[j] = heap[0]
        m = pop_first(heap, m, keys, later_first)
    return order
