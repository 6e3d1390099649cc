"""``exp`` and ``power`` that give the same bits on every CPU.

NumPy picks a ufunc kernel by the CPU it runs on: on AVX-512 machines ``np.exp``, ``np.log``
and ``np.power`` on float64 arrays use vectorised kernels whose last bit differs from the C
library's, elsewhere they call the C library. A seeded workload, a class weight or a reward
computed with them would then differ between a laptop, a Dask worker and CI, and a chaotic
co-location run would follow a different path. Seeded generators and policy parameters go
through these instead: Python's ``math`` calls the C library element by element (the arrays
here are a few thousand values at most).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["exp", "power"]

exp = np.vectorize(math.exp, otypes=[np.float64])
"""Elementwise ``e ** x`` through the C library."""

power = np.vectorize(math.pow, otypes=[np.float64])
"""Elementwise ``x ** y`` (broadcast) through the C library."""
