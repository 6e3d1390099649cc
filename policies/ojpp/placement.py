"""OJPP's placement step (papers/ojpp.md Algorithm 2) and online adjustment (Algorithm 4),
compiled.

Both work on a :data:`~policies.ojpp.pack.Pack` (:mod:`policies.ojpp.pack`): the workers on
each device in their jobs' arrival order, each device's sums and each job's devices, with the
run's own requirements and slowdown model, so the interference bounded here is the
interference the run applies (collisions aside). A kernel builds its pack from the engine's
arrays (:mod:`policies.ojpp.policy`, :mod:`policies.unified.kernel`); :func:`adjust` serves Python
callers (tests).

Per device ``k`` after a worker is added (each bound off when its entry of the bounds vector
is ``inf``; :class:`Bounds`):

- compute ``sum alpha <= alpha_cap`` (eq. 1/11; 1 for OJPP, more for an overcommitting
  policy) and memory ``sum gamma + max delta <= device memory`` (eq. 3/12, in GiB: the paper's
  normalized capacity 1 times the device's memory); always checked;
- collision ``tau(D_k) <= tau_max`` (eq. 4/14);
- interference ``theta_k <= theta_max`` for every worker on ``k``, the new one included
  (eq. 6/15);
- balance: the job's workers' slowdowns within ``theta_balance`` of each other (eq. 16), and no
  co-located job pushed past ``max(theta_balance, its current imbalance)``. The paper does
  not say what a worker alone on its device counts as: by default its slowdown, 0
  (``lone_excluded`` False); else it is left out, and balance is taken over a job's
  co-located workers only (:class:`Bounds`).

Devices are ranked by the lowest resulting interference, then best fit (least capacity left,
compute and memory shares summed), then number (OJPP), or by best fit alone (the baselines).
Algorithm 2's two passes: all workers on active devices; if one does not fit, reset and place
again allowing new devices, each worker preferring an active device; in that pass the job's
minimum interference counts as 0 (its line 11), so workers on active devices stay within
``theta_balance`` of a worker alone on a new device. With ``lone_excluded``, line 11 is read as
the reset of the mapping it sits in, and a worker alone on a new device bounds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from policies.ojpp.pack import (
    DeviceLoad,
    collision,
    join,
    joined,
    leave,
    on_device,
    pack_of,
    resum,
    spread,
)
from simulator.jit import configure_cache, njit
from simulator.rounds.sharing import SharingModel

configure_cache()

__all__ = ["BAL", "CAP", "EPS", "LONE", "N_BOUNDS", "RANK", "TAU", "THETA", "Bounds", "adjust",
           "adjust_pack", "bfd_order", "gregarious_order", "place_pack"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

EPS = 1e-9
"""Slack on the bounds; memory uses a tenth of it (the engine rejects excess > 1e-9 GiB)."""
CAP, TAU, THETA, BAL, RANK, LONE = range(6)
"""Entries of a bounds vector: compute cap, tau-bar, theta-bar, theta' (``inf``: off),
whether devices are ranked by interference (1) or by best fit alone (0), and whether a worker
alone on its device is left out of its job's balance (1) or counts as 0 (0)."""
N_BOUNDS = LONE + 1
"""Length of a bounds vector."""
_INF = np.inf

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
        lone_excluded: eq. 16's max and min leave out a worker alone on its device (balance
            over co-located workers only); False: such a worker counts, as interference 0.
    """

    alpha_cap: float = 1.0
    tau_max: float | None = None
    theta_max: float | None = None
    theta_balance: float | None = None
    rank_by_interference: bool = True
    lone_excluded: bool = False

    def vector(self) -> FloatArray:
        """The bounds vector the compiled functions read (:data:`CAP` ... :data:`LONE`)."""
        return np.array([self.alpha_cap] + [_INF if b is None else b for b in
                                             (self.tau_max, self.theta_max, self.theta_balance)]
                        + [float(self.rank_by_interference), float(self.lone_excluded)])


# ---------------------------------------------------------------- Algorithm 2


@njit(inline="always")
def _fits(P: Any, B: Any, j: int, d: int, allowed: Any) -> bool:
    """Compute and memory (eq. 1, 3) on ``d`` for one more worker of ``j``; unshareable
    devices only when empty, the compute cap only when shared."""
    if not allowed[d] or on_device(P, j, d):
        return False
    empty = P.cnt[d] == 0
    mem = P.gamma[d] + P.mem[j] + max(P.surge[d], P.sgib[j])
    return ((P.alpha[d] + P.util[j] <= B[CAP] + EPS or empty)
            and mem - P.dev_mem[d] <= EPS / 10 and (P.shareable[d] or empty))


@njit(inline="always")
def _crowd(P: Any, B: Any, j: int, d: int) -> bool:
    """Eq. 16's second half with ``j``'s worker on ``d``: no job already on ``d`` pushed past
    ``max(theta', its imbalance now)`` (slowdowns with ``j`` joining, :func:`joined`)."""
    m = joined(P, d, j)
    for y in range(m):
        i, w = P.buf[y], P.vals[y]
        if i == j:
            continue
        hi_x, lo_x, imb = spread(P, i, d, B[LONE] > 0)
        if max(hi_x, w) - min(lo_x, w) > max(B[BAL], imb) + EPS:
            return False
    return True


@njit(_nrt=False)
def _candidates(P: Any, B: Any, j: int, allowed: Any, ok: Any, theta: Any, resid: Any,
                own: Any) -> None:
    """For one more worker of ``j``: devices feasible but for balance (eq. 1, 3, 4, 6), the
    interference each would have, the capacity each would have left (normalized, summed over
    the two dimensions) and the slowdown ``j``'s worker would have there. Only a device's
    members decide these, so placing ``j``'s workers changes them on the devices it takes
    alone."""
    tau_on = B[TAU] < _INF and P.sp[j] > 0
    need_w = B[RANK] > 0 or B[THETA] < _INF or B[BAL] < _INF
    for d in range(P.cnt.shape[0]):
        theta[d], own[d] = 0.0, 0.0
        mem = P.gamma[d] + P.mem[j] + max(P.surge[d], P.sgib[j])
        resid[d] = ((B[CAP] - (P.alpha[d] + P.util[j])) / B[CAP]
                    + (P.dev_mem[d] - mem) / P.dev_mem[d])
        ok[d] = _fits(P, B, j, d, allowed)
        if ok[d] and tau_on:
            ok[d] = collision(P, d, j) <= B[TAU] + EPS
        if ok[d] and need_w:
            m = joined(P, d, j)
            for y in range(m):
                theta[d] = max(theta[d], P.vals[y])
                if P.buf[y] == j:
                    own[d] = P.vals[y]
            ok[d] = theta[d] <= B[THETA] + EPS


@njit(_nrt=False)
def _prune(P: Any, B: Any, devices: Any, live: Any, own: Any, hi: float, lo: float) -> int:
    """Eq. 16's first half: ``devices`` where ``j``'s worker (slowdown ``own``) would spread
    ``j``'s workers (``hi``/``lo`` so far) past theta' leave ``live`` (``hi`` and ``lo`` only
    widen as workers join, so they stay out; a worker alone on an empty device is not
    checked when lone workers are left out); the number of ``devices`` still live."""
    n = 0
    for d in devices:
        if live[d]:
            if ((B[LONE] > 0 and P.cnt[d] == 0)
                    or max(hi, own[d]) - min(lo, own[d]) <= B[BAL] + EPS):
                n += 1
            else:
                live[d] = False
    return n


@njit(_nrt=False)
def _first(P: Any, B: Any, j: int, devices: Any, live: Any) -> int:
    """The first of ``devices`` that is ``live`` and pushes no co-located job past eq. 16
    (:func:`_crowd`, checked there only); -1."""
    for d in devices:
        if live[d] and (B[BAL] == _INF or _crowd(P, B, j, d)):
            return d
    return -1


@njit(inline="always")
def _span(P: Any, B: Any, j: int, fallback: bool) -> tuple[float, float]:
    """Max and min of ``j``'s worker slowdowns so far; with ``fallback``, 0 counts too
    (Algorithm 2 line 11). With lone workers left out (:data:`LONE`), over the co-located
    ones only, and no 0 added."""
    lone_out = B[LONE] > 0
    hi, lo = -_INF, _INF
    for s in range(P.joff[j], P.joff[j] + P.jn[j]):
        if not (lone_out and P.cnt[P.jdev[s]] < 2):
            hi, lo = max(hi, P.wsd[s]), min(lo, P.wsd[s])
    if fallback and not lone_out:
        hi, lo = max(hi, 0.0), min(lo, 0.0)
    return hi, lo


@njit
def place_pack(P: Any, B: Any, j: int, workers: int, opening: Any, allowed: Any,
               prefer: Any, chosen: Any) -> bool:
    """Algorithm 2: devices for ``workers`` more workers of job ``j`` under bounds ``B``.

    Active devices are those with workers now, and ``prefer``; ``opening`` lists the others in
    the order the second pass may open them; only ``allowed`` devices are used. ``prefer``'s
    devices are taken first whenever feasible. On success the workers join ``P`` (sums
    updated), ``chosen[:workers]`` holds their devices in the order assigned and the result is
    True; else ``P`` is as it was.

    Each worker takes the first feasible device of: ``prefer``; the active devices ranked
    (lowest interference, then best fit, then number; or best fit, then number); in the second
    pass, the others in ``opening`` order. What :func:`_candidates` finds holds for the whole
    placement (the devices taken drop out), so it and the ranking are computed once; balance
    (eq. 16) is checked per worker, and a pass stops as soon as fewer devices are left than
    workers to place.
    """
    D = P.cnt.shape[0]
    act = P.cnt > 0
    act[prefer] = True
    ok, theta, resid, own = np.empty(D, dtype=np.bool_), np.empty(D), np.empty(D), np.empty(D)
    _candidates(P, B, j, allowed, ok, theta, resid, own)
    ranked = np.flatnonzero(ok & act)
    ranked = ranked[np.argsort(resid[ranked], kind="mergesort")]
    if B[RANK] > 0:
        ranked = ranked[np.argsort(theta[ranked], kind="mergesort")]
    fresh = np.empty(opening.shape[0], dtype=np.int64)
    n = 0
    for d in opening:
        if ok[d] and not act[d]:
            fresh[n] = d
            n += 1
    fresh = fresh[:n]
    for fallback in (False, True):
        live = ok.copy()
        got = 0
        while got < workers:
            hi, lo = _span(P, B, j, fallback)
            left = _prune(P, B, ranked, live, own, hi, lo)
            if fallback:
                left += _prune(P, B, fresh, live, own, hi, lo)
            k = -1
            if left >= workers - got:
                k = _first(P, B, j, prefer, live)
                if k < 0:
                    k = _first(P, B, j, ranked, live)
                if k < 0 and fallback:
                    k = _first(P, B, j, fresh, live)
            if k < 0:
                break
            join(P, j, k)
            live[k] = False
            chosen[got] = k
            got += 1
        if got == workers:
            for y in range(got):
                resum(P, chosen[y])
            return True
        for y in range(got):
            leave(P, j, chosen[y])
    return False


# ---------------------------------------------------------------- queues


@njit
def bfd_order(util: Any, mem: Any, sgib: Any, jobs: Any) -> Any:
    """Algorithm 1's queue: ``jobs`` by their workers' compute need, descending (ties: peak
    memory ``gamma + delta``, descending; then the given order)."""
    peak = mem[jobs] + sgib[jobs]
    by_peak = jobs[np.argsort(-peak, kind="mergesort")]
    return by_peak[np.argsort(-util[by_peak], kind="mergesort")]


@njit
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


@njit
def adjust_pack(P: Any, B: Any, score: Any, budget: float, opening: Any, moves: Any,
                still: Any) -> tuple[int, float]:
    """Algorithm 4 on ``P``: migrate workers off the most interfered devices within
    ``budget``.

    The priority queue is the first half (rounded up) of the active devices by ``score``
    (observed interference), descending. From each one that holds two or more workers, the
    cheapest worker to move (cost: its base memory ``gamma`` in GiB, what a checkpoint moves)
    whose co-located jobs stay balanced without it goes to the device :func:`place_pack`
    chooses under ``B`` (any device but its own), while the costs moved stay within
    ``budget``. Moves ``(job, from, to)`` go to ``moves``; returns their number and the cost.

    A device's tries depend on ``P`` alone while nothing has moved: ``still[k] == 1`` says
    they moved nothing on this very ``P`` (the caller clears it when ``P`` changes), so ``k``
    is skipped until a move; a device tried without a move before any is marked so.
    """
    D = P.cnt.shape[0]
    on = np.flatnonzero(P.cnt > 0)
    queue = on[np.argsort(-score[on], kind="mergesort")][:(on.shape[0] + 1) // 2]
    allowed = np.ones(D, dtype=np.bool_)
    none, chosen = np.empty(0, dtype=np.int64), np.empty(1, dtype=np.int64)
    spent, n = 0.0, 0
    for k in queue:
        if P.cnt[k] < 2 or (n == 0 and still[k] == 1):
            continue
        members = P.members[k, :P.cnt[k]].copy()
        for q in members[np.argsort(P.mem[members], kind="mergesort")]:
            if spent + P.mem[q] > budget + EPS:
                break
            old = np.empty(members.shape[0])
            for y, i in enumerate(members):
                old[y] = spread(P, i, -1, B[LONE] > 0)[2]
            leave(P, q, k)
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
            join(P, q, k)
            resum(P, k)
        if n == 0:
            still[k] = 1
    return n, spent


@njit(_nrt=False)
def _removal_balanced(P: Any, B: Any, members: Any, old: Any, gone: int) -> bool:
    """Whether the jobs left among ``members`` (imbalances ``old`` before ``gone`` left)
    stay within ``max(theta', old)``."""
    for y, i in enumerate(members):
        if i != gone and spread(P, i, -1, B[LONE] > 0)[2] > max(B[BAL], old[y]) + EPS:
            return False
    return True


# ---------------------------------------------------------------- Python callers


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
                           np.arange(d), moves, np.zeros(d, dtype=np.int64))
    out = np.zeros_like(placed, dtype=bool)
    for j in range(len(rows)):
        out[j, P.jdev[P.joff[j]:P.joff[j] + P.jn[j]]] = True
    return out, [(int(a), int(b), int(c)) for a, b, c in moves[:n]], float(spent)
