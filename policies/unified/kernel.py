"""The unified policy's decision, compiled (:mod:`policies.unified.policy`; SPEC §3.7).

One call of :func:`unified_kernel` is one decision of :class:`policies.unified.policy.Unified`:
jobs' worth, which running jobs stay (leases, ``preempt``), the class shares of each GPU type,
admission in order of worth (first within the shares, then relaxed), and at a lease boundary
the moves of running jobs to faster types. Placement within the interference bounds is OJPP's
Algorithm 2 (:func:`policies.ojpp.placement.place_pack`) on a :data:`Pack` of the plan being
built; without sharing data a gang gets empty devices on as few nodes as possible
(:func:`policies.gangs.gang_row`).

Memory: ``params`` (:data:`LAYOUT`), ``gi`` the number of classes then the GPU types fastest
first, ``g`` the next lease boundary and a pending quiet stretch (:data:`G_BOUNDARY`),
``f[row, F_LEASE]`` each job's lease end.

Quiet boundaries (``memory.quiet``). Every round of this policy is a lease boundary. Take a
boundary decision after which every job holds devices and no job moved to a faster type. Until
the next arrival or completion, a later boundary decides the same, so the engine may skip it,
as long as every job that was not offered a faster type here is still in its lease there:

- nobody waits, so nobody is displaced (a job is only displaced for a more valuable waiting
  one) and nothing is admitted; the plan is the one this decision left;
- a job offered a faster type here found none: either the time it would save did not beat the
  restart overhead (that saving only shrinks as its estimated remaining work does), or
  Algorithm 2 found no room on the plan this decision left, which is the plan there too
  (failed tries leave the plan as it was). Its lease is over and stays over;
- the others are in their leases until the earliest lease end, the quiet stretch's end.

The only memory a skipped boundary would change is the next boundary, one lease on; the next
decision advances it past the boundaries skipped before the event that ended the stretch
(:func:`_catch_up`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.gangs import gang_row
from policies.hetero.wfq_hetero import share_by_weight
from policies.ojpp.pack import Pack, cache_slowdowns, join, leave, resum
from policies.ojpp.placement import N_BOUNDS, place_pack
from simulator.inputs.slo import SOFT, STRICT
from simulator.jit import configure_cache, njit, njit_lazily
from simulator.rounds.view import (
    NEXT_ROUND,
    PLAN,
    ROUND_KERNEL_SIG,
    Layout,
    active_rows,
    speed,
    touch,
)

configure_cache()

__all__ = [
    "F_LEASE",
    "GI",
    "GI_CLASSES",
    "GI_TIERS",
    "G_BOUNDARY",
    "G_QUIET",
    "G_ROW",
    "LAYOUT",
    "N_SCALARS",
    "F",
    "G",
    "unified_kernel",
]

LAYOUT = ("zeta_min", "delta", "be_lease_s", "slo_lease_multiple", "slo_reward",
          "be_reward_scale", "preempt")
"""``params``: the bounds vector (:meth:`policies.ojpp.placement.Bounds.vector`,
:data:`~policies.ojpp.placement.N_BOUNDS` entries),
these scalars, the class thresholds, then each GPU type's class weights (fastest type
first)."""
ZETA, DELTA, LEASE, MULTIPLE, SLO_REWARD, BE_SCALE, PREEMPT = range(N_BOUNDS,
                                                                  N_BOUNDS + len(LAYOUT))
N_SCALARS = N_BOUNDS + len(LAYOUT)
F = Layout(lease=1)
"""Per-row float: the end of the job's lease (-inf: none)."""
G = Layout(boundary=1, quiet=1, row=1)
"""Global floats: the next lease boundary; the end of the quiet stretch the last decision
declared (-inf: none pending) and a row active then."""
GI = Layout(classes=1, tiers=0)
"""Global ints: the number of classes, then the GPU types, fastest first."""
F_LEASE = F.LEASE
G_BOUNDARY, G_QUIET, G_ROW = G.BOUNDARY, G.QUIET, G.ROW
GI_CLASSES, GI_TIERS = GI.CLASSES, GI.TIERS
QUIET_MARGIN_S = 1e-3
"""A quiet stretch ends this long before the earliest lease end (in a lease: ``end > now +
1e-9``)."""
_INF = np.inf


@njit(_nrt=False)
def _gang(C: Any, J: Any, r: int, zeta: float) -> int:
    """Largest gang of row ``r`` whose every step keeps ``speedup(g)/g >= zeta`` (at least
    its minimum)."""
    d, m = J.demand[r], J.model[r]
    for g in range(1, d + 1):
        if speed(C, m, float(g)) / g < zeta - 1e-12:
            return max(J.min_gpus[r], g - 1)
    return max(J.min_gpus[r], d)


