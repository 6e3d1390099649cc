"""Gavel's rounds, the compiled half of :mod:`policies.hetero.gavel`: the policy's memory
layout, the grant of each round in Gavel's priority order, the bookkeeping between rounds
(credits, allocation resets, failed tasks) and the placing of a round's tasks. The module
docstring of :mod:`policies.hetero.gavel` says what each step reproduces."""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.gangs import gang_row
from simulator.jit import njit
from simulator.rounds.view import NXT, Layout, set_plan

__all__ = [
    "FAILS",
    "GI",
    "MT_WORDS",
    "ORDERS",
    "STATES",
    "S_FIFO",
    "S_SHUFFLER",
    "TYPED",
    "F",
    "G",
    "I",
    "bookkeeping",
    "gavel_grant",
    "place",
    "ran_at",
    "scheduled",
    "states_at",
    "throughput_of",
]

MT_WORDS = 625
"""Words of a Mersenne Twister state (Python's ``random``)."""
# kernel parameters
P_ROUND, P_RESET, P_AWARE, P_FIFO, P_TYPES = range(5)
# memory (only the active rows' is carried into a playout, so the round's tasks live in the
# global entries). Per row (f): the blocks of TYPED, one column per GPU type each, then from
# TYPED.width x m the columns of F, then from there + F.GANG one column per type: the
# measured steps per second of the row's gang (-1: unknown, from the speeds).
TYPED = Layout(alloc=1, credit=1, deficit=1)
"""Per row, first in ``f``, blocks of ``m`` columns (one per GPU type; block ``B`` starts at
``B x m``): the allocation, the credit and the deficit."""
T_ALLOC, T_CREDIT, T_DEFICIT, T_END = TYPED.ALLOC, TYPED.CREDIT, TYPED.DEFICIT, TYPED.width
F = Layout(steps=1, alone=1, left=1, rate=1, gang=0)
"""After the per-type blocks: steps per reference second; finish-time fairness's isolated
time so far, steps left and isolated rate at the last reset; then the gang's rates."""
I = Layout(alloc=1, known=1, kept=1, fails=1, drop=1)
"""Per row: in the allocation, admitted, agnostic FIFO's kept type, failed tasks in a row,
dropped."""
G = Layout(reset=1, stale=1, start=1, end=1, host=1, retry=1, total=0)
"""Globally: last reset, allocation stale, previous busy round's start and end, host work
pending (1 allocation, 2 type orders; -1 done), an idle round retried; from ``total``
per-type credit totals, then this round's task ends."""
GI = Layout(cursor=1, count=1, orders=0)
"""``gi``: the type-order cursor and count, then ``ORDERS`` type orders of ``m`` entries, the
two generators' states (:func:`states_at`), then this round's tasks (:func:`ran_at`)."""
STATES = Layout(shuffler=MT_WORDS, fifo=MT_WORDS)
"""At :func:`states_at`: the states (Mersenne Twister words) of the generator that shuffles
the type orders and of FIFO's draws."""
RAN = Layout(count=1, tasks=0)
"""At :func:`ran_at`: the number of tasks, then the tasks (:data:`TASK` each)."""
TASK = Layout(row=1, type=1)
"""A task: its row and type (-1: it fails)."""
I_ALLOC, I_KNOWN, I_KEPT, I_FAILS, I_DROP = I.ALLOC, I.KNOWN, I.KEPT, I.FAILS, I.DROP
F_STEPS, F_ALONE, F_LEFT, F_RATE, F_GANG = F.STEPS, F.ALONE, F.LEFT, F.RATE, F.GANG
G_RESET, G_STALE, G_START, G_END, G_HOST, G_RETRY, G_TOTAL = (G.RESET, G.STALE, G.START, G.END,
                                                              G.HOST, G.RETRY, G.TOTAL)
