"""The fluid engine's per-job columns and the bookkeeping on them (:mod:`simulator.fluid.engine`):
which jobs progress, their progress and next completion, the class queues, finishing a job,
compacting the columns, applying an allocation and the history a kernel is given."""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["ALLOC", "ARR", "ATT", "CLASS", "DEMAND", "EST", "HIST", "HISTORIES", "INF", "JOB",
           "MARK", "MODEL", "NEXT", "PAUSE", "PREV", "RATE", "REM", "SEEN", "SEEN_N", "SIZE",
           "STARTED", "speed_at", "us_after"]

# float rows: true remaining work, estimated remaining, attained work, allocation, progress
# rate, end of a restart pause, arrival time, estimated size, started (0/1), the active jobs
# seen at arrival less the run's total then (sum and count, as ``FluidOut``), and the mean
# active jobs seen, filled before a decision for a policy whose history is "seen" (for one
# whose history is "rank", the row its kernel writes for itself)
REM, EST, ATT, ALLOC, RATE, PAUSE, ARR, SIZE, STARTED, SEEN, SEEN_N, HIST = range(12)
# int rows: workload row (-1 once finished), model, GPU demand, class, next and previous
# job in the class's queue, visited by the queue kernel (0/1)
JOB, MODEL, DEMAND, CLASS, NEXT, PREV, MARK = range(7)
INF = np.inf
HISTORIES = ("attained", "seen", "rank")
"""The kernel's ``attained`` argument, by the policy's ``history`` (its code: the index)."""
_ATTAINED, _RANKED = HISTORIES.index("attained"), HISTORIES.index("rank")


@njit(inline="always")
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


@njit(inline="always")
def _holds(F: Any, i: int, now: float) -> bool:
    """Whether job ``i`` can progress, pause or end before the next decision."""
    return F[ALLOC, i] > 0.0 or F[PAUSE, i] > now or F[REM, i] <= 0.0


@njit(inline="always")
def _advance(F: Any, held: Any, h: int, dt: float) -> float:
    """Progress the held jobs by ``dt`` seconds; return the GPUs allocated meanwhile."""
    used = 0.0
    for j in range(h):
        i = held[j]
        work = F[RATE, i] * dt
        F[REM, i] -= work
        F[EST, i] -= work
        F[ATT, i] += work
        used += F[ALLOC, i]
    return used


@njit
def us_after(now: float, seconds: float) -> float:
    """``now`` (whole microseconds) plus ``seconds`` on a microsecond grid, rounded as Python's
    ``datetime.timedelta(seconds=...)`` rounds (PCS's clock): the whole seconds exactly, their
    fraction times 1e6 to the nearest microsecond, half to even."""
    whole = np.trunc(seconds)
    return now + whole * 1e6 + np.rint((seconds - whole) * 1e6)


@njit(inline="always")
def _next_end(F: Any, held: Any, h: int, now: float, clock_us: bool,
              ranked: bool) -> tuple[float, int]:
    """Earliest projected completion as (time, column); ties go to the earliest arrival (the
    smallest column, whatever the order of ``held``) or, where the kernel ranks the jobs
    (``ranked``: its history is "rank"), to the first in its last order, as PCS's completions
    go in its job list's order. On the
    microsecond clock (``clock_us``) each job's end is rounded to it first and, as in PCS, a
    job without GPUs ends only with exactly no work left (one that overshot to below zero
    when its end was rounded waits for GPUs again)."""
    best, pos = INF, -1
    for j in range(h):
        i = held[j]
        if F[REM, i] <= 0.0:
            if clock_us and F[RATE, i] == 0.0 and F[REM, i] < 0.0:
                continue
            left = 0.0
        elif F[RATE, i] > 0.0:
            left = F[REM, i] / F[RATE, i]
        else:
            continue
        at = us_after(now, left) if clock_us else left  # float seconds: the time left
        if at == best and ranked and F[HIST, i] != F[HIST, pos]:
            first = F[HIST, i] < F[HIST, pos]
        else:
            first = at < best or (at == best and i < pos)
        if first:
            best, pos = at, i
    if pos < 0 or clock_us:
        return best, pos
    return now + best, pos


@njit
def _scan_held(F: Any, I: Any, cols: int, now: float, held: Any) -> int:
    h = 0
    for i in range(cols):
        if I[JOB, i] >= 0 and _holds(F, i, now):
            held[h] = i
            h += 1
    return h


