"""OJPP's placement step (papers/ojpp.md Algorithm 2) and online adjustment (Algorithm 4),
compiled.

Both work on a :data:`Pack`: the workers on each device (its members, in their jobs' arrival
order), each device's sums and each job's devices. Job requirements and the slowdown model are
the run's own (the workload's sharing columns, the interference matrix or the per-type
utilization curves), so the interference bounded here is the interference the run applies
(collisions aside). A kernel builds its pack from the engine's arrays (:mod:`policies.ojpp`,
:mod:`policies.unified_kernel`); :func:`adjust` serves Python callers (tests) through
:class:`DeviceLoad` and :func:`pack_of`.

Per device ``k`` after a worker is added (each bound off when its entry of the bounds vector
is ``inf``; :class:`Bounds`):

- compute ``sum alpha <= alpha_cap`` (eq. 1/11; 1 for OJPP, more for an overcommitting
  policy) and memory ``sum gamma + max delta <= device memory`` (eq. 3/12, in GiB: the paper's
  normalized capacity 1 times the device's memory); always checked;
- collision ``tau(D_k) <= tau_max`` (eq. 4/14);
- interference ``theta_k <= theta_max`` for every worker on ``k``, the new one included
  (eq. 6/15);
- balance: the job's workers' slowdowns within ``theta_balance`` of each other (eq. 16), and no
  co-located job pushed past ``max(theta_balance, its current imbalance)``.

Devices are ranked by the lowest resulting interference, then best fit (least capacity left,
compute and memory shares summed), then number (OJPP), or by best fit alone (the baselines).
Algorithm 2's two passes: all workers on active devices; if one does not fit, reset and place
again allowing new devices, each worker preferring an active device; in that pass the job's
minimum interference counts as 0 (its line 11), so workers on active devices stay within
``theta_balance`` of a worker alone on a new device.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from policies.colocating import curve_slowdown
from simulator.jit import configure_cache
from simulator.sharing import SharingModel

configure_cache()

__all__ = ["BAL", "CAP", "EPS", "RANK", "TAU", "THETA", "Bounds", "DeviceLoad", "Pack",
           "adjust", "adjust_pack", "bfd_order", "cache_slowdowns", "gregarious_order", "join",
           "leave", "pack_of", "place_pack", "resum"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

EPS = 1e-9
"""Slack on the bounds; memory uses a tenth of it (the engine rejects excess > 1e-9 GiB)."""
CAP, TAU, THETA, BAL, RANK = range(5)
"""Entries of a bounds vector: compute cap, tau-bar, theta-bar, theta' (``inf``: off) and
whether devices are ranked by interference (1) or by best fit alone (0)."""
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


@dataclass(frozen=True)
class Bounds:
    """What a placement must respect; None switches a check off.

    Attributes:
        alpha_cap: compute bound per device (1: no overcommit).
        tau_max: collision probability bound tau-bar (eq. 14).
        theta_max: device interference bound theta-bar (eq. 15).
        theta_balance: per-job ``max - min`` worker interference bound theta' (eq. 16).
        rank_by_interference: prefer the device with the lowest resulting interference
            (Algorithm 2); False: best fit only.
    """

    alpha_cap: float = 1.0
    tau_max: float | None = None
    theta_max: float | None = None
    theta_balance: float | None = None
    rank_by_interference: bool = True

    def vector(self) -> FloatArray:
        """The bounds vector the compiled functions read (:data:`CAP` ... :data:`RANK`)."""
        return np.array([self.alpha_cap] + [_INF if b is None else b for b in
                                             (self.tau_max, self.theta_max, self.theta_balance)]
                        + [float(self.rank_by_interference)])


# ---------------------------------------------------------------- the pack


@nb.njit(cache=True)
def resum(P: Any, d: int) -> None:
    """Device ``d``'s sums, from its members in arrival order."""
    a, g, s = 0.0, 0.0, 0.0
    for x in range(P.cnt[d]):
        j = P.members[d, x]
        a += P.util[j]
        g += P.mem[j]
        s = max(s, P.sgib[j])
    P.alpha[d], P.gamma[d], P.surge[d] = a, g, s


@nb.njit(cache=True)
def _refresh(P: Any, d: int) -> None:
    """The cached slowdowns (``wsd``) of device ``d``'s workers."""
    for x in range(P.cnt[d]):
        i = P.members[d, x]
        v = slowdown(P, i, d, -1)
        for s in range(P.joff[i], P.joff[i] + P.jn[i]):
            if P.jdev[s] == d:
                P.wsd[s] = v


