"""The compiled round loop (semantics: :mod:`simulator.rounds`, state: :mod:`.round_arrays`).

:func:`run_loop` replays events until the run ends, a Python decision is due, an arrival asks
for a prediction, or the busy-GPU series needs room; the driver in
:mod:`simulator.round_driver` handles each and calls it again, and it carries on where it
stopped. A prediction forks the state (:func:`fork`, the active rows only) and plays it out in
``PLAYOUT`` mode: estimated sizes, no arrivals, until the target finishes.

Costs follow what moves, not the queue: events and decisions touch the jobs holding GPUs
(``state.hold``) and the rows a plan rewrote, so a long waiting queue costs only its share of
the kernel's own work; and round boundaries at which a kernel said it would decide the same
are jumped over (``memory.quiet``), so quiet stretches cost nothing.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from simulator.jit import configure_cache

configure_cache()

from simulator import pcg64  # noqa: E402  (after the cache is configured)
from simulator.round_arrays import (  # noqa: E402
    ANCHORED,
    ARR_HI,
    ARR_LO,
    BUSY,
    CLUSTER_T,
    CUM0,
    CUM1,
    DECISIONS,
    ERR_A,
    ERR_B,
    ERR_X,
    EVENTS,
    GONE,
    HOST,
    JOBS_T,
    MEMORY_T,
    N_ACTIVE,
    N_HOLD,
    NEXT_ROUND,
    NOW,
    NXT,
    OCC_USED,
    OCC_UTIL,
    PHASE,
    ROUND_KERNEL_SIG,
    SERIES_K,
    SKIPPED,
    STATE_T,
    SURGING,
    UTIL,
)

__all__ = ["APPLIED", "ARRIVED", "DONE", "ERR_IDLE", "ERR_NO_DECISION", "ERR_PLAN", "GROW",
           "HOST_DUE", "MAIN", "OVER_DEMAND", "OVER_MEMORY", "OVER_NODE", "PLAYOUT", "PREDICT",
           "REDECIDE", "STUCK", "apply_plan", "fork", "index_devices", "job_rate", "run_loop",
           "speed"]

# modes
MAIN, PREDICT, PLAYOUT = 0, 1, 2
# statuses (each ends a call of run_loop)
DONE, HOST_DUE, ARRIVED, GROW, STUCK, ERR_NO_DECISION, ERR_IDLE, ERR_PLAN = range(8)
# plan errors (cnt[ERR_A]; cnt[ERR_B] the node, device or row, clk[ERR_X] the amount)
BAD_COUNT, OVER_NODE, OVER_DEMAND, BAD_DEVICE, OVER_MEMORY = range(5)
# phases of a decision handed to Python (cnt[PHASE])
PENDING, APPLIED, REDECIDE = 1, 2, 3
_INF = np.inf


@nb.njit(cache=True, inline="always")
def speed(C: Any, m: int, g: float) -> float:
    """``ScalingTable.speed`` for one job: linear between integer counts, flat above."""
    top = C.speedup.shape[1] - 1
    g = min(max(g, 0.0), float(top))
    lo = int(g)
    hi = min(lo + 1, top)
    base = C.speedup[m, lo]
    return base + (g - lo) * (C.speedup[m, hi] - base)


@nb.njit(cache=True)
def job_rate(C: Any, m: int, alloc: Any) -> float:
    """Rate of a job of model ``m`` holding ``alloc`` GPUs per node (``rounds.job_rates``)."""
    gpus, nodes, slowest = 0, 0, _INF
    for k in range(alloc.shape[0]):
        if alloc[k] > 0:
            gpus += alloc[k]
            nodes += 1
            slowest = min(slowest, C.speeds[m, C.node_type[k]])
    if gpus == 0:
        slowest = 0.0
    locality = C.inter_node_factor if nodes > 1 else 1.0
    return speed(C, m, float(gpus)) * slowest * locality


@nb.njit(cache=True, inline="always")
def _hold(E: Any, r: int) -> None:
    if not E.inhold[r]:
        E.hold[E.cnt[N_HOLD]] = r
        E.cnt[N_HOLD] += 1
        E.inhold[r] = True


@nb.njit(cache=True)
def index_devices(J: Any, E: Any) -> None:
    """The workers of the holding jobs by device: pool slots ``dev_rows[dev_start[d]:
    dev_start[d + 1]]``, in their jobs' arrival order."""
    count, start = E.dev_count, E.dev_start
    count[:] = 0
    for h in range(E.cnt[N_HOLD]):
        r = E.hold[h]
        for s in range(J.woff[r], J.woff[r] + J.nw[r]):
            count[J.wdev[s]] += 1
    start[0] = 0
    for d in range(count.shape[0]):
        start[d + 1] = start[d] + count[d]
    count[:] = 0
    for h in range(E.cnt[N_HOLD]):
        r = E.hold[h]
        for s in range(J.woff[r], J.woff[r] + J.nw[r]):
            d = J.wdev[s]
            x = start[d] + count[d]
            while x > start[d] and E.pos[J.wrow[E.dev_rows[x - 1]]] > E.pos[r]:
                E.dev_rows[x] = E.dev_rows[x - 1]
                x -= 1
            E.dev_rows[x] = s
            count[d] += 1


