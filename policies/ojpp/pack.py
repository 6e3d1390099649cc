"""OJPP's pack, compiled: devices, the workers on them and each job's devices, with the sums
and slowdowns the placement bounds read (papers/ojpp.md §3; the placement itself is
:mod:`policies.ojpp.placement`).

Slowdowns come from the run's own model (the interference matrix or the per-type utilization
curves), summed over co-located workers in arrival order as ``SharingModel.worker_slowdowns``
does; collisions follow eq. 4. :class:`DeviceLoad` and :func:`pack_of` build a pack from a
placement for Python callers.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from policies.colocating import curve_slowdown
from simulator.jit import configure_cache, njit
from simulator.rounds.sharing import SharingModel

configure_cache()

__all__ = ["DeviceLoad", "Pack", "cache_slowdowns", "collision", "join", "joined", "leave",
           "on_device", "pack_of", "resum", "slowdown", "spread"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_INF = np.inf

Pack = namedtuple("Pack", [
    "pos", "util", "mem", "sgib", "sp", "model",
    "dev_type", "dev_mem", "shareable", "matrix", "curves", "has_matrix",
    "alpha", "gamma", "surge", "cnt", "members", "jn", "joff", "jdev", "wsd", "buf", "vals"])
"""Devices and the workers on them. Jobs are ids into the per-job arrays: arrival position
``pos``, compute ``util`` (alpha), base memory ``mem`` (gamma, GiB), surge ``sgib`` (delta)
with probability ``sp``, ``model`` (row of ``matrix``). Per device: type, memory, whether it
may be shared, and the sums of its members ``members[d, :cnt[d]]`` (ascending ``pos``):
compute ``alpha``, base memory ``gamma``, largest surge ``surge``. Job ``j``'s devices are
``jdev[joff[j]:joff[j] + jn[j]]``, and ``wsd`` (same slots) holds each of those workers'
slowdown (:func:`slowdown`, nobody joining), kept by :func:`cache_slowdowns` and every join
and leave. ``buf`` (jobs) and ``vals`` (floats) are scratch, one more entry than
``members``'s columns."""



@njit(_nrt=False)
def resum(P: Any, d: int) -> None:
    """Device ``d``'s sums, from its members in arrival order."""
    a, g, s = 0.0, 0.0, 0.0
    for x in range(P.cnt[d]):
        j = P.members[d, x]
        a += P.util[j]
        g += P.mem[j]
        s = max(s, P.sgib[j])
    P.alpha[d], P.gamma[d], P.surge[d] = a, g, s


@njit(_nrt=False)
def _refresh(P: Any, d: int) -> None:
    """The cached slowdowns (``wsd``) of device ``d``'s workers."""
    for x in range(P.cnt[d]):
        i = P.members[d, x]
        v = slowdown(P, i, d, -1)
        for s in range(P.joff[i], P.joff[i] + P.jn[i]):
            if P.jdev[s] == d:
                P.wsd[s] = v


@njit(_nrt=False)
def cache_slowdowns(P: Any) -> None:
    """Every placed worker's slowdown into ``wsd`` (once, after building a pack)."""
    for d in range(P.cnt.shape[0]):
        _refresh(P, d)


@njit(_nrt=False)
def join(P: Any, j: int, d: int) -> None:
    """A worker of job ``j`` onto device ``d`` (lists and slowdowns; sums by
    :func:`resum`)."""
    x = P.cnt[d]
    while x > 0 and P.pos[P.members[d, x - 1]] > P.pos[j]:
        P.members[d, x] = P.members[d, x - 1]
        x -= 1
    P.members[d, x] = j
    P.cnt[d] += 1
    P.jdev[P.joff[j] + P.jn[j]] = d
    P.jn[j] += 1
    _refresh(P, d)


@njit(_nrt=False)
def leave(P: Any, j: int, d: int) -> None:
    """Job ``j``'s worker off device ``d`` (lists and slowdowns)."""
    x = 0
    while P.members[d, x] != j:
        x += 1
    P.cnt[d] -= 1
    for y in range(x, P.cnt[d]):
        P.members[d, y] = P.members[d, y + 1]
    s, end = P.joff[j], P.joff[j] + P.jn[j]
    while P.jdev[s] != d:
        s += 1
    for y in range(s, end - 1):
        P.jdev[y], P.wsd[y] = P.jdev[y + 1], P.wsd[y + 1]
    P.jn[j] -= 1
    _refresh(P, d)

