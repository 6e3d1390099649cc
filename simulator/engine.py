"""The event-driven fluid engine, compiled with numba.

Between events every running job progresses at a constant rate (its speed-up at the GPUs it
holds), so the next completion is computed, not stepped. Events are arrivals (one job each),
completions (one job each; ties go to the earliest arrival), policy ticks (``tick_s`` after
the last event) and the ends of restart pauses. At equal times a completion is handled before
an arrival. After every event the policy's kernel re-decides every allocation. These are the
PCS simulator's semantics (PCS code, ``GenericScheduler``); PCS keeps times in whole
microseconds and this engine in float seconds, which moves JCTs by less than 1e-8 relative.

State lives in two 2-D arrays (float and int rows x active jobs, kept in arrival order), so a
fork for a JCT-prediction playout is two array copies. The loop and the policy kernels are
compiled (``cache=True``: compiled once per machine, then loaded from ``__pycache__``).

A policy kernel has this signature (all per-job arrays cover the active jobs only)::

    kernel(params, aux, now, gpus, arrival, demand, est_size, est_remaining, attained,
           alloc, model, speedup, out) -> None    # writes the new allocation into ``out``
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from simulator.jit import configure_cache

configure_cache()  # before any @njit(cache=True) below, and before the policies' kernels

__all__ = ["KERNEL_SIG", "run_engine", "speed_at"]

# float rows: true remaining work, estimated remaining, attained work, allocation, progress
# rate, end of a restart pause, arrival time, estimated size, started (0/1)
REM, EST, ATT, ALLOC, RATE, PAUSE, ARR, SIZE, STARTED = range(9)
# int rows: workload row, model, GPU demand
JOB, MODEL, DEMAND = range(3)
INF = np.inf

_f8, _i8 = nb.types.float64, nb.types.int64
_F1, _F2, _I1 = nb.types.float64[:], nb.types.float64[:, :], nb.types.int64[:]
# workload, scaling and policy tables are read-only (immutable values)
_RF1 = nb.types.Array(nb.types.float64, 1, "A", readonly=True)
_RF2 = nb.types.Array(nb.types.float64, 2, "A", readonly=True)
_RI1 = nb.types.Array(nb.types.int64, 1, "A", readonly=True)
KERNEL_SIG = nb.types.void(_F1, _RF2, _f8, _f8, _F1, _I1, _F1, _F1, _F1, _F1, _I1, _RF2, _F1)
"""Numba signature every policy kernel is compiled with (one engine serves them all)."""
_KERNEL = nb.types.FunctionType(KERNEL_SIG)


@nb.njit(cache=True, inline="always")
def speed_at(speedup: Any, m: int, g: float) -> float:
    """Model ``m``'s speed-up at ``g`` GPUs: linear between integer counts, flat above."""
    top = speedup.shape[1] - 1
    if g <= 0.0:
        return 0.0
    if g >= top:
        return speedup[m, top]
    lo = int(g)
    base = speedup[m, lo]
    return base + (g - lo) * (speedup[m, lo + 1] - base)


@nb.njit(cache=True)
def _advance(F: Any, n: int, dt: float) -> float:
    """Progress every job by ``dt`` seconds; return the GPUs allocated meanwhile."""
    used = 0.0
    for i in range(n):
        work = F[RATE, i] * dt
        F[REM, i] -= work
        F[EST, i] -= work
        F[ATT, i] += work
        used += F[ALLOC, i]
    return used


@nb.njit(cache=True)
def _remove(F: Any, I: Any, n: int, pos: int) -> None:
    for r in range(F.shape[0]):  # row by row: each shift is one contiguous move
        F[r, pos:n - 1] = F[r, pos + 1:n]
    for r in range(I.shape[0]):
        I[r, pos:n - 1] = I[r, pos + 1:n]


@nb.njit(cache=True)
def _next_end(F: Any, n: int, now: float) -> tuple[float, int]:
    """Earliest projected completion (ties: earliest arrival) as (time, position)."""
    best, pos = INF, -1
    for i in range(n):
        if F[REM, i] <= 0.0:
            left = 0.0
        elif F[RATE, i] > 0.0:
            left = F[REM, i] / F[RATE, i]
        else:
            continue
        if left < best:
            best, pos = left, i
    return (now + best if pos >= 0 else INF), pos


@nb.njit(cache=True)
def _decide(kernel: Any, params: Any, aux: Any, gpus: float, restart_s: float, speedup: Any,
            F: Any, I: Any, n: int, now: float, out: Any, preempt: Any, start: Any,
            record: bool, watch: int) -> tuple[float, bool]:
    """Ask the policy, apply the allocation, set rates; return (next pause end, watch started)."""
    kernel(params, aux, now, gpus, F[ARR, :n], I[DEMAND, :n], F[SIZE, :n], F[EST, :n],
           F[ATT, :n], F[ALLOC, :n], I[MODEL, :n], speedup, out[:n])
    pause_at = INF
    watch_started = False
    for i in range(n):
        a = out[i]
        started = F[STARTED, i] > 0.0
        if started and a != F[ALLOC, i]:
            if record:
                preempt[I[JOB, i]] += 1
            if restart_s > 0.0 and a > 0.0:
                F[PAUSE, i] = now + restart_s
        elif not started and a > 0.0:
            F[STARTED, i] = 1.0
            if record:
                start[I[JOB, i]] = now
            elif I[JOB, i] == watch:
                watch_started = True
        F[ALLOC, i] = a
        if F[PAUSE, i] > now:
            F[RATE, i] = 0.0
            pause_at = min(pause_at, F[PAUSE, i])
        else:
            F[RATE, i] = speed_at(speedup, I[MODEL, i], a)
    return pause_at, watch_started


