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

__all__ = ["first_in_order", "stable_order"]


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
def _sift(heap: Any, m: int, keys: Any, later_first: bool) -> None:
    """Restore the heap's order (each entry after its children) down from its root."""
    p = 0
    while True:
        c = 2 * p + 1
        if c >= m:
            return
        if c + 1 < m and _before(keys, heap[c], heap[c + 1], later_first):
            c += 1
        if not _before(keys, heap[p], heap[c], later_first):
            return
        heap[p], heap[c] = heap[c], heap[p]
        p = c


@njit
def first_in_order(keys: Any, take: Any, k: int, later_first: bool) -> Any:
    """The first ``k`` of the indices ``i`` with ``take[i]`` (fewer if fewer), in ascending
    ``keys`` order, equal keys by index (descending when ``later_first``): the head of
    ``stable_order`` of those keys, in O(n log k). A heap holds the ``k`` first seen, its root
    the last of them, so most indices cost one comparison. NaN keys are not expected."""
    heap = np.empty(max(k, 0), dtype=np.int64)
    m = 0
    for i in range(keys.shape[0]):
        if not take[i]:
            continue
        if m < k:  # the newcomer rises past the entries it comes before
            c = m
            heap[c] = i
            m += 1
            while c > 0 and _before(keys, heap[(c - 1) // 2], heap[c], later_first):
                heap[c], heap[(c - 1) // 2] = heap[(c - 1) // 2], heap[c]
                c = (c - 1) // 2
        elif k > 0 and _before(keys, i, heap[0], later_first):
            heap[0] = i
            _sift(heap, m, keys, later_first)
    order = np.empty(m, dtype=np.int64)
    for j in range(m - 1, -1, -1):  # the root is the last: take it off, end first
        order[j] = heap[0]
        heap[0] = heap[j]
        _sift(heap, j, keys, later_first)
    return order