@nb.njit(cache=True)
def cache_slowdowns(P: Any) -> None:
    """Every placed worker's slowdown into ``wsd`` (once, after building a pack)."""
    for d in range(P.cnt.shape[0]):
        _refresh(P, d)


@nb.njit(cache=True)
def _join(P: Any, j: int, d: int) -> None:
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


@nb.njit(cache=True)
def _leave(P: Any, j: int, d: int) -> None:
    """Job ``j``'s worker off device ``d`` (lists and slowdowns)."""
    x = 0
    while P.members[d, x] != j:
        x += 1
    P.members[d, x:P.cnt[d] - 1] = P.members[d, x + 1:P.cnt[d]].copy()
    P.cnt[d] -= 1
    s, end = P.joff[j], P.joff[j] + P.jn[j]
    while P.jdev[s] != d:
        s += 1
    P.jdev[s:end - 1] = P.jdev[s + 1:end].copy()
    P.wsd[s:end - 1] = P.wsd[s + 1:end].copy()
    P.jn[j] -= 1
    _refresh(P, d)


join, leave = _join, _leave
"""One worker joining or leaving a device, for kernels that move a placed job."""


@nb.njit(cache=True)
def _on(P: Any, j: int, d: int) -> bool:
    for s in range(P.joff[j], P.joff[j] + P.jn[j]):  # noqa: SIM110 (compiled: no any())
        if P.jdev[s] == d:
            return True
    return False


@nb.njit(cache=True)
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


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _cached(P: Any, i: int, d: int) -> float:
    """The cached slowdown (``wsd``) of job ``i``'s worker on device ``d``, which it is on."""
    s = P.joff[i]
    while P.jdev[s] != d:
        s += 1
    return P.wsd[s]


@nb.njit(cache=True)
def _joined(P: Any, d: int, x: int) -> int:
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


@nb.njit(cache=True)
def _collision(P: Any, d: int, x: int) -> float:
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


@nb.njit(cache=True)
def _spread(P: Any, i: int, skip: int) -> tuple[float, float, float]:
    """Job ``i``'s worker slowdowns: max and min over its devices other than ``skip``, and its
    imbalance (max - min over all of them, 0 with fewer than two workers)."""
    hi_x, lo_x, hi, lo = -_INF, _INF, -_INF, _INF
    for s in range(P.joff[i], P.joff[i] + P.jn[i]):
        e = P.jdev[s]
        v = P.wsd[s]
        hi, lo = max(hi, v), min(lo, v)
        if e != skip:
            hi_x, lo_x = max(hi_x, v), min(lo_x, v)
    return hi_x, lo_x, hi - lo if P.jn[i] >= 2 else 0.0


# ---------------------------------------------------------------- Algorithm 2


@nb.njit(cache=True, inline="always")
def _fits(P: Any, B: Any, j: int, d: int, allowed: Any) -> bool:
    """Compute and memory (eq. 1, 3) on ``d`` for one more worker of ``j``; unshareable
    devices only when empty, the compute cap only when shared."""
    if not allowed[d] or _on(P, j, d):
        return False
    empty = P.cnt[d] == 0
    mem = P.gamma[d] + P.mem[j] + max(P.surge[d], P.sgib[j])
    return ((P.alpha[d] + P.util[j] <= B[CAP] + EPS or empty)
            and mem - P.dev_mem[d] <= EPS / 10 and (P.shareable[d] or empty))


@nb.njit(cache=True)
def _balanced(P: Any, B: Any, j: int, d: int, hi: float, lo: float, m: int) -> bool:
    """Eq. 16 with ``j``'s worker on ``d``: ``j``'s own workers (``hi``/``lo`` so far) and
    every job already on ``d`` (the ``m`` workers and slowdowns :func:`_joined` left in
    ``P.buf`` and ``P.vals``)."""
    limit = B[BAL]
    x = 0.0
    for y in range(m):
        if P.buf[y] == j:
            x = P.vals[y]
    if not max(hi, x) - min(lo, x) <= limit + EPS:
        return False
    for y in range(m):
        i, w = P.buf[y], P.vals[y]
        if i == j:
            continue
        hi_x, lo_x, imb = _spread(P, i, d)
        if max(hi_x, w) - min(lo_x, w) > max(limit, imb) + EPS:
            return False
    return True