@njit(_nrt=False)
def _worth(C: Any, J: Any, p: Any, r: int, now: float) -> float:
    """Row ``r``'s reward for running now: ``slo_reward`` x its first reachable deadline
    step's reward / 100 (SLO jobs), else ``be_reward_scale x lease / (needed + lease)``;
    ``needed`` is its estimated remaining work at its fastest whole-gang rate, 0 once it has
    run past its estimate (it is expected to end any moment)."""
    m = J.model[r]
    gang = speed(C, m, float(J.demand[r]))
    rate = -_INF
    for t in range(C.speeds.shape[1]):
        rate = max(rate, gang * C.speeds[m, t])
    needed = max(J.est[r], 0.0) / max(rate, 1e-12) if rate > 0 else _INF
    worth = p[BE_SCALE] * p[LEASE] / (needed + p[LEASE])
    if J.job_class[r] == STRICT or J.job_class[r] == SOFT:
        first = 0.0
        for s in range(J.deadlines.shape[1]):
            if J.deadlines[r, s] >= now + needed:
                first = J.rewards[r, s]
                break
        if first > 0:
            worth = p[SLO_REWARD] * first / 100.0
    return worth


@njit
def _current(C: Any, J: Any, r: int, t: int) -> Any:
    """Row ``r``'s devices of type ``t`` in the plan in force, ascending."""
    out = np.empty(J.nw[r], dtype=np.int64)
    k = 0
    for s in range(J.woff[r], J.woff[r] + J.nw[r]):
        if C.device_type[J.wdev[s]] == t:
            out[k] = J.wdev[s]
            k += 1
    return out[:k]


@njit
def _own_devices(C: Any, P: Any, g: int, on_t: Any, current: Any, chosen: Any) -> bool:
    """Without sharing: ``g`` devices of ``on_t`` that nobody holds in the plan into
    ``chosen`` - the job's ``current`` ones if they are ``g`` and free, else empty devices on as
    few nodes as possible (:func:`gang_row`, each node's lowest devices)."""
    free_cur = current.shape[0] == g
    for d in current:
        free_cur = free_cur and P.cnt[d] == 0
    if free_cur:
        chosen[:g] = current
        return True
    nodes = C.node_gpus.shape[0]
    free, row = np.zeros(nodes, dtype=np.int64), np.zeros(nodes, dtype=np.int64)
    for d in range(on_t.shape[0]):
        if on_t[d] and P.cnt[d] == 0:
            free[C.device_node[d]] += 1
    if not gang_row(free, g, np.zeros(nodes, dtype=np.int64), row):
        return False
    k = 0
    for h in range(nodes):
        d = C.node_first[h]
        while row[h] > 0:
            if on_t[d] and P.cnt[d] == 0:
                chosen[k] = d
                k += 1
                row[h] -= 1
            d += 1
    return True


@njit(_nrt=False)
def _hold(P: Any, r: int, devices: Any) -> None:
    """Without sharing: row ``r`` takes ``devices`` (counts and plan only)."""
    for d in devices:
        P.cnt[d] += 1
        P.jdev[P.joff[r] + P.jn[r]] = d
        P.jn[r] += 1


@njit
def _place(C: Any, J: Any, P: Any, B: Any, r: int, g: int, t: int, on_t: Any,
           opening: Any, chosen: Any) -> bool:
    """``g`` workers of row ``r`` (not in the plan) onto devices of type ``t``: within the
    bounds ``B``, its current devices there first (Algorithm 2); own devices without
    sharing. On success the plan holds them."""
    current = _current(C, J, r, t)
    if C.has_sharing:
        return place_pack(P, B, r, g, opening, on_t, current, chosen)
    if not _own_devices(C, P, g, on_t, current, chosen):
        return False
    _hold(P, r, chosen[:g])
    return True


@njit
def _speed_up(C: Any, J: Any, P: Any, B: Any, r: int, tiers: Any, on: Any, opening: Any,
              chosen: Any) -> bool:
    """Move running row ``r`` to the fastest type with room for it where the time it saves
    beats the restart overhead; whether it moved."""
    lo, g = P.joff[r], P.jn[r]
    held = P.jdev[lo:lo + g].copy()
    m = J.model[r]
    gang = speed(C, m, float(J.demand[r]))
    now_s, rate = _INF, _INF
    for d in held:
        now_s = min(now_s, C.speeds[m, C.device_type[d]])
        rate = min(rate, gang * C.speeds[m, C.device_type[d]])
    left_s = J.est[r] / max(rate, 1e-12)
    for tier in range(tiers.shape[0]):
        t = tiers[tier]
        if C.speeds[m, t] <= 0 or left_s * (1.0 - now_s / C.speeds[m, t]) <= C.restart_s + 1e-9:
            continue
        if not C.has_sharing:
            if _own_devices(C, P, g, on[tier], _current(C, J, r, t), chosen):
                for d in held:
                    P.cnt[d] -= 1
                P.jn[r] = 0
                _hold(P, r, chosen[:g])
                return True
            continue
        for d in held:
            leave(P, r, d)
            resum(P, d)
        if place_pack(P, B, r, g, opening, on[tier], _current(C, J, r, t), chosen):
            return True
        for d in held:
            join(P, r, d)
            resum(P, d)
    return False