GI_CURSOR, GI_COUNT, GI_ORDERS = GI.CURSOR, GI.COUNT, GI.ORDERS
S_SHUFFLER, S_FIFO, S_WIDTH = STATES.SHUFFLER, STATES.FIFO, STATES.width
RAN_COUNT, RAN_TASKS = RAN.COUNT, RAN.TASKS
TASK_ROW, TASK_TYPE, TASK_W = TASK.ROW, TASK.TYPE, TASK.width
ORDERS = 1024
"""Type orders drawn per host step (agnostic policies)."""
FAILS = 5
"""Failed tasks in a row after which Gavel drops a job (its ``MAX_FAILED_ATTEMPTS``)."""


@njit
def states_at(m: int) -> int:
    """Where the two generators' states start in ``gi`` (``m`` types), after the type-order
    cursor and count and ``ORDERS`` type orders."""
    return GI_ORDERS + ORDERS * m


@njit
def ran_at(m: int) -> int:
    """Where this round's task list (:data:`RAN`) starts in ``gi``, after the two generators'
    states (a layout that does not depend on the rows, so memory grown by rows keeps it)."""
    return states_at(m) + S_WIDTH


@njit(inline="always")
def _task_at(at: int, k: int) -> int:
    """Task ``k``'s entry in a task list at ``at``."""
    return at + RAN_TASKS + TASK_W * k


@njit
def gavel_grant(x: Any, credit: Any, total: Any, deficit: Any, throughput: Any,
                demand: Any, in_alloc: Any, order: Any, type_gpus: Any, fifo: bool) -> Any:
    """The type each job runs on this round (-1: none), Gavel's priority order.

    Args:
        x: ``(jobs, types)`` allocation; ``in_alloc``: the job belongs to it.
        credit, total: ``(jobs, types)`` time credited to each job on each type, and
            ``(types,)`` each type's total.
        deficit: ``(jobs, types)`` time owed by earlier allocations.
        throughput: ``(jobs, types)`` rates (zero: the job cannot run there).
        demand: gang sizes; ``order``: the types in the order they are granted.
        type_gpus: GPUs of each type; ``fifo``: grant only jobs of positive priority.
    """
    n = x.shape[0]
    out = np.full(n, -1, dtype=np.int64)
    left = type_gpus.copy()
    priority = np.empty(n)
    for t in order:
        for j in range(n):
            if not in_alloc[j] or x[j, t] == 0.0 or throughput[j, t] == 0.0:
                priority[j] = 0.0
            elif total[t] > 0.0 and credit[j, t] > 0.0:
                priority[j] = x[j, t] / (credit[j, t] / total[t])
            else:
                priority[j] = x[j, t] * 1e9
        rank = np.arange(n)  # stable sorts from the least significant key: arrival first
        for key in (x[:, t] * in_alloc, deficit[:, t].copy(), priority):
            rank = rank[np.argsort(-key[rank], kind="mergesort")]
        for j in rank:
            if left[t] == 0:
                break
            if out[j] >= 0 or throughput[j, t] <= 0.0 or (fifo and priority[j] <= 0.0):
                continue
            if demand[j] <= left[t]:
                left[t] -= demand[j]
                out[j] = t
    return out


@njit
def throughput_of(C: Any, J: Any, active: Any) -> Any:
    """``(jobs, types)``: each active job's rate with its whole demand on one type."""
    top = C.speedup.shape[1] - 1
    out = np.empty((active.shape[0], C.speeds.shape[1]))
    for a in range(active.shape[0]):
        m = J.model[active[a]]
        out[a] = C.speedup[m, min(J.demand[active[a]], top)] * C.speeds[m]
    return out


@njit
def _reset(M: Any, active: Any, now: float) -> None:
    """Settle deficits under the old allocation and restart the credits (module docstring)."""
    p, m = M.params, int(M.params[P_TYPES])
    half, elapsed = p[P_ROUND] / 2, now - M.g[G_RESET]
    M.g[G_TOTAL:G_TOTAL + m] = 0.0
    for r in active:
        for t in range(m):
            owed = M.f[r, T_ALLOC * m + t] * elapsed if M.i[r, I_ALLOC] else 0.0
            M.f[r, T_DEFICIT * m + t] += owed - (M.f[r, T_CREDIT * m + t] - half)
            M.f[r, T_CREDIT * m + t] = half
            M.g[G_TOTAL + t] += half
    M.g[G_RESET], M.g[G_STALE] = now, 0.0


