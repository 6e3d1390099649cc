"""The compiled round loop (semantics: :mod:`simulator.rounds`, state: :mod:`.round_arrays`).

:func:`run_loop` replays events until the run ends, a Python decision is due, an arrival asks
for a prediction, or the busy-GPU series needs room; the driver in
:mod:`simulator.rounds.driver` handles each and calls it again, and it carries on where it
stopped. A prediction forks the state (:func:`fork`, the active rows only) and plays it out in
``PLAYOUT`` mode: estimated sizes, no arrivals, until the target finishes. A decision's plan is
checked and put in force by :mod:`simulator.rounds.plan`. What a kernel sees and may write is
:mod:`simulator.rounds.view`'s contract.

Costs follow what moves, not the queue: events and decisions touch the jobs holding GPUs
(``state.hold``) and the rows a plan rewrote, so a long waiting queue costs only its share of
the kernel's own work; and round boundaries at which a kernel said it would decide the same
are jumped over (``memory.quiet``), so quiet stretches cost nothing.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
from numba.core import cgutils
from numba.core.extending import intrinsic
from numba.experimental.function_type import _get_jit_address, _get_wrapper_address

from simulator.jit import configure_cache, njit, njit_lazily

configure_cache()

from simulator import pcg64  # noqa: E402  (after the cache is configured)
from simulator.rounds.arrays import JOBS_T, STATE_T, host_kernel  # noqa: E402
from simulator.rounds.plan import apply_plan, check_plan, index_devices, rerate  # noqa: E402
from simulator.rounds.view import (  # noqa: E402
    ANCHORED,
    ARR_HI,
    ARR_LO,
    BUSY,
    CLUSTER_T,
    CUM0,
    CUM1,
    DECISIONS,
    EVENTS,
    GONE,
    HOST,
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
    STATE_VIEW_T,
    SURGING,
    UTIL,
    VIEW_T,
)

__all__ = ["APPLIED", "ARRIVED", "DONE", "ERR_IDLE", "ERR_NO_DECISION", "ERR_PLAN", "GROW",
           "HOST_DUE", "KERNELS", "MAIN", "PLAYOUT", "PREDICT", "REDECIDE", "STUCK", "fork",
           "kernel_handle", "run_loop", "stop_tasks"]

# modes
MAIN, PREDICT, PLAYOUT = 0, 1, 2
# statuses (each ends a call of run_loop)
DONE, HOST_DUE, ARRIVED, GROW, STUCK, ERR_NO_DECISION, ERR_IDLE, ERR_PLAN = range(8)
# phases of a decision handed to Python (cnt[PHASE])
PENDING, APPLIED, REDECIDE = 1, 2, 3
_INF = np.inf


_KERNEL_T = nb.types.FunctionType(ROUND_KERNEL_SIG)
_HANDLE_T = nb.types.UniTuple(nb.types.int64, 3)


def kernel_handle(kernel: Any) -> tuple[int, int, int]:
    """What :func:`run_loop` takes for a kernel: the addresses of its C wrapper, of the
    object and of its compiled body. numba looks these up on every call that passes the
    kernel itself (hashing the kernel's argument types four times, ~0.3 ms a call, often more
    than the compiled work between two Python steps), so a run looks them up once and keeps
    the kernel alive while it uses them."""
    sig = _KERNEL_T.signature
    return _get_wrapper_address(kernel, sig), id(kernel), _get_jit_address(kernel, sig)


@intrinsic  # type: ignore[untyped-decorator]  # numba's own, untyped
def _kernel_at(typingctx: Any, handle: Any) -> Any:
    """The kernel a :func:`kernel_handle` points at, as numba's first-class function value."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        fn = cgutils.create_struct_proxy(_KERNEL_T)(context, builder)
        void = context.get_value_type(nb.types.voidptr)
        fn.c_addr, fn.py_addr, fn.jit_addr = (builder.inttoptr(a, void) for a in
                                              cgutils.unpack_tuple(builder, args[0], 3))
        return fn._getvalue()

    return _KERNEL_T(handle), codegen


@njit(_nrt=False)
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


@njit(_nrt=False)
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
            for h in range(E.node_used.shape[0]):
                E.node_used[h] -= J.alloc[r, h]
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
        rerate(C, J, E, shares)
    return DONE if hit else -1


@njit(_nrt=False)
def _after_decision(J: Any, E: Any, short: bool, mode: int) -> int:
    """What the loop checks once a decision is in force: -1, or a status to return. With
    ``short`` rounds, a decision that leaves every GPU idle lasts until the next arrival."""
    cnt = E.cnt
    cnt[PHASE] = 0
    last = cnt[NXT] == J.arrival.shape[0]
    if last or short:
        holds = False
        for h in range(cnt[N_HOLD]):
            holds = holds or J.held[E.hold[h]] > 0
        if not holds and last:
            return STUCK if mode == PLAYOUT else ERR_IDLE
        if not holds:
            E.clk[NEXT_ROUND] = _INF
    if mode == PREDICT and cnt[ARR_HI] > cnt[ARR_LO]:
        return ARRIVED
    return -1


@njit(_nrt=False)
def stop_tasks(J: Any, M: Any, E: Any, now: float) -> None:
    """Whole-step rounds (``memory.out_stop``, :mod:`simulator.rounds.view`): take back what
    each holding row ran after its task's end, its GPUs held idle since; time it spent
    restarting ran nothing. Each stop is used once."""
    for h in range(E.cnt[N_HOLD]):
        r = E.hold[h]
        end = M.out_stop[r]
        if end == _INF:
            continue
        M.out_stop[r] = _INF
        idle = now - max(end, J.pause[r])
        if idle <= 0:
            continue
        work = J.base[r] * idle
        J.rem[r] += work
        J.est[r] += work
        J.att[r] -= work
        J.ran0[r] -= idle
        J.ran1[r] -= work / J.alone[r]


