"""Putting a round kernel's plan in force, compiled (semantics: :mod:`simulator.rounds`).

:func:`check_plan` validates the rows a kernel rewrote (``checked_plan``'s checks);
:func:`apply_plan` adopts them: preemptions, restart pauses, first starts, each job's rate
alone (:func:`job_rate`), the workers indexed by device (:func:`index_devices`), the memory
surges drawn and every holding job's rate with its sharing slowdown (:func:`rerate`).
The loop that calls them is :mod:`simulator.rounds.engine`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator.jit import configure_cache, njit

configure_cache()

from simulator import pcg64  # noqa: E402  (after the cache is configured)
from simulator.rounds.view import (  # noqa: E402
    ERR_A,
    ERR_B,
    ERR_X,
    N_ACTIVE,
    N_HOLD,
    NOW,
    OCC_USED,
    OCC_UTIL,
    SURGING,
    locality,
    speed,
)

__all__ = ["BAD_COUNT", "BAD_DEVICE", "OVER_DEMAND", "OVER_MEMORY", "OVER_NODE", "UNUSABLE_TYPE",
           "apply_plan", "check_plan", "index_devices", "job_rate", "rerate"]

# plan errors (cnt[ERR_A]; cnt[ERR_B] the node, device or row, clk[ERR_X] the amount, or for
# UNUSABLE_TYPE the GPU type a row was placed on where its model's speed is 0)
BAD_COUNT, OVER_NODE, OVER_DEMAND, BAD_DEVICE, OVER_MEMORY, UNUSABLE_TYPE = range(6)
_INF = np.inf


@njit(_nrt=False)
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
    return speed(C, m, float(gpus)) * slowest * locality(C, m, gpus, nodes)


@njit(inline="always")
def _hold(E: Any, r: int) -> None:
    if not E.inhold[r]:
        E.hold[E.cnt[N_HOLD]] = r
        E.cnt[N_HOLD] += 1
        E.inhold[r] = True


@njit(_nrt=False)
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


@njit(_nrt=False)
def _device_slowdowns(C: Any, J: Any, E: Any) -> None:
    """``E.wslow[slot]``: each worker's slowdown on its device, collisions included
    (``SharingModel.worker_slowdowns`` plus ``collision_slowdown`` where two surging workers
    meet)."""
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


@njit
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


@njit(_nrt=False)
def rerate(C: Any, J: Any, E: Any, shares: bool) -> None:
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


@njit(_nrt=False)
def _changed_devices(J: Any, M: Any, r: int) -> bool:
    if M.out_nw[r] != J.nw[r]:
        return True
    for s in range(J.woff[r], J.woff[r] + J.nw[r]):  # noqa: SIM110 (compiled: no any())
        if M.out_wdev[s] != J.wdev[s]:
            return True
    return False


@njit
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
            for c in range(row.shape[0]):
                row[c] = M.out_alloc[r, c]
            changed = bool(np.any(row != J.alloc[r]))
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
    rerate(C, J, E, shares)


@njit(_nrt=False)
def _fail(E: Any, code: int, where: int, amount: float) -> int:
    E.cnt[ERR_A], E.cnt[ERR_B], E.clk[ERR_X] = code, where, amount
    return code


@njit
def check_plan(C: Any, J: Any, M: Any, E: Any, shares: bool) -> int:
    """``checked_plan`` for a kernel's rewritten rows: -1 if the plan holds, else the error
    code (:data:`OVER_NODE` ...), also in ``cnt[ERR_A]``, with where in ``cnt[ERR_B]`` and
    the amount in ``clk[ERR_X]``."""
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
        for r in T:  # one pass over the row: its GPUs, and none on a type it cannot use
            held = 0
            for k in range(used.shape[0]):
                held += M.out_alloc[r, k]
                if M.out_alloc[r, k] > 0 and C.speeds[J.model[r], C.node_type[k]] <= 0:
                    return _fail(E, UNUSABLE_TYPE, r, float(C.node_type[k]))
            if held > J.demand[r]:
                return _fail(E, OVER_DEMAND, r, float(held))
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
        for s in range(J.woff[r], J.woff[r] + M.out_nw[r]):
            t = C.device_type[M.out_wdev[s]]
            if C.speeds[J.model[r], t] <= 0:
                return _fail(E, UNUSABLE_TYPE, r, float(t))
    return -1