@nb.njit(cache=True)
def _device_slowdowns(C: Any, J: Any, E: Any) -> None:
    """``E.wslow[slot]``: each worker's slowdown on its device, collisions included
    (``SharingModel.slowdowns`` before the max over a job's workers)."""
    for d in range(C.device_node.shape[0]):
        lo, hi = E.dev_start[d], E.dev_start[d + 1]
        if hi - lo == 1:
            E.wslow[E.dev_rows[lo]] = 0.0
        if hi - lo < 2:
            continue
        t = C.device_type[d]
        if C.has_matrix:
            for x in range(lo, hi):
                mi = J.model[J.wrow[E.dev_rows[x]]]
                w = 0.0
                for y in range(lo, hi):
                    if y != x:
                        w += C.matrix[mi, J.model[J.wrow[E.dev_rows[y]]], t]
                E.wslow[E.dev_rows[x]] = w
        else:
            u = 0.0
            for x in range(lo, hi):
                u += J.util[J.wrow[E.dev_rows[x]]]
            a, b, c, slope, icpt = (C.curves[t, 0], C.curves[t, 1], C.curves[t, 2],
                                    C.curves[t, 3], C.curves[t, 4])
            w = max(a * u * u + b * u + c - 1.0 if u > 1.0 else slope * u + icpt, 0.0)
            for x in range(lo, hi):
                E.wslow[E.dev_rows[x]] = w
        if C.collision_slowdown > 0:
            surging = 0
            for x in range(lo, hi):
                surging += J.wsurge[E.dev_rows[x]]
            if surging >= 2:
                for x in range(lo, hi):
                    E.wslow[E.dev_rows[x]] = E.wslow[E.dev_rows[x]] + C.collision_slowdown