@njit
def _due(M: Any, now: float) -> bool:
    """Whether a round at ``now`` resets the allocation."""
    return M.g[G_STALE] > 0 and (now - M.g[G_RESET] >= M.params[P_RESET] or M.g[G_RESET] == 0)


@njit
def bookkeeping(J: Any, M: Any, E: Any, active: Any, now: float) -> None:
    """Credit the round that just ended, admit arrivals, reset the allocation if due
    (module docstring); flag the host work this needs in ``g[G_HOST]``. A task whose job is
    no longer active finished it at the task's end."""
    p, m, N = M.params, int(M.params[P_TYPES]), J.arrival.shape[0]
    at, ends = ran_at(m), G_TOTAL + m
    ran = M.gi[at + RAN_COUNT]
    if ran > 0:  # Gavel's round bookkeeping: from the previous busy round's end
        if not np.isnan(M.g[G_END]):
            M.g[G_START] = M.g[G_END]
        M.g[G_END] = M.g[ends:ends + ran].max()
    for k in range(ran):
        task = _task_at(at, k)
        r, t, end = M.gi[task + TASK_ROW], M.gi[task + TASK_TYPE], M.g[ends + k]
        a = np.searchsorted(active, r)
        done = a == active.shape[0] or active[a] != r
        if t < 0:  # a failed task: no credit, the allocation is stale
            M.g[G_STALE] = 1.0
            M.i[r, I_FAILS] += 1
            if M.i[r, I_FAILS] >= FAILS:
                M.i[r, I_DROP], M.i[r, I_KNOWN] = 1, 0
            continue
        M.g[G_TOTAL + t] += end - M.g[G_START]
        if done:
            M.g[G_STALE] = 1.0
            continue
        M.i[r, I_FAILS] = 0
        M.f[r, T_CREDIT * m + t] += end - M.g[G_START]
    M.gi[at + RAN_COUNT] = 0
    if ran > 0 and M.g[G_END] < now and _due(M, M.g[G_END]):
        _reset(M, active[:0], M.g[G_END])  # the cluster emptied then: Gavel's round there
    arrived = False
    for r in active:
        if not M.i[r, I_KNOWN] and not M.i[r, I_DROP]:
            M.i[r, I_KNOWN], M.i[r, I_ALLOC] = 1, 0
            M.f[r, T_CREDIT * m:T_DEFICIT * m] = p[P_ROUND] / 2
            M.f[r, T_DEFICIT * m:T_END * m] = 0.0
            M.g[G_STALE], arrived = 1.0, True
    if ran == 0 and not arrived and E.cnt[NXT] == N:
        M.g[G_RESET] = 0.0  # every job is in and the last round was idle: reset now
    host = 0
    if _due(M, now):
        _reset(M, scheduled(M, active), now)
        host = 1
    if not p[P_AWARE] and M.gi[GI_CURSOR] == M.gi[GI_COUNT]:
        host |= 2
    M.g[G_HOST] = host


@njit
def scheduled(M: Any, active: Any) -> Any:
    """The active rows the scheduler still knows (not dropped)."""
    keep = np.empty(active.shape[0], dtype=np.int64)
    k = 0
    for r in active:
        if not M.i[r, I_DROP]:
            keep[k] = r
            k += 1
    return keep[:k]


