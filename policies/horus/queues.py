"""Horus's fair queues of pending jobs (papers/horus.md §4.2.2), compiled.

Algorithm 1 clusters the pending jobs into queues and fills the buffer from each queue by its
weight. The clustering is SciPy's ``kmeans2(z, k, iter=20, minit="++",
seed=np.random.default_rng(0))`` on standardized features, reproduced here draw for draw and
operation for operation so that kernels can run it (``tests/policies/test_horus.py`` holds it
to SciPy on random inputs):

- k-means++ (``scipy.cluster.vq._kpp``): the first centre is ``Generator.integers(n)``
  (Lemire's bounded draw on 32-bit halves of PCG64 outputs, low half first); each next one is
  the first point whose cumulative share of the squared distances reaches
  ``Generator.uniform()``; distances sum ``(centre - point)^2`` feature by feature; the total
  is NumPy's pairwise sum;
- 20 rounds of assignment (nearest centre, the first on ties; ``_vq``'s naive loop) and
  means (sums in point order, divided by the count; an empty cluster keeps its centre). SciPy
  runs every round (``thresh`` is unused) and returns the last assignment;
- standardization as NumPy computes ``mean``/``std`` over axis 0 (sequential sums).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator import pcg64
from simulator.jit import configure_cache, njit
from simulator.libm import pairwise_sum

configure_cache()

__all__ = ["cluster_queues", "fair_buffer", "queue_counts", "queue_weights"]

_SEED0 = pcg64.from_generator(np.random.default_rng(0))
"""``default_rng(0)``'s state: Horus seeds every clustering afresh with it."""
_KMEANS_ROUNDS = 20
_U32 = np.uint64(0xFFFFFFFF)


@njit
def _next_u64(s: Any) -> Any:
    """The next 64-bit PCG64 output (XSL-RR of the stepped state)."""
    pcg64.skip(s, 1)
    x = s[0] ^ s[1]
    rot = s[0] >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


@njit
def _integers(s: Any, n: int) -> Any:
    """``Generator.integers(n)`` for ``2 <= n <= 2**32``: Lemire's method on 32-bit draws,
    each 64-bit output giving its low half, then its high half."""
    excl = np.uint64(n)
    word = _next_u64(s)
    m = (word & _U32) * excl
    high = False
    if (m & _U32) < excl:
        threshold = (_U32 - (excl - np.uint64(1))) % excl
        while (m & _U32) < threshold:
            if high:
                word = _next_u64(s)
                m = (word & _U32) * excl
            else:
                m = (word >> np.uint64(32)) * excl
            high = not high
    return np.int64(m >> np.uint64(32))


@njit
def _sq_dist(a: Any, b: Any) -> float:
    out = 0.0
    for j in range(a.shape[0]):
        d = a[j] - b[j]
        out += d * d
    return out


@njit
def _kmeans_pp(z: Any, k: int, s: Any) -> Any:
    """k-means++ centres (``scipy.cluster.vq._kpp``) drawn from generator state ``s``."""
    n = z.shape[0]
    centres = np.empty((k, z.shape[1]))
    d2 = np.empty(n)
    for c in range(k):
        pick = _integers(s, n) if c == 0 else n - 1
        if c > 0:
            for p in range(n):
                best = np.inf
                for q in range(c):
                    best = min(best, _sq_dist(centres[q], z[p]))
                d2[p] = best
            total = pairwise_sum(d2)
            r = pcg64.next_double(s)
            acc = 0.0
            for p in range(n):  # searchsorted(cumsum(d2 / total), r), side="left"
                acc += d2[p] / total
                if acc >= r:
                    pick = p
                    break
        centres[c, :] = z[pick]
    return centres


@njit
def _kmeans_labels(z: Any, k: int) -> Any:
    """The labels ``kmeans2(z, k, iter=20, minit="++", seed=default_rng(0))`` returns."""
    n, m = z.shape
    centres = _kmeans_pp(z, k, _SEED0.copy())
    labels = np.zeros(n, dtype=np.int64)
    sums, count = np.zeros((k, m)), np.zeros(k, dtype=np.int64)
    for _ in range(_KMEANS_ROUNDS):
        for p in range(n):
            low = np.inf
            for c in range(k):
                d = _sq_dist(centres[c], z[p])
                if d < low:
                    low, labels[p] = d, c
        sums[:], count[:] = 0.0, 0
        for p in range(n):
            sums[labels[p]] += z[p]
            count[labels[p]] += 1
        for c in range(k):
            if count[c] > 0:
                for j in range(m):
                    centres[c, j] = sums[c, j] / count[c]
    return labels