@nb.njit(cache=True)
def _candidates(P: Any, B: Any, j: int, fallback: bool, allowed: Any, ok: Any, theta: Any,
                resid: Any) -> None:
    """For one more worker of ``j``: feasible devices, the interference each would have and
    the capacity each would have left (normalized, summed over the two dimensions)."""
    tau_on = B[TAU] < _INF and P.sp[j] > 0
    need_w = B[RANK] > 0 or B[THETA] < _INF or B[BAL] < _INF
    hi, lo = -_INF, _INF
    if B[BAL] < _INF:
        for s in range(P.joff[j], P.joff[j] + P.jn[j]):
            v = P.wsd[s]
            hi, lo = max(hi, v), min(lo, v)
        if fallback:
            hi, lo = max(hi, 0.0), min(lo, 0.0)
    for d in range(P.cnt.shape[0]):
        theta[d] = 0.0
        mem = P.gamma[d] + P.mem[j] + max(P.surge[d], P.sgib[j])
        resid[d] = ((B[CAP] - (P.alpha[d] + P.util[j])) / B[CAP]
                    + (P.dev_mem[d] - mem) / P.dev_mem[d])
        ok[d] = _fits(P, B, j, d, allowed)
        if ok[d] and tau_on:
            ok[d] = _collision(P, d, j) <= B[TAU] + EPS
        if ok[d] and need_w:
            m = _joined(P, d, j)
            for y in range(m):
                theta[d] = max(theta[d], P.vals[y])
            ok[d] = theta[d] <= B[THETA] + EPS
            if ok[d] and B[BAL] < _INF:
                ok[d] = _balanced(P, B, j, d, hi, lo, m)


@nb.njit(cache=True)
def place_pack(P: Any, B: Any, j: int, workers: int, opening: Any, allowed: Any,
               prefer: Any, chosen: Any) -> bool:
    """Algorithm 2: devices for ``workers`` more workers of job ``j`` under bounds ``B``.

    Active devices are those with workers now, and ``prefer``; ``opening`` lists the others in
    the order the second pass may open them; only ``allowed`` devices are used. ``prefer``'s
    devices are taken first whenever feasible. On success the workers join ``P`` (sums
    updated), ``chosen[:workers]`` holds their devices in the order assigned and the result is
    True; else ``P`` is as it was.
    """
    D = P.cnt.shape[0]
    act = P.cnt > 0
    act[prefer] = True
    ok, theta, resid = np.empty(D, dtype=np.bool_), np.empty(D), np.empty(D)
    room = 0
    for d in range(D):
        room += _fits(P, B, j, d, allowed)
    if room < workers:
        return False  # cheap: the other checks only take devices away
    for fallback in (False, True):
        got = 0
        for _ in range(workers):
            _candidates(P, B, j, fallback, allowed, ok, theta, resid)
            k = -1
            for d in prefer:
                if ok[d]:
                    k = d
                    break
            if k < 0:
                for d in range(D):
                    if ok[d] and act[d] and (k < 0 or (
                            theta[d] < theta[k] or (theta[d] == theta[k] and resid[d] < resid[k])
                            if B[RANK] > 0 else resid[d] < resid[k])):
                        k = d
            if k < 0 and fallback:
                for d in opening:
                    if ok[d] and not act[d]:
                        k = d
                        break
            if k < 0:
                break
            _join(P, j, k)
            chosen[got] = k
            got += 1
        if got == workers:
            for y in range(got):
                resum(P, chosen[y])
            return True
        for y in range(got):
            _leave(P, j, chosen[y])
    return False


# ---------------------------------------------------------------- queues


@nb.njit(cache=True)
def bfd_order(util: Any, mem: Any, sgib: Any, jobs: Any) -> Any:
    """Algorithm 1's queue: ``jobs`` by their workers' compute need, descending (ties: peak
    memory ``gamma + delta``, descending; then the given order)."""
    peak = mem[jobs] + sgib[jobs]
    by_peak = jobs[np.argsort(-peak, kind="mergesort")]
    return by_peak[np.argsort(-util[by_peak], kind="mergesort")]