@njit
def _task(C: Any, J: Any, M: Any, r: int, t: int, now: float) -> tuple[bool, float]:
    """Row ``r``'s task on type ``t`` this round: whether it runs (or fails), and its end.

    With step counts (its ``F.STEPS`` column positive) a job runs whole steps:
    ``floor(rate x round)`` or what it has left (``est``: Gavel is clairvoyant), and the task
    fails if that is fewer steps than its GPUs (Gavel splits a task's steps over its workers,
    and a worker with none fails it). The engine runs a granted job until the round ends;
    Gavel's stops after its whole steps and holds its GPUs idle (:func:`place` sets
    ``out_stop``, whole-step rounds)."""
    m, round_s = C.type_gpus.shape[0], M.params[P_ROUND]
    top = C.speedup.shape[1] - 1
    rate = C.speedup[J.model[r], min(J.demand[r], top)] * C.speeds[J.model[r], t]
    per_s = M.f[r, T_END * m + F_STEPS]
    if per_s <= 0.0:
        return True, now + min(round_s, J.est[r] / rate)
    measured = M.f[r, T_END * m + F_GANG + t]  # Gavel's own steps/s, where the workload has it
    steps_s = measured if measured > 0.0 else rate * per_s
    steps = min(np.floor(steps_s * round_s), max(1.0, np.ceil(J.est[r] * per_s - 1e-6)))
    return steps >= J.demand[r], now + steps / steps_s


@njit
def _work_starts(C: Any, J: Any, r: int, row: Any, now: float) -> float:
    """When row ``r``'s task on ``row`` (GPUs per node) can start working: after the
    profile's restart pause if the job has run and moves (the engine's rule), else when the
    pause it is in ends. Gavel has no restarts; here a task's steps follow the pause, so a
    job that moves every round still progresses."""
    if J.started[r] and C.restart_s > 0.0 and np.any(row != J.alloc[r]):
        return now + C.restart_s
    return max(now, J.pause[r])


@njit
def place(C: Any, J: Any, M: Any, active: Any, grant: Any, now: float) -> tuple[float, int]:
    """Put the granted jobs in the allocation on their type's nodes (those already there
    first, keeping their GPUs; a failing task holds none), then dropped jobs on GPUs left
    free; write the plan and list the round's tasks (each ends its work after the job's
    restart pause: :func:`_work_starts`). When the round's last task ends (-inf: no task),
    and how many jobs hold GPUs."""
    n, m = active.shape[0], C.type_gpus.shape[0]
    at, ends = ran_at(m), G_TOTAL + m
    free = C.node_gpus.copy()
    row, none = np.zeros_like(free), np.zeros_like(free)
    out = np.zeros((n, free.shape[0]), dtype=np.int64)
    ran, last = 0, -np.inf
    for keep in (True, False):
        for a in range(n):
            r, t = active[a], grant[a]
            if t < 0 or not M.i[r, I_ALLOC]:
                continue
            on_t = J.alloc[r].sum() > 0 and C.node_type[np.argmax(J.alloc[r])] == t
            if keep != on_t:
                continue
            ok, end = _task(C, J, M, r, t, now)
            if ok and gang_row(np.where(C.node_type == t, free, 0), J.demand[r],
                               J.alloc[r] if on_t else none, row):
                out[a] = row
                free -= row
                end += _work_starts(C, J, r, row, now) - now
            M.out_stop[r] = (end if out[a].sum() > 0 and M.f[r, T_END * m + F_STEPS] > 0
                             else np.inf)
            task = _task_at(at, ran)
            M.gi[task + TASK_ROW], M.gi[task + TASK_TYPE] = r, t if out[a].sum() > 0 else -1
            M.g[ends + ran] = end
            last = max(last, end)
            ran += 1
    M.gi[at + RAN_COUNT] = ran
    for a in range(n):  # dropped jobs finish their last steps on whatever is left
        r = active[a]
        if M.i[r, I_DROP] and gang_row(np.where(C.speeds[J.model[r]][C.node_type] > 0, free,
                                                0), J.demand[r], J.alloc[r], row):
            out[a] = row
            free -= row
    held = 0
    for a in range(n):
        held += out[a].sum() > 0
        set_plan(M, active[a], out[a])
    return last, held