@nb.njit(cache=True)
def _draw_surges(C: Any, J: Any, E: Any) -> None:
    """``Generator.random((active jobs, devices)) < surge_p`` on the placed workers, drawn
    only where two or more workers that can surge share a device (nowhere else can they
    collide); the generator still moves past every draw."""
    D = C.device_node.shape[0]
    k = 0
    for d in range(D):
        able = 0
        for x in range(E.dev_start[d], E.dev_start[d + 1]):
            J.wsurge[E.dev_rows[x]] = False
            able += J.surge_p[J.wrow[E.dev_rows[x]]] > 0.0
        if able >= 2:
            for x in range(E.dev_start[d], E.dev_start[d + 1]):
                s = E.dev_rows[x]
                if J.surge_p[J.wrow[s]] > 0.0:
                    E.keys[k] = E.pos[J.wrow[s]] * D + d
                    k += 1
    E.cnt[SURGING] = k > 0 and C.collision_slowdown > 0
    order = np.argsort(E.keys[:k])
    cur = 0
    for o in order:
        key = E.keys[o]
        d = key % D
        r = E.active[key // D]
        s = J.woff[r]
        while J.wdev[s] != d:
            s += 1
        pcg64.skip(E.rng, key - cur)
        J.wsurge[s] = pcg64.next_double(E.rng) < J.surge_p[r]
        cur = key + 1
    pcg64.skip(E.rng, E.cnt[N_ACTIVE] * D - cur)


@nb.njit(cache=True)
def _rerate(C: Any, J: Any, E: Any, shares: bool) -> None:
    """Rates with sharing slowdowns (``base``) of the holding jobs, and the occupancy: GPUs
    (devices) in use and their utilization summed, capped at 1 per device if shared."""
    busy, util = 0.0, 0.0
    if shares:
        if C.has_sharing:
            _device_slowdowns(C, J, E)
        for h in range(E.cnt[N_HOLD]):
            r = E.hold[h]
            slow = 0.0
            if C.has_sharing:
                for s in range(J.woff[r], J.woff[r] + J.nw[r]):
                    slow = max(slow, E.wslow[s])
            J.base[r] = J.alone[r] / (1.0 + slow)
        for d in range(C.device_node.shape[0]):
            if E.dev_start[d + 1] > E.dev_start[d]:
                busy += 1.0
                u = 0.0
                for x in range(E.dev_start[d], E.dev_start[d + 1]):
                    u += J.util[J.wrow[E.dev_rows[x]]]
                util += min(u, 1.0)
    else:
        for h in range(E.cnt[N_HOLD]):
            r = E.hold[h]
            busy += J.held[r]
            util += J.held[r] * J.util[r]
    E.clk[OCC_USED] = busy
    E.clk[OCC_UTIL] = util if C.has_sharing else np.nan


@nb.njit(cache=True)
def _changed_devices(J: Any, M: Any, r: int) -> bool:
    if M.out_nw[r] != J.nw[r]:
        return True
    for s in range(J.woff[r], J.woff[r] + J.nw[r]):  # noqa: SIM110 (compiled: no any())
        if M.out_wdev[s] != J.wdev[s]:
            return True
    return False


@nb.njit(cache=True)
def apply_plan(C: Any, J: Any, M: Any, E: Any, shares: bool) -> None:
    """Adopt the plan's rewritten rows at ``now``: preemptions, restart pauses, first
    starts and rates (``_Run.apply``); then draw the surges and rerate."""
    now = E.clk[NOW]
    row = np.zeros(C.node_gpus.shape[0], dtype=np.int64)
    for t in range(M.ntouched[0]):
        r = M.touched[t]
        if shares:
            changed = _changed_devices(J, M, r)
            J.nw[r] = M.out_nw[r]
            row[:] = 0
            for s in range(J.woff[r], J.woff[r] + J.nw[r]):
                J.wdev[s] = M.out_wdev[s]
                row[C.device_node[J.wdev[s]]] += 1
                J.used[J.wdev[s]] = 1.0
        else:
            row[:] = M.out_alloc[r]
            changed = np.any(row != J.alloc[r])
        gpus = row.sum()
        if J.started[r]:
            if changed:
                J.preempt[r] += 1
                if C.restart_s > 0 and gpus > 0:
                    J.pause[r] = now + C.restart_s
        elif gpus > 0:
            J.started[r] = True
            J.start[r] = now
        E.node_used[:] += row - J.alloc[r]
        J.alloc[r, :] = row
        J.held[r] = float(gpus)
        J.alone[r] = job_rate(C, J.model[r], row)
        J.base[r] = J.alone[r] / 1.0
        if gpus > 0 or J.pause[r] > now:
            _hold(E, r)
    if shares:
        index_devices(J, E)
        if C.has_sharing:
            _draw_surges(C, J, E)
    else:
        for k in range(row.shape[0]):
            J.used[k] = max(J.used[k], float(E.node_used[k]))
    _rerate(C, J, E, shares)


@nb.njit(cache=True)
def _fail(E: Any, code: int, where: int, amount: float) -> int:
    E.cnt[ERR_A], E.cnt[ERR_B], E.clk[ERR_X] = code, where, amount
    return ERR_PLAN


@nb.njit(cache=True)
def check_plan(C: Any, J: Any, M: Any, E: Any, shares: bool) -> int:
    """``checked_plan`` for a kernel's rewritten rows: -1 if the plan holds, else
    :data:`ERR_PLAN` with what is wrong in ``cnt[ERR_A]``, ``cnt[ERR_B]``, ``clk[ERR_X]``."""
    T = M.touched[:M.ntouched[0]]
    if not shares:
        used = E.node_used.copy()
        for r in T:
            for k in range(used.shape[0]):
                if M.out_alloc[r, k] < 0:
                    return _fail(E, BAD_COUNT, r, 0.0)
                used[k] += M.out_alloc[r, k] - J.alloc[r, k]
        for k in range(used.shape[0]):
            if used[k] > C.node_gpus[k]:
                return _fail(E, OVER_NODE, k, float(used[k]))
        for r in T:
            if M.out_alloc[r].sum() > J.demand[r]:
                return _fail(E, OVER_DEMAND, r, float(M.out_alloc[r].sum()))
        return -1
    D = C.device_node.shape[0]
    mem, surge, count = np.zeros(D), np.zeros(D), np.zeros(D, dtype=np.int64)
    for r in T:
        for s in range(J.woff[r], J.woff[r] + M.out_nw[r]):
            if M.out_wdev[s] < 0 or M.out_wdev[s] >= D or (
                    s > J.woff[r] and M.out_wdev[s] <= M.out_wdev[s - 1]):
                return _fail(E, BAD_DEVICE, r, 0.0)
    for pass_ in range(2):
        rows = E.hold[:E.cnt[N_HOLD]] if pass_ == 0 else T
        for r in rows:
            if pass_ == 1 and E.inhold[r]:
                continue
            for s in range(J.woff[r], J.woff[r] + M.out_nw[r]):
                d = M.out_wdev[s]
                mem[d] += J.mem[r]
                surge[d] = max(surge[d], J.surge_gib[r])
                count[d] += 1
    for d in range(D):
        excess = mem[d] + surge[d] - C.device_mem[d]
        if C.has_sharing and (excess > 1e-9 or (not C.shareable[d] and count[d] > 1)):
            return _fail(E, OVER_MEMORY, d, max(excess, 0.0))
        if not C.has_sharing and count[d] > 1:
            return _fail(E, OVER_NODE, d, float(count[d]))
    for r in T:
        if M.out_nw[r] > J.demand[r]:
            return _fail(E, OVER_DEMAND, r, float(M.out_nw[r]))
    return -1


@nb.njit(cache=True)
def _skip_quiet_rounds(C: Any, M: Any, E: Any, shares: bool, round_s: float,
                       other: float) -> None:
    """Jump past the round boundaries before ``other`` (the next arrival, completion or
    pause end) at which the kernel declared it would decide the same (``M.quiet``), moving
    the surge generator past the draws those decisions would make; not while a surge could
    change a rate, nor with nothing else to come."""
    clk, cnt = E.clk, E.cnt
    if clk[ANCHORED] == 0.0 or cnt[SURGING] or other == _INF:
        return
    k = 0
    while clk[NEXT_ROUND] < other and clk[NEXT_ROUND] < M.quiet[0]:
        clk[NEXT_ROUND] = clk[NEXT_ROUND] + round_s  # what a decision there would set
        k += 1
    cnt[SKIPPED] += k
    if k and shares and C.has_sharing:
        pcg64.skip(E.rng, k * cnt[N_ACTIVE] * C.device_node.shape[0])


@nb.njit(cache=True)
def _event(C: Any, J: Any, M: Any, E: Any, shares: bool, round_s: float, mode: int,
           target: int) -> int:
    """Advance to the next event; finish and admit jobs there. -1, or a status to return."""
    clk, cnt, N = E.clk, E.cnt, J.arrival.shape[0]
    n, nxt, now = cnt[N_ACTIVE], cnt[NXT], clk[NOW]
    if mode != PLAYOUT and cnt[SERIES_K] == E.series_t.shape[0]:
        return GROW
    lmin, pmin, nh = _INF, _INF, 0
    for h in range(cnt[N_HOLD]):  # rates of the holding jobs; drop those that hold nothing
        r = E.hold[h]
        if J.held[r] == 0 and J.pause[r] <= now:
            E.inhold[r] = False
            continue
        E.hold[nh] = r
        rate = 0.0 if J.pause[r] > now else J.base[r]
        E.rate[nh] = rate
        E.left[nh] = J.rem[r] / rate if rate > 0 else _INF
        lmin = min(lmin, E.left[nh])
        if J.pause[r] > now:
            pmin = min(pmin, J.pause[r])
        nh += 1
    cnt[N_HOLD] = nh
    other = min(J.arrival[nxt] if nxt < N else _INF, now + lmin, pmin)
    if M.quiet[0] > clk[NEXT_ROUND]:
        _skip_quiet_rounds(C, M, E, shares, round_s, other)
    t = min(other, clk[NEXT_ROUND])
    if t == _INF:
        return STUCK if mode == PLAYOUT else ERR_NO_DECISION
    dt = t - now
    if dt > 0 and n:
        for h in range(nh):
            r, rate = E.hold[h], E.rate[h]
            if rate > 0:
                work = rate * dt
                J.rem[r] -= work
                J.est[r] -= work
                J.att[r] += work
                J.ran0[r] += dt
                J.ran1[r] += work / J.alone[r]
        if mode != PLAYOUT:
            clk[BUSY] += clk[OCC_USED] * dt
            clk[UTIL] += clk[OCC_UTIL] * dt
            E.series_t[cnt[SERIES_K]] = now
            E.series_busy[cnt[SERIES_K]] = clk[OCC_USED]
            cnt[SERIES_K] += 1
    t0 = now
    clk[NOW] = now = t
    cnt[EVENTS] += 1
    hi = nxt
    while hi < N and J.arrival[hi] <= now:
        hi += 1
    cnt[ARR_LO], cnt[ARR_HI] = nxt, hi
    clk[CUM0] += n + (hi - nxt)
    clk[CUM1] += 1.0
    gone, hit, keep = 0, False, 0
    for h in range(nh):
        r = E.hold[h]
        # done within 1e-9 s, or where the clock cannot tell its end from t (late in a long
        # run a remainder below the clock's resolution would otherwise never finish)
        if E.left[h] <= dt + 1e-9 or t0 + E.left[h] <= t:
            J.finish[r] = now
            J.seen0[r] += clk[CUM0]
            J.seen1[r] += clk[CUM1]
            J.nw[r] = 0
            E.node_used[:] -= J.alloc[r]
            E.inhold[r] = False
            E.pos[r] = -1
            gone += 1
            hit = hit or r == target
        else:
            E.hold[keep] = r
            keep += 1
    cnt[N_HOLD] = keep
    keep = n
    if gone:  # close the gaps the finished jobs leave, keeping arrival order
        keep = 0
        for a in range(n):
            r = E.active[a]
            if E.pos[r] >= 0:
                E.active[keep] = r
                E.pos[r] = keep
                keep += 1
    for r in range(nxt, hi):
        J.seen0[r] -= clk[CUM0] - (n + (hi - nxt))
        J.seen1[r] -= clk[CUM1] - 1.0
        E.active[keep] = r
        E.pos[r] = keep
        keep += 1
    cnt[N_ACTIVE], cnt[NXT], cnt[GONE] = keep, hi, gone
    if gone or hi > nxt:
        M.quiet[0] = -_INF
    if gone:
        if shares:
            index_devices(J, E)
        _rerate(C, J, E, shares)
    return DONE if hit else -1


@nb.njit(cache=True)
def _after_decision(J: Any, E: Any, mode: int) -> int:
    """What the loop checks once a decision is in force: -1, or a status to return."""
    cnt = E.cnt
    cnt[PHASE] = 0
    if cnt[NXT] == J.arrival.shape[0]:
        holds = False
        for h in range(cnt[N_HOLD]):
            holds = holds or J.held[E.hold[h]] > 0
        if not holds:
            return STUCK if mode == PLAYOUT else ERR_IDLE
    if mode == PREDICT and cnt[ARR_HI] > cnt[ARR_LO]:
        return ARRIVED
    return -1


@nb.njit(cache=True)
def _decide(kernel: Any, C: Any, J: Any, M: Any, E: Any, shares: bool, mode: int) -> int:
    """Ask the kernel and put its plan in force: -1, or a status to return."""
    M.ntouched[0] = 0
    M.quiet[0] = -_INF
    if kernel(C, J, M, E, E.clk[NOW]) == HOST:
        E.cnt[PHASE] = PENDING
        return HOST_DUE
    if check_plan(C, J, M, E, shares) >= 0:
        return ERR_PLAN
    apply_plan(C, J, M, E, shares)
    return _after_decision(J, E, mode)


@nb.njit(nb.types.int64(nb.types.FunctionType(ROUND_KERNEL_SIG), CLUSTER_T, JOBS_T, MEMORY_T,
                        STATE_T, nb.types.float64, nb.types.boolean, nb.types.boolean,
                        nb.types.int64, nb.types.int64), cache=True)
def run_loop(kernel: Any, C: Any, J: Any, M: Any, E: Any, round_s: float, reacts: bool,
             shares: bool, mode: int, target: int) -> int:
    """Run events until a status (module docstring); call again to carry on. After
    :data:`HOST_DUE` the caller sets ``cnt[PHASE]``: :data:`APPLIED` once it has put a plan
    in force, :data:`REDECIDE` to ask the kernel again (its Python step has run)."""
    clk, cnt, N = E.clk, E.cnt, J.arrival.shape[0]
    if cnt[PHASE] == REDECIDE:
        st = _decide(kernel, C, J, M, E, shares, mode)
        if st >= 0:
            return st
    elif cnt[PHASE] == APPLIED:
        st = _after_decision(J, E, mode)
        if st >= 0:
            return st
    while cnt[NXT] < N or cnt[N_ACTIVE] > 0:
        st = _event(C, J, M, E, shares, round_s, mode, target)
        if st >= 0:
            return st
        if cnt[N_ACTIVE] == 0:
            clk[NEXT_ROUND], clk[ANCHORED] = _INF, 0.0
            continue
        due = clk[ANCHORED] == 0.0 or clk[NOW] >= clk[NEXT_ROUND]
        if due or (reacts and (cnt[GONE] > 0 or cnt[ARR_HI] > cnt[ARR_LO])):
            if due:
                clk[NEXT_ROUND], clk[ANCHORED] = clk[NOW] + round_s, 1.0
            cnt[DECISIONS] += 1
            st = _decide(kernel, C, J, M, E, shares, mode)
            if st >= 0:
                return st
        elif mode == PREDICT and cnt[ARR_HI] > cnt[ARR_LO]:
            return ARRIVED
    return DONE


@nb.njit(cache=True)
def fork(J: Any, M: Any, E: Any, J2: Any, M2: Any, E2: Any) -> None:
    """Copy the active jobs' state (and the kernel's memory of them) into a workspace for a
    playout: remaining work becomes the estimate, no arrivals follow."""
    E2.clk[:] = E.clk
    E2.cnt[:] = E.cnt
    E2.rng[:] = E.rng
    E2.node_used[:] = E.node_used
    E2.dev_start[:] = E.dev_start
    E2.dev_rows[:E.dev_start[-1]] = E.dev_rows[:E.dev_start[-1]]
    E2.hold[:E.cnt[N_HOLD]] = E.hold[:E.cnt[N_HOLD]]
    E2.cnt[NXT] = J.arrival.shape[0]
    E2.cnt[PHASE] = 0
    M2.g[:] = M.g
    M2.gi[:] = M.gi
    M2.quiet[:] = M.quiet
    for a in range(E.cnt[N_ACTIVE]):
        r = E.active[a]
        E2.active[a], E2.pos[r], E2.inhold[r] = r, a, E.inhold[r]
        J2.rem[r] = J.est[r]
        J2.est[r], J2.att[r], J2.alone[r], J2.base[r] = J.est[r], J.att[r], J.alone[r], J.base[r]
        J2.pause[r], J2.start[r], J2.finish[r] = J.pause[r], J.start[r], J.finish[r]
        J2.ran0[r], J2.ran1[r] = J.ran0[r], J.ran1[r]
        J2.seen0[r], J2.seen1[r] = J.seen0[r], J.seen1[r]
        J2.started[r], J2.preempt[r], J2.held[r] = J.started[r], J.preempt[r], J.held[r]
        J2.alloc[r, :] = J.alloc[r, :]
        J2.nw[r] = J.nw[r]
        M2.f[r, :] = M.f[r, :]
        M2.i[r, :] = M.i[r, :]
        M2.out_alloc[r, :] = M.out_alloc[r, :]
        M2.out_nw[r] = M.out_nw[r]
        for s in range(J.woff[r], J.woff[r + 1]):
            J2.wdev[s], J2.wsurge[s], M2.out_wdev[s] = J.wdev[s], J.wsurge[s], M.out_wdev[s]