"""One worker joining or leaving a device, for kernels that move a placed job."""


@njit(_nrt=False)
def on_device(P: Any, j: int, d: int) -> bool:
    for s in range(P.joff[j], P.joff[j] + P.jn[j]):  # noqa: SIM110 (compiled: no any())
        if P.jdev[s] == d:
            return True
    return False


@njit(_nrt=False)
def _with(P: Any, d: int, x: int) -> int:
    """Device ``d``'s members with job ``x`` joining (``x < 0``: none) into ``P.buf``, in
    arrival order; their number."""
    m = 0
    for y in range(P.cnt[d]):
        q = P.members[d, y]
        if x >= 0 and m == y and P.pos[x] < P.pos[q]:
            P.buf[m] = x
            m += 1
        P.buf[m] = q
        m += 1
    if x >= 0 and m == P.cnt[d]:
        P.buf[m] = x
        m += 1
    return m


@njit(_nrt=False)
def slowdown(P: Any, i: int, d: int, x: int) -> float:
    """The slowdown of job ``i``'s worker on device ``d`` with job ``x``'s worker joining
    (``x < 0``: none; ``i == x``: the joining worker's), collisions left out
    (``SharingModel.worker_slowdowns``: sums over co-located workers in arrival order)."""
    m = _with(P, d, x)
    if m < 2:
        return 0.0
    t = P.dev_type[d]
    if P.has_matrix:
        mi, w = P.model[i], 0.0
        for y in range(m):
            if P.buf[y] != i:
                w += P.matrix[mi, P.model[P.buf[y]], t]
        return w
    u = 0.0
    for y in range(m):
        u += P.util[P.buf[y]]
    return curve_slowdown(P, t, u)


@njit(_nrt=False)
def _cached(P: Any, i: int, d: int) -> float:
    """The cached slowdown (``wsd``) of job ``i``'s worker on device ``d``, which it is on."""
    s = P.joff[i]
    while P.jdev[s] != d:
        s += 1
    return P.wsd[s]


@njit(_nrt=False)
def joined(P: Any, d: int, x: int) -> int:
    """Device ``d``'s workers with job ``x`` joining into ``P.buf`` (arrival order) and
    their slowdowns (:func:`slowdown` with ``x`` joining) into ``P.vals``; their number.

    The same sums in the same order, fewer of them: one cumulative utilization for the whole
    device on a curve; on a matrix, a worker's cached sum plus ``x``'s term when ``x`` joins
    behind every worker (else the full sum)."""
    m = _with(P, d, x)
    if m < 2:
        P.vals[:m] = 0.0
        return m
    t = P.dev_type[d]
    if not P.has_matrix:
        u = 0.0
        for y in range(m):
            u += P.util[P.buf[y]]
        P.vals[:m] = curve_slowdown(P, t, u)
        return m
    mx, last = P.model[x], P.buf[m - 1] == x
    for y in range(m):
        i = P.buf[y]
        if i == x and last:
            w = 0.0
            for z in range(m - 1):
                w += P.matrix[mx, P.model[P.buf[z]], t]
            P.vals[y] = w
        elif last:
            P.vals[y] = _cached(P, i, d) + P.matrix[P.model[i], mx, t]
        else:
            P.vals[y] = slowdown(P, i, d, x)  # refills P.buf with the same workers
    return m


@njit(_nrt=False)
def collision(P: Any, d: int, x: int) -> float:
    """Eq. 4 on device ``d`` with job ``x`` joining (``colocation.collision_probability`` over
    the workers that may surge, in arrival order; 0 with fewer than two). Uses ``P.vals``."""
    m = _with(P, d, x)
    q = P.vals
    k = 0
    for y in range(m):
        if P.sp[P.buf[y]] > 0:
            q[k] = 1.0 - P.sp[P.buf[y]]
            k += 1
    if k < 2:
        return 0.0
    none = q[0]
    for y in range(1, k):
        none *= q[y]
    one = 0.0
    for i in range(k):
        rest = 1.0
        first = True
        for y in range(k):
            if y != i:
                rest = q[y] if first else rest * q[y]
                first = False
        one += (1.0 - q[i]) * rest
    return max(0.0, 1.0 - none - one)