@njit
def _standardized(features: Any) -> Any:
    """``(f - f.mean(0)) / where(f.std(0) > 0, f.std(0), 1)`` as NumPy computes it."""
    n, m = features.shape
    mean, var = np.zeros(m), np.zeros(m)
    for i in range(n):
        mean += features[i]
    mean /= n
    for i in range(n):
        for j in range(m):
            x = features[i, j] - mean[j]
            var[j] += x * x
    scale = np.sqrt(var / n)
    for j in range(m):
        if not scale[j] > 0:
            scale[j] = 1.0
    return (features - mean) / scale


@njit
def _distinct_rows(z: Any, cap: int) -> int:
    """How many distinct rows ``z`` has, counting no further than ``cap``."""
    reps = np.empty(cap, dtype=np.int64)
    found = 0
    for p in range(z.shape[0]):
        new = True
        for q in reps[:found]:
            if np.all(z[q] == z[p]):
                new = False
                break
        if new:
            reps[found] = p
            found += 1
            if found == cap:
                break
    return found


@njit
def cluster_queues(features: Any, k: int) -> Any:
    """Queue of each job: k-means (k-means++ seeded from a fixed generator, so deterministic)
    on standardized features; labels 0..k'-1 with k' <= k non-empty queues."""
    n = features.shape[0]
    z = _standardized(features)
    k = min(k, _distinct_rows(z, max(k, 1)))
    if k <= 1:
        return np.zeros(n, dtype=np.int64)
    labels = _kmeans_labels(z, k)
    rank = np.zeros(k, dtype=np.int64)  # labels renumbered over the non-empty clusters
    for p in range(n):
        rank[labels[p]] = 1
    rank = np.cumsum(rank) - 1
    return rank[labels]


@njit
def queue_weights(lengths: Any, median_wait_s: Any) -> Any:
    """§4.2.2: ``w_x = max(len, median wait x len)`` (waits in seconds)."""
    out = np.empty(lengths.shape[0])
    for q in range(lengths.shape[0]):
        out[q] = max(float(lengths[q]), median_wait_s[q] * lengths[q])
    return out


@njit
def queue_counts(weights: Any, lengths: Any, beta: int) -> Any:
    """Jobs taken from each queue: ``round(beta w_x / sum w)`` (half up), within the queue's
    length and ``beta`` in all; spare slots go to queues with jobs left, heaviest first."""
    raw = float(beta) * weights / pairwise_sum(weights)
    counts = np.minimum(np.floor(raw + 0.5), lengths.astype(np.float64)).astype(np.int64)
    while counts.sum() > beta:  # take back from the queue rounded up most (first on ties)
        over = np.where(counts > 0, counts - raw, -np.inf)
        counts[np.argmax(over)] -= 1
    spare = min(beta, lengths.sum()) - counts.sum()
    for q in np.argsort(-weights, kind="mergesort"):
        take = min(spare, lengths[q] - counts[q])
        counts[q] += take
        spare -= take
    return counts


@njit
def fair_buffer(labels: Any, wait_s: Any, beta: int) -> Any:
    """Algorithm 1 line 4: which pending jobs (given oldest first, with their queues) enter the
    buffer, as positions in arrival order."""
    n = labels.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    k = labels.max() + 1
    lengths = np.bincount(labels, minlength=k).astype(np.int64)
    medians = np.empty(k)
    for q in range(k):
        waits = np.sort(wait_s[labels == q])
        half = waits.shape[0] // 2
        medians[q] = waits[half] if waits.shape[0] % 2 else (waits[half - 1] + waits[half]) / 2
    counts = queue_counts(queue_weights(lengths, medians), lengths, beta)
    out = np.empty(counts.sum(), dtype=np.int64)
    taken, m = np.zeros(k, dtype=np.int64), 0
    for p in range(n):  # each queue's oldest, already in arrival order
        if taken[labels[p]] < counts[labels[p]]:
            taken[labels[p]] += 1
            out[m] = p
            m += 1
    return out