@nb.njit(cache=True)
def gregarious_order(p: Any, queue: Any) -> Any:
    """Algorithm 3's order: before each pick, re-sort the remaining ``queue`` by gregariousness
    ``tau(i, V) = max_q p_i p_q`` (eq. 20: two workers collide with probability ``p_i p_q``)
    over the others still queued, ascending; ties keep the queue's order.

    Args:
        p: surge probability of each job (indexed by the entries of ``queue``).
        queue: the initial queue (Algorithm 3 line 1: resource requirement, descending).
    """
    left = queue.copy()
    out = np.empty_like(queue)
    for step in range(queue.shape[0]):
        m = left.shape[0] - step
        top, second = -1, 0.0  # the largest p (first of equals), the largest of the others
        for y in range(m):
            v = p[left[y]]
            if top < 0 or v > p[left[top]]:
                if top >= 0:
                    second = max(second, p[left[top]])
                top = y
            else:
                second = max(second, v)
        pick, best = 0, _INF
        for y in range(m):
            partner = second if y == top else max(p[left[top]], 0.0)
            tau = p[left[y]] * partner
            if tau < best:
                pick, best = y, tau
        out[step] = left[pick]
        left[pick:m - 1] = left[pick + 1:m].copy()
    return out


# ---------------------------------------------------------------- Algorithm 4


@nb.njit(cache=True)
def adjust_pack(P: Any, B: Any, score: Any, budget: float, opening: Any,
                moves: Any) -> tuple[int, float]:
    """Algorithm 4 on ``P``: migrate workers off the most interfered devices within
    ``budget``.

    The priority queue is the first half (rounded up) of the active devices by ``score``
    (observed interference), descending. From each one that holds two or more workers, the
    cheapest worker to move (cost: its base memory ``gamma`` in GiB, what a checkpoint moves)
    whose co-located jobs stay balanced without it goes to the device :func:`place_pack`
    chooses under ``B`` (any device but its own), while the costs moved stay within
    ``budget``. Moves ``(job, from, to)`` go to ``moves``; returns their number and the cost.
    """
    D = P.cnt.shape[0]
    on = np.flatnonzero(P.cnt > 0)
    queue = on[np.argsort(-score[on], kind="mergesort")][:(on.shape[0] + 1) // 2]
    allowed = np.ones(D, dtype=np.bool_)
    none, chosen = np.empty(0, dtype=np.int64), np.empty(1, dtype=np.int64)
    spent, n = 0.0, 0
    for k in queue:
        if P.cnt[k] < 2:
            continue
        members = P.members[k, :P.cnt[k]].copy()
        for q in members[np.argsort(P.mem[members], kind="mergesort")]:
            if spent + P.mem[q] > budget + EPS:
                break
            old = np.empty(members.shape[0])
            for y, i in enumerate(members):
                old[y] = _spread(P, i, -1)[2]
            _leave(P, q, k)
            resum(P, k)
            allowed[k] = False
            if ((B[BAL] == _INF or _removal_balanced(P, B, members, old, q))
                    and place_pack(P, B, q, 1, opening, allowed, none, chosen)):
                allowed[k] = True
                spent = spent + P.mem[q]
                moves[n, 0], moves[n, 1], moves[n, 2] = q, k, chosen[0]
                n += 1
                break
            allowed[k] = True
            _join(P, q, k)
            resum(P, k)
    return n, spent


@nb.njit(cache=True)
def _removal_balanced(P: Any, B: Any, members: Any, old: Any, gone: int) -> bool:
    """Whether the jobs left among ``members`` (imbalances ``old`` before ``gone`` left)
    stay within ``max(theta', old)``."""
    for y, i in enumerate(members):
        if i != gone and _spread(P, i, -1)[2] > max(B[BAL], old[y]) + EPS:
            return False
    return True


# ---------------------------------------------------------------- Python callers


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


def adjust(sh: SharingModel, rows: IntArray, placed: BoolArray, score: FloatArray,
           bounds: Bounds, budget: float) -> tuple[BoolArray, list[tuple[int, int, int]], float]:
    """:func:`adjust_pack` on a placement of the jobs at workload ``rows`` (arrival order).

    Returns:
        The new placement, the moves ``(job index, from device, to device)``, the cost spent.
    """
    load = DeviceLoad.of(sh, rows, placed)
    P = pack_of(sh, load, room=1)
    d = placed.shape[1]
    moves = np.zeros((d, 3), dtype=np.int64)
    n, spent = adjust_pack(P, bounds.vector(), np.asarray(score, np.float64), budget,
                           np.arange(d), moves)
    out = np.zeros_like(placed, dtype=bool)
    for j in range(len(rows)):
        out[j, P.jdev[P.joff[j]:P.joff[j] + P.jn[j]]] = True
    return out, [(int(a), int(b), int(c)) for a, b, c in moves[:n]], float(spent)