@njit(_nrt=False)
def spread(P: Any, i: int, skip: int, lone_out: bool) -> tuple[float, float, float]:
    """Job ``i``'s worker slowdowns: max and min over its devices other than ``skip``, and its
    imbalance (max - min over all of them, 0 with fewer than two). With ``lone_out`` a worker
    alone on its device is left out of all three (balance over co-located workers only); else
    it counts with its slowdown, 0."""
    hi_x, lo_x, hi, lo = -_INF, _INF, -_INF, _INF
    n = 0
    for s in range(P.joff[i], P.joff[i] + P.jn[i]):
        e = P.jdev[s]
        if lone_out and P.cnt[e] < 2:
            continue
        v = P.wsd[s]
        hi, lo = max(hi, v), min(lo, v)
        n += 1
        if e != skip:
            hi_x, lo_x = max(hi_x, v), min(lo_x, v)
    return hi_x, lo_x, hi - lo if n >= 2 else 0.0


@dataclass(frozen=True, eq=False)
class DeviceLoad:
    """What is on each device, for Python callers: the jobs placed and the sums the bounds
    read.

    Attributes:
        rows: workload row of each job (rows of ``placed``), in arrival order.
        placed: ``(jobs, devices)`` placement, at most one worker of a job per device.
        alpha: ``(devices,)`` summed compute need of the workers there.
        gamma_gib: ``(devices,)`` summed base memory.
        surge_gib: ``(devices,)`` largest memory surge.
    """

    rows: IntArray
    placed: BoolArray
    alpha: FloatArray
    gamma_gib: FloatArray
    surge_gib: FloatArray

    @classmethod
    def of(cls, sh: SharingModel, rows: IntArray, placed: BoolArray) -> DeviceLoad:
        """The loads of ``placed`` (copied), jobs at workload ``rows``."""
        J = sh.jobs
        return cls(np.asarray(rows, dtype=np.int64).copy(), np.array(placed, dtype=bool),
                   J.gpu_util[rows] @ placed, J.mem_gib[rows] @ placed,
                   np.where(placed, J.surge_gib[rows][:, None], 0.0).max(axis=0, initial=0.0))


def pack_of(sh: SharingModel, load: DeviceLoad, room: int = 0) -> Any:
    """A :data:`Pack` of ``load`` (its sums as given); jobs are indices into ``load.rows``,
    each with room for ``room`` more workers."""
    J, placed = sh.jobs, load.placed
    n, d = placed.shape
    rows = load.rows
    curves = np.zeros((len(sh.curves), 6))
    for t, curve in enumerate(sh.curves):
        if curve is not None:
            a, b, c = curve.quadratic
            curves[t] = (a, b, c, *(curve.linear or (a + b + c - 1.0, 0.0)), 1.0)
    members = np.zeros((d, max(n, 1)), dtype=np.int64)
    cnt = placed.sum(axis=0).astype(np.int64)
    for k in range(d):
        members[k, :cnt[k]] = np.flatnonzero(placed[:, k])
    jn = placed.sum(axis=1).astype(np.int64)
    joff = np.concatenate([[0], np.cumsum(jn + room)]).astype(np.int64)
    jdev = np.zeros(max(int(joff[-1]), 1), dtype=np.int64)
    for j in range(n):
        jdev[joff[j]:joff[j] + jn[j]] = np.flatnonzero(placed[j])

    def f(a: Any) -> FloatArray:
        return np.array(a, dtype=np.float64)

    P = Pack(np.arange(n, dtype=np.int64), f(J.gpu_util[rows]), f(J.mem_gib[rows]),
             f(J.surge_gib[rows]), f(J.surge_p[rows]), np.array(sh.model[rows], np.int64),
             np.array(sh.device_type, np.int64), f(sh.device_mem_gib),
             np.array(sh.shareable, np.bool_),
             f(sh.matrix if sh.matrix is not None else np.zeros((1, 1, 1))), curves,
             sh.matrix is not None, f(load.alpha), f(load.gamma_gib), f(load.surge_gib),
             cnt, members, jn, joff, jdev, np.zeros(jdev.shape[0]),
             np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1))
    cache_slowdowns(P)
    return P
