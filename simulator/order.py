"""A stable sort for kernels that compiles in a fraction of a second.

numba's own ``np.argsort(kind="mergesort")`` and ``ndarray.sort`` compile a generic
implementation each (closures, recursion, insertion-sort tails): about 1.5-2 CPU-s apiece,
paid by the first run of every policy that sorts. :func:`stable_order` is a plain merge sort with
the same result as numpy's stable sort (ties keep their input order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator.jit import njit

__all__ = ["stable_order"]


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