@njit
def _link(I: Any, head: Any, tail: Any, i: int) -> None:
    """Append column ``i`` to its class's queue."""
    c = I[CLASS, i]
    I[NEXT, i], I[PREV, i] = -1, tail[c]
    if tail[c] >= 0:
        I[NEXT, tail[c]] = i
    else:
        head[c] = i
    tail[c] = i


@njit
def _enqueue(I: Any, Q: Any, i: int) -> None:
    head, tail, class_demand = Q
    _link(I, head, tail, i)
    class_demand[I[CLASS, i]] += I[DEMAND, i]  # whole GPUs: the sum is exact in any order


@njit(inline="always")
def _finish(F: Any, I: Any, cols: int, Q: Any, queued: bool, held: Any, h: int,
            pos: int) -> int:
    """Take the job at column ``pos`` out; return the new held count."""
    if not queued:  # the full path keeps the columns dense; the next decision rescans
        for r in range(F.shape[0]):  # row by row: each shift is one contiguous move
            for c in range(pos, cols - 1):
                F[r, c] = F[r, c + 1]
        for r in range(DEMAND + 1):  # the queue rows are unused on this path
            for c in range(pos, cols - 1):
                I[r, c] = I[r, c + 1]
        return 0
    head, tail, class_demand = Q
    c, p, q = I[CLASS, pos], I[PREV, pos], I[NEXT, pos]
    if p >= 0:
        I[NEXT, p] = q
    else:
        head[c] = q
    if q >= 0:
        I[PREV, q] = p
    else:
        tail[c] = p
    class_demand[c] -= I[DEMAND, pos]
    I[JOB, pos] = -1
    k = 0
    for j in range(h):
        if held[j] != pos:
            held[k] = held[j]
            k += 1
    return k


@njit
def _compact(F: Any, I: Any, cols: int, Q: Any, held: Any, now: float) -> tuple[int, int]:
    """Drop dead columns (order kept), relink the class queues; return (columns, held)."""
    k = 0
    for i in range(cols):
        if I[JOB, i] >= 0:
            if k != i:
                for r in range(F.shape[0]):
                    F[r, k] = F[r, i]
                for r in range(I.shape[0]):
                    I[r, k] = I[r, i]
            k += 1
    head, tail, _ = Q
    head[:] = -1
    tail[:] = -1
    for i in range(k):
        _link(I, head, tail, i)
    return k, _scan_held(F, I, k, now, held)


@njit(inline="always")
def _keeps(F: Any, i: int, a: float, now: float) -> bool:
    """Whether giving job ``i`` ``a`` GPUs leaves it as it is, so :func:`_apply` can be
    skipped: it has started, keeps its GPUs, no pause is running or has just ended (its rate is
    then its speed at ``a``, as :func:`_apply` set it). Skipping saves the reference counting
    of the arrays an inlined :func:`_apply` is passed, most of an event's cost."""
    return (F[STARTED, i] > 0.0 and a == F[ALLOC, i] and F[PAUSE, i] <= now
            and (a == 0.0 or F[RATE, i] > 0.0))


@njit(inline="always")
def _apply(F: Any, I: Any, i: int, a: float, now: float, restart_s: float, speedup: Any,
           record: bool, preempt: Any, start: Any, watch: int) -> tuple[float, bool]:
    """Give job ``i`` ``a`` GPUs and set its rate; return (its pause end or INF, watch started)."""
    started = F[STARTED, i] > 0.0
    hit = False
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
            hit = True
    F[ALLOC, i] = a
    if F[PAUSE, i] > now:
        F[RATE, i] = 0.0
        return F[PAUSE, i], hit
    F[RATE, i] = speed_at(speedup, I[MODEL, i], a)
    return INF, hit


@njit(inline="always")
def _history(F: Any, cols: int, seen: tuple[float, float], mode: int) -> Any:
    """The per-job history a kernel is given (``mode``, :data:`HISTORIES`): the attained work;
    each job's mean active jobs seen over its events so far, itself included (PCS's "observed
    contention"), from the run's running totals ``seen`` (sum, events); or the kernel's own
    row, which it writes and gets back at its next decision (0 for a job that arrived since)."""
    if mode == _ATTAINED:
        return F[ATT, :cols]
    if mode == _RANKED:
        return F[HIST, :cols]
    for i in range(cols):
        F[HIST, i] = (F[SEEN, i] + seen[0]) / (F[SEEN_N, i] + seen[1])
    return F[HIST, :cols]