@njit
def _decide(kernel: Any, C: Any, J: Any, V: Any, M: Any, E: Any, S: Any, shares: bool,
            short: bool, mode: int) -> int:
    """Ask the kernel (what it sees: ``V``, ``S``) and put its plan in force: -1, or a
    status to return."""
    M.ntouched[0] = 0
    M.quiet[0] = -_INF
    M.round_end[0] = _INF
    stop_tasks(J, M, E, E.clk[NOW])
    if kernel(C, V, M, S, E.clk[NOW]) == HOST:
        E.cnt[PHASE] = PENDING
        return HOST_DUE
    if M.round_end[0] < E.clk[NEXT_ROUND]:
        E.clk[NEXT_ROUND] = M.round_end[0]
    if check_plan(C, J, M, E, shares) >= 0:
        return ERR_PLAN
    apply_plan(C, J, M, E, shares)
    return _after_decision(J, E, short, mode)


@njit_lazily(nb.types.int64(_HANDLE_T, CLUSTER_T, JOBS_T, VIEW_T, MEMORY_T, STATE_T,
                            STATE_VIEW_T, nb.types.float64, nb.types.boolean,
                            nb.types.boolean, nb.types.boolean, nb.types.int64,
                            nb.types.int64))
def run_loop(handle: Any, C: Any, J: Any, V: Any, M: Any, E: Any, S: Any, round_s: float,
             reacts: bool, short: bool, shares: bool, mode: int, target: int) -> int:
    """Run events until a status (module docstring) with the kernel ``handle`` points at
    (:func:`kernel_handle`), which sees ``V`` and ``S``, the read-only views of ``J`` and
    ``E`` (:func:`simulator.rounds.arrays.job_view`); call again to carry on. After
    :data:`HOST_DUE` the caller sets ``cnt[PHASE]``: :data:`APPLIED` once it has put a plan
    in force, :data:`REDECIDE` to ask the kernel again (its Python step has run). With
    ``short`` rounds a round also ends when no job holds GPUs any more (Gavel's rounds end
    when their last job stops)."""
    kernel = _kernel_at(handle)
    clk, cnt, N = E.clk, E.cnt, J.arrival.shape[0]
    if cnt[PHASE] == REDECIDE:
        st = _decide(kernel, C, J, V, M, E, S, shares, short, mode)
        if st >= 0:
            return st
    elif cnt[PHASE] == APPLIED:
        st = _after_decision(J, E, short, mode)
        if st >= 0:
            return st
    while cnt[NXT] < N or cnt[N_ACTIVE] > 0:
        st = _event(C, J, M, E, shares, round_s, mode, target)
        if st >= 0:
            return st
        if cnt[N_ACTIVE] == 0:
            clk[NEXT_ROUND], clk[ANCHORED] = _INF, 0.0
            continue
        due = clk[ANCHORED] == 0.0 or clk[NOW] >= clk[NEXT_ROUND] or (
            short and cnt[N_HOLD] == 0)
        if due or (reacts and (cnt[GONE] > 0 or cnt[ARR_HI] > cnt[ARR_LO])):
            if due:
                clk[NEXT_ROUND], clk[ANCHORED] = clk[NOW] + round_s, 1.0
            cnt[DECISIONS] += 1
            st = _decide(kernel, C, J, V, M, E, S, shares, short, mode)
            if st >= 0:
                return st
        elif mode == PREDICT and cnt[ARR_HI] > cnt[ARR_LO]:
            return ARRIVED
    return DONE


KERNELS = (run_loop, host_kernel)
"""The engine's own lazily compiled functions (:func:`simulator.jit.compiled`)."""


@njit
def fork(J: Any, M: Any, E: Any, J2: Any, M2: Any, E2: Any, short: bool) -> None:
    """Copy the active jobs' state (and the kernel's memory of them) into a workspace for a
    playout: remaining work becomes the estimate, no arrivals follow. A short round that
    started nothing waits for an arrival the playout will not see: the next starts at once."""
    E2.clk[:] = E.clk
    E2.cnt[:] = E.cnt
    E2.rng[:] = E.rng
    E2.node_used[:] = E.node_used
    E2.dev_start[:] = E.dev_start
    E2.dev_rows[:E.dev_start[-1]] = E.dev_rows[:E.dev_start[-1]]
    E2.hold[:E.cnt[N_HOLD]] = E.hold[:E.cnt[N_HOLD]]
    E2.cnt[NXT] = J.arrival.shape[0]
    E2.cnt[PHASE] = 0
    if short and E2.clk[NEXT_ROUND] == _INF:
        E2.clk[NEXT_ROUND] = E.clk[NOW]
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
        for c in range(J.alloc.shape[1]):  # loops, not slice copies (simulator/jit.py)
            J2.alloc[r, c], M2.out_alloc[r, c] = J.alloc[r, c], M.out_alloc[r, c]
        J2.nw[r] = J.nw[r]
        for c in range(M.f.shape[1]):
            M2.f[r, c] = M.f[r, c]
        for c in range(M.i.shape[1]):
            M2.i[r, c] = M.i[r, c]
        M2.out_nw[r], M2.out_stop[r] = M.out_nw[r], M.out_stop[r]
        for s in range(J.woff[r], J.woff[r + 1]):
            J2.wdev[s], J2.wsurge[s], M2.out_wdev[s] = J.wdev[s], J.wsurge[s], M.out_wdev[s]