@njit
def _pack(C: Any, J: Any, M: Any, E: Any, locked: Any) -> Any:
    """The locked jobs' placements as a :data:`Pack` writing the plan (``M.out_nw``,
    ``M.out_wdev``); the other rows start with no devices."""
    D, rows = C.device_node.shape[0], active_rows(E)
    n = rows.shape[0]
    for a in range(n):
        if not locked[a]:
            M.out_nw[rows[a]] = 0
    cnt = np.zeros(D, dtype=np.int64)
    members = np.empty((D, max(n, 1)), dtype=np.int64)
    for d in range(D):
        for x in range(E.dev_start[d], E.dev_start[d + 1]):  # arrival order
            r = J.wrow[E.dev_rows[x]]
            if locked[E.pos[r]]:
                members[d, cnt[d]] = r
                cnt[d] += 1
    P = Pack(E.pos, J.util, J.mem, J.surge_gib, J.surge_p, J.model, C.device_type,
             C.device_mem, C.shareable, C.matrix, C.curves, C.has_matrix, np.zeros(D),
             np.zeros(D), np.zeros(D), cnt, members, M.out_nw, J.woff, M.out_wdev,
             np.zeros(M.out_wdev.shape[0]), np.empty(n + 1, dtype=np.int64), np.empty(n + 1))
    if C.has_sharing:
        for d in range(D):
            resum(P, d)
        cache_slowdowns(P)
    return P


@njit
def _shares(C: Any, J: Any, M: Any, rows: Any, locked: Any, cls: Any, P: Any) -> Any:
    """``(types, classes)``: GPUs of each type each class may still take (fastest type
    first): the type's capacity split by the class weights over what the classes hold and
    what their waiting jobs want, less what they hold."""
    p, k, tiers = M.params, M.gi[GI_CLASSES], M.gi[GI_TIERS:]
    n_types = tiers.shape[0]
    cap = max(1.0, p[0]) if C.has_sharing else 1.0
    share = np.zeros((n_types, k))
    want = np.zeros(rows.shape[0])
    for a in range(rows.shape[0]):
        if not locked[a]:
            want[a] = _gang(C, J, rows[a], p[ZETA])
    for tier in range(n_types):
        t = tiers[tier]
        held, need = np.zeros(k), np.zeros(k)
        for a in range(rows.shape[0]):
            r = rows[a]
            if locked[a]:
                for s in range(P.joff[r], P.joff[r] + P.jn[r]):
                    held[cls[a]] += C.device_type[P.jdev[s]] == t
            else:
                need[cls[a]] += want[a]
        lo = N_SCALARS + k * (1 + tier)
        share[tier] = share_by_weight(cap * C.type_gpus[t], p[lo:lo + k], held + need) - held
    return share


@njit
def _write(J: Any, M: Any, rows: Any, fresh: Any, now: float) -> None:
    """List the rows whose devices changed; fresh placements start a lease (``slo_lease_
    multiple`` BE leases for SLO jobs)."""
    p = M.params
    for a in range(rows.shape[0]):
        r = rows[a]
        lo, hi = J.woff[r], J.woff[r] + M.out_nw[r]
        M.out_wdev[lo:hi] = np.sort(M.out_wdev[lo:hi])
        changed = M.out_nw[r] != J.nw[r]
        for s in range(lo, hi):
            changed = changed or M.out_wdev[s] != J.wdev[s]
        if changed:
            touch(M, r)
        if fresh[a]:
            slo = J.job_class[r] == STRICT or J.job_class[r] == SOFT
            M.f[r, F_LEASE] = now + p[LEASE] * (p[MULTIPLE] if slo else 1.0)


