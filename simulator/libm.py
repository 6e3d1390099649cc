"""``exp``, ``power`` and compiled sums that give the same bits on every CPU.

NumPy picks a ufunc kernel by the CPU it runs on: on AVX-512 machines ``np.exp``, ``np.log``
and ``np.power`` on float64 arrays use vectorised kernels whose last bit differs from the C
library's, elsewhere they call the C library. A seeded workload, a class weight or a reward
computed with them would then differ between a laptop, a Dask worker and CI, and a chaotic
co-location run would follow a different path. Seeded generators and policy parameters go
through these instead: Python's ``math`` calls the C library element by element (the arrays
here are a few thousand values at most). Compiled kernels that must add as NumPy's ``sum``
does use :func:`pairwise_sum`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["exp", "pairwise_sum", "power"]

exp = np.vectorize(math.exp, otypes=[np.float64])
"""Elementwise ``e ** x`` through the C library."""

power = np.vectorize(math.pow, otypes=[np.float64])
"""Elementwise ``x ** y`` (broadcast) through the C library."""


@njit
def _block_sum(a: Any, lo: int, n: int) -> float:
    """NumPy's sum of up to 128 doubles: in order below 8, else eight running sums."""
    if n < 8:
        out = 0.0
        for i in range(lo, lo + n):
            out += a[i]
        return out
    r = a[lo:lo + 8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += a[lo + i + j]
        i += 8
    out = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        out += a[lo + i]
        i += 1
    return out


@njit
def pairwise_sum(a: Any) -> float:
    """``a.sum()`` as NumPy adds doubles: blocks of up to 128 (:func:`_block_sum`), longer
    stretches halved (at a multiple of 8) and their sums added. Walked with a stack, as
    numba cannot cache a recursive function."""
    los, ns, stage = np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64, np.int64)
    sums = np.empty(64)
    top, done = 0, 0
    los[0], ns[0], stage[0] = 0, a.shape[0], 0
    while top >= 0:
        lo, n = los[top], ns[top]
        half = n // 2 - (n // 2) % 8
        if n <= 128:
            sums[done] = _block_sum(a, lo, n)
            done += 1
            top -= 1
        elif stage[top] < 2:  # descend into the left, then the right half
            stage[top] += 1
            left = stage[top] == 1
            top += 1
            los[top] = lo if left else lo + half
            ns[top] = half if left else n - half
            stage[top] = 0
        else:
            done -= 1
            sums[done - 1] = sums[done - 1] + sums[done]
            top -= 1
    return sums[0]