@nb.njit(cache=True)
def _playout(kernel: Any, params: Any, aux: Any, gpus: float, tick_s: float,
             restart_s: float, speedup: Any, F0: Any, I0: Any, n: int, now: float,
             target: int, pause_at: float) -> tuple[float, float, int]:
    """Play a snapshot out with estimated sizes and no arrivals until ``target`` finishes.

    Returns:
        (predicted first start, predicted finish, events processed).
    """
    F = F0[:, :n].copy()
    I = I0[:, :n].copy()
    F[REM, :] = F[EST, :]
    out = np.empty(n)
    dummy_f = np.empty(0)
    dummy_i = np.empty(0, dtype=np.int64)
    pred_start = INF
    for i in range(n):
        if I[JOB, i] == target and F[ALLOC, i] > 0.0:
            pred_start = now
    end_at, end_pos = _next_end(F, n, now)
    tick_at = now + tick_s if tick_s > 0.0 else INF
    events = 0
    while True:
        t = min(end_at, tick_at, pause_at)
        if t == INF:
            return pred_start, INF, events
        _advance(F, n, t - now)
        now = t
        events += 1
        if end_at == t:
            done = I[JOB, end_pos]
            _remove(F, I, n, end_pos)
            n -= 1
            if done == target:
                return pred_start, now, events
        pause_at, started = _decide(kernel, params, aux, gpus, restart_s, speedup, F, I, n,
                                    now, out, dummy_i, dummy_f, False, target)
        if started:
            pred_start = now
        end_at, end_pos = _next_end(F, n, now)
        tick_at = now + tick_s if tick_s > 0.0 and n > 0 else INF


@nb.njit(cache=True)
def _grow(a: Any) -> Any:
    b = np.empty(2 * a.shape[0])
    b[: a.shape[0]] = a
    return b


@nb.njit(nb.types.Tuple((_i8, _i8, _f8, nb.types.float64[::1], nb.types.float64[::1]))(
    _KERNEL, _F1, _RF2, _f8, _f8, _f8, _RF2, _RF1, _RF1, _RF1, _RI1, _RI1, nb.types.boolean,
    _F1, _F1, _F1, _F1, _F1, _F1, _I1), cache=True)
def run_engine(kernel: Any, params: Any, aux: Any, gpus: float, tick_s: float,
               restart_s: float, speedup: Any, arrival: Any, service: Any, est_service: Any,
               demand: Any, model: Any, predict: bool, start: Any, finish: Any,
               pred_start: Any, pred_finish: Any, seen_sum: Any, seen_cnt: Any,
               preempt: Any) -> tuple[int, int, float, Any, Any]:
    """Simulate every job of a workload; fill the per-job output arrays in place.

    Returns:
        (events, playout events, busy GPU-seconds, series times, series busy GPUs).
    """
    N = arrival.shape[0]
    F = np.zeros((9, N))
    I = np.zeros((3, N), dtype=np.int64)
    out = np.empty(N)
    n = 0
    now = 0.0
    nxt = 0
    end_at, end_pos, tick_at, pause_at = INF, -1, INF, INF
    seen_total, seen_events = 0.0, 0.0
    events, playout_events, busy_s = 0, 0, 0.0
    ts = np.empty(max(16, 2 * N))
    busy = np.empty(max(16, 2 * N))
    k = 0
    while True:
        t_arr = arrival[nxt] if nxt < N else INF
        t = min(min(end_at, t_arr), min(tick_at, pause_at))
        if t == INF:
            break
        dt = t - now
        seen_total += n
        seen_events += 1.0
        if dt > 0.0:
            used = _advance(F, n, dt)
            busy_s += used * dt
            if k == ts.shape[0]:
                ts, busy = _grow(ts), _grow(busy)
            ts[k], busy[k] = now, used
            k += 1
        now = t
        events += 1
        arrived = -1
        if end_at == t:
            row = I[JOB, end_pos]
            finish[row] = now
            seen_sum[row] += seen_total
            seen_cnt[row] += seen_events
            _remove(F, I, n, end_pos)
            n -= 1
        elif t_arr == t:
            arrived = nxt
            F[:, n] = 0.0
            F[REM, n] = service[nxt]
            F[EST, n] = est_service[nxt]
            F[ARR, n] = arrival[nxt]
            F[SIZE, n] = est_service[nxt]
            I[JOB, n], I[MODEL, n], I[DEMAND, n] = nxt, model[nxt], demand[nxt]
            n += 1
            # PCS samples the active count at the newcomer's own arrival, itself included
            seen_sum[nxt] = n - seen_total
            seen_cnt[nxt] = 1.0 - seen_events
            nxt += 1
        if n == 0:
            end_at, end_pos, tick_at, pause_at = INF, -1, INF, INF
            continue
        pause_at, _ = _decide(kernel, params, aux, gpus, restart_s, speedup, F, I, n, now, out,
                              preempt, start, True, -1)
        end_at, end_pos = _next_end(F, n, now)
        tick_at = now + tick_s if tick_s > 0.0 else INF
        if predict and arrived >= 0:
            s, f, e = _playout(kernel, params, aux, gpus, tick_s, restart_s, speedup, F, I, n,
                               now, arrived, pause_at)
            pred_start[arrived], pred_finish[arrived] = s, f
            playout_events += e
    return events, playout_events, busy_s, ts[:k].copy(), busy[:k].copy()