@njit
def _decide(C: Any, J: Any, M: Any, E: Any, now: float, rows: Any, worth: Any, locked: Any,
            may: Any) -> bool:
    """Admit in order of worth (within the class shares, then relaxed), then move running
    jobs up (longest first); write the plan and the leases. Whether every job holds devices
    and none moved up."""
    p, k, tiers = M.params, M.gi[GI_CLASSES], M.gi[GI_TIERS:]
    n, D = rows.shape[0], C.device_node.shape[0]
    P = _pack(C, J, M, E, locked)
    cls = np.empty(n, dtype=np.int64)
    for a in range(n):
        cls[a] = min(np.searchsorted(p[N_SCALARS:N_SCALARS + k], J.est_size[rows[a]]), k - 1)
    share = _shares(C, J, M, rows, locked, cls, P)
    on = np.empty((tiers.shape[0], D), dtype=np.bool_)
    for tier in range(tiers.shape[0]):
        on[tier] = C.device_type == tiers[tier]
    opening, chosen = np.arange(D), np.empty(D, dtype=np.int64)
    B = p[:N_BOUNDS]
    order = np.argsort(-worth, kind="mergesort")  # ties: arrival order
    placed, fresh = locked.copy(), np.zeros(n, dtype=np.bool_)
    for relaxed in (False, True):
        zeta = p[ZETA] - p[DELTA] if relaxed else p[ZETA]
        for a in order:
            if placed[a]:
                continue
            r, c = rows[a], cls[a]
            g = _gang(C, J, r, zeta)
            for tier in range(tiers.shape[0]):
                if not relaxed and share[tier, c] < g - 1e-9:
                    continue
                if C.speeds[J.model[r], tiers[tier]] <= 0:  # cannot run on this type
                    continue
                if _place(C, J, P, B, r, g, tiers[tier], on[tier], opening, chosen):
                    placed[a] = fresh[a] = True
                    share[tier, c] -= g
                    break
    settled = placed.all()
    for a in order[::-1]:  # longest first: they gain the most from faster GPUs
        if may[a] and locked[a] and _speed_up(C, J, P, B, rows[a], tiers, on, opening, chosen):
            fresh[a] = True
            settled = False
    _write(J, M, rows, fresh, now)
    return settled


@njit(_nrt=False)
def _catch_up(J: Any, M: Any, E: Any, now: float) -> None:
    """Move the next boundary past those the engine skipped since the last decision (module
    docstring): the ones before the quiet stretch's end and before the event that ended the
    skipping - this decision's, or, if the cluster emptied since (no decision then), the
    completion of the jobs active at the declaration (all at once: an earlier completion or
    an arrival would have been decided)."""
    if M.g[G_QUIET] == -_INF:
        return
    r, rows = int(M.g[G_ROW]), active_rows(E)
    stop = now
    if not (0 <= E.pos[r] < rows.shape[0] and rows[E.pos[r]] == r):
        stop = J.finish[r]  # NaN where no engine ran (plan): nothing was skipped
    while M.g[G_BOUNDARY] < stop and M.g[G_BOUNDARY] < M.g[G_QUIET]:
        M.g[G_BOUNDARY] += M.params[LEASE]
    M.g[G_QUIET] = -_INF


@njit(_nrt=False)
def _declare_quiet(M: Any, E: Any, rows: Any, tried: Any) -> None:
    """After a settled boundary decision (module docstring): quiet until the earliest lease
    end of the jobs not offered a faster type (``tried``), if the engine's next round is the
    next boundary (its clock and this memory agree on the boundaries it would skip)."""
    if E.clk[NEXT_ROUND] != M.g[G_BOUNDARY]:
        return
    until = _INF
    for a in range(rows.shape[0]):
        if not tried[a]:
            until = min(until, M.f[rows[a], F_LEASE] - QUIET_MARGIN_S)
    if until > M.g[G_BOUNDARY]:
        M.quiet[0] = M.g[G_QUIET] = until
        M.g[G_ROW] = rows[0]


@njit_lazily(ROUND_KERNEL_SIG)
def unified_kernel(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """One decision (module docstring of :mod:`policies.unified.policy`)."""
    p, rows = M.params, active_rows(E)
    n = rows.shape[0]
    _catch_up(J, M, E, now)
    boundary = now >= M.g[G_BOUNDARY] - 1e-9
    if boundary:
        M.g[G_BOUNDARY] = now + p[LEASE]
    worth = np.empty(n)
    running = np.empty(n, dtype=np.bool_)
    best = -_INF
    for a in range(n):
        worth[a] = _worth(C, J, p, rows[a], now)
        running[a] = J.nw[rows[a]] > 0
        if not running[a]:
            best = max(best, worth[a])
    locked, may = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)
    idle = True
    for a in range(n):
        r = rows[a]
        in_lease = M.f[r, F_LEASE] > now + 1e-9
        slo = J.job_class[r] == STRICT or J.job_class[r] == SOFT
        movable = boundary and not in_lease and (slo or p[PREEMPT] > 0) and worth[a] < best
        locked[a] = running[a] and not movable
        may[a] = boundary and running[a] and not in_lease
        idle = idle and locked[a] and not may[a]
    # idle: nothing waits and nothing may move, so the plan stands
    settled = idle or _decide(C, J, M, E, now, rows, worth, locked, may)
    if boundary and settled:
        _declare_quiet(M, E, rows, may & locked)
    return PLAN
