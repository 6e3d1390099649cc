"""Gavel's heterogeneity-aware round-based scheduling, as its simulator runs it (SPEC §3.4).

Gavel (Narayanan et al., OSDI 2020) computes an allocation ``x[j, t]``: the fraction of time
job ``j`` should run on GPU type ``t``, each job's whole gang on one type. Rounds realise it.
Every fact below is from Gavel's public simulator (``scheduler.py`` in simulation mode), which
this module reproduces job for job (``tests/policies/test_gavel_parity.py``):

- **Rounds** (``short_rounds``): each round, every granted job runs a task of
  ``floor(rate x round_s)`` whole training steps, or the steps it has left; the round ends when
  the last task does (a little under ``round_s``, or sooner if all finish early), a job whose
  task ends first holds its GPUs idle until then, and a round that grants nothing lasts until
  the next arrival. Jobs arriving mid-round join at the next round. A task with fewer steps
  than the gang has GPUs fails (Gavel splits steps over workers): no progress, no credit, and
  after 5 failures in a row Gavel drops the job (we let it finish its last steps on GPUs left
  over, outside the scheduler; Gavel's average leaves it out). Work counts in steps where the
  workload says how many a second of it is (``TypeSpeeds.steps_per_s``: Gavel's traces and
  generator); otherwise tasks run ``round_s`` of continuous work.
- **Time accounting**: every job starts with half a round of credit on each type. When a
  round ends, each task gets ``its end - the previous busy round's end`` on its type (the
  first round counts from time 0, and an idle gap counts towards the next busy round: Gavel's
  bookkeeping); the type's total gets the same, finished jobs' included.
- **Allocation resets**: an arrival or completion marks the allocation stale. At a round
  that finds it stale, and ``reset_s`` after the last reset (or while the last reset was at
  time 0), each job's deficit grows by the time its old allocation promised minus the time it
  got, the credits go back to half a round, and the allocation is recomputed for the active
  jobs. Jobs that arrived since belong to no allocation until then: FIFO never grants them,
  the others grant them but leave their GPUs idle. Once every job has arrived, a round that
  follows an idle one resets regardless.
- **Granting**: type by type (V100, P100, K80 in profile order; a fresh random order each
  round for the heterogeneity-agnostic policies, from Python's ``random`` seeded with
  ``seed + 5``), jobs in order of priority ``x[j, t] / (credit on t / type total)`` (0 where
  ``x`` or the job's throughput there is 0), then deficit, then ``x``, then arrival; each job
  at most once, while the type has GPUs for its gang.

Objectives (``objective``, with ``aware``; Gavel's ``_perf`` policies are the aware ones):

- ``max_min`` (LAS, Gavel's ``max_min_fairness``): maximize the smallest
  ``sum_t x[j, t] s_j X[j, t] / P_j``, ``s_j`` the gang size and ``P_j`` the job's throughput
  under an equal share of every type in proportion to its GPUs. Agnostic: ``X = 1``.
- ``max_sum``: maximize ``sum x[j, t] X[j, t]``.
- ``finish_time`` (Gavel's ``finish_time_fairness``): minimize the largest ratio of the time
  a job would take under ``x`` (time since it arrived plus its remaining steps at
  ``sum_t x[j, t] X[j, t]``) to the time it would take alone (the time its progress so far
  would have taken at its isolated rate, summed from reset to reset, plus its remaining steps
  at that rate; the isolated rate is ``X_j`` under an even split of every type over the jobs).
  A second-order cone program, solved with ECOS as cvxpy hands it to ECOS for Gavel, over the
  types in Gavel's name order (the reverse of the profile's: k80 < p100 < v100). Agnostic:
  every type at the job's rate on the profile's first (Gavel: V100; a job that cannot run
  there, which Gavel's measurements never have, at its best rate).
- ``fifo``: jobs in arrival order each get one type for all their time (``x = 1``) while some
  type has room for the gang: the fastest (aware), or, agnostic, Gavel's own choice (it draws a
  random index, ``random.Random(seed)``, but takes the last type in name order that has free
  GPUs, which can overbook it; reproduced, draws included). Agnostic FIFO keeps earlier
  choices across resets.

``X[j, t]`` is the job's progress rate with its gang on type ``t``. Gavel solves the LP with
cvxpy's ECOS; so do we by default (``lp="ecos"``: the same interior-point method on the same
LP, its allocations to 1e-9), since the LP rarely has one optimum and which one a solver
returns moves every job. ``lp="highs"`` uses HiGHS's interior point without crossover
instead (another optimum; README, fidelity table). Gavel's
simulator has no restart cost and ignores placement; on a profile that charges them, a
restart eats into the task and a spread gang runs slower. Gavel's packing policies
(``*_packed``: pairs of jobs of one gang size time-sharing a gang at their measured
co-located rates) are not reproduced: jobs here never share a GPU, as under every Gavel
policy without packing (``horus``, ``ojpp`` and ``unified`` model co-location).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

import numba as nb
import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.gangs import gang_row
from policies.hetero.gavel_lp import allocation, fifo, finish_time_allocation, rng, save
from policies.round_kernel import KernelRoundPolicy
from simulator.round_arrays import (
    HOST,
    N_ACTIVE,
    NEXT_ROUND,
    NXT,
    PLAN,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    EngineState,
    JobArrays,
    PolicyMemory,
    active_rows,
    empty_memory,
    touch,
)

__all__ = ["Gavel", "gavel_grant"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# kernel parameters
P_ROUND, P_RESET, P_AWARE, P_FIFO, P_TYPES = range(5)
# memory (only the active rows' is carried into a playout, so the round's tasks live in the
# global entries): per row (f) blocks of one column per type: allocation, credit, deficit,
# then the steps per reference second and finish-time fairness's isolated time so far, steps
# left and isolated rate at the last reset (the F_* offsets after the blocks); per row (i)
# in the allocation, admitted, agnostic FIFO's kept type, failed tasks in a row, dropped;
# globally (g) last reset, allocation stale, previous busy round's start and end, host work
# pending (1 allocation, 2 type orders; -1 done), an idle round retried, per-type credit
# totals from G_TOTAL, then this round's task ends; (gi) the type-order cursor and count, the
# orders, the two generators' states, then the number of tasks and each task's row and type
# (-1: it fails)
I_ALLOC, I_KNOWN, I_KEPT, I_FAILS, I_DROP = range(5)
F_STEPS, F_ALONE, F_LEFT, F_RATE = range(4)
G_RESET, G_STALE, G_START, G_END, G_HOST, G_RETRY, G_TOTAL = range(7)
ORDERS = 1024
"""Type orders drawn per host step (agnostic policies)."""
FAILS = 5
"""Failed tasks in a row after which Gavel drops a job (its ``MAX_FAILED_ATTEMPTS``)."""
_MT_WORDS = 625
"""Words of a Mersenne Twister state (Python's ``random``)."""


@nb.njit(cache=True)
def _ran_at(m: int) -> int:
    """Where this round's task list starts in ``gi``, after the type-order cursor and count,
    ``ORDERS`` type orders and the two generators' states (a layout that does not depend on
    the rows, so memory grown by rows keeps it)."""
    return 2 + ORDERS * m + 2 * _MT_WORDS


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _throughput(C: Any, J: Any, active: Any) -> Any:
    """``(jobs, types)``: each active job's rate with its whole demand on one type."""
    top = C.speedup.shape[1] - 1
    out = np.empty((active.shape[0], C.speeds.shape[1]))
    for a in range(active.shape[0]):
        m = J.model[active[a]]
        out[a] = C.speedup[m, min(J.demand[active[a]], top)] * C.speeds[m]
    return out


@nb.njit(cache=True)
def _reset(M: Any, active: Any, now: float) -> None:
    """Settle deficits under the old allocation and restart the credits (module docstring)."""
    p, m = M.params, int(M.params[P_TYPES])
    half, elapsed = p[P_ROUND] / 2, now - M.g[G_RESET]
    M.g[G_TOTAL:G_TOTAL + m] = 0.0
    for r in active:
        for t in range(m):
            owed = M.f[r, t] * elapsed if M.i[r, I_ALLOC] else 0.0
            M.f[r, 2 * m + t] += owed - (M.f[r, m + t] - half)
            M.f[r, m + t] = half
            M.g[G_TOTAL + t] += half
    M.g[G_RESET], M.g[G_STALE] = now, 0.0


@nb.njit(cache=True)
def _due(M: Any, now: float) -> bool:
    """Whether a round at ``now`` resets the allocation."""
    return M.g[G_STALE] > 0 and (now - M.g[G_RESET] >= M.params[P_RESET] or M.g[G_RESET] == 0)


@nb.njit(cache=True)
def _bookkeeping(J: Any, M: Any, E: Any, active: Any, now: float) -> None:
    """Credit the round that just ended, admit arrivals, reset the allocation if due
    (module docstring); flag the host work this needs in ``g[G_HOST]``. A task whose job is
    no longer active finished it at the task's end."""
    p, m, N = M.params, int(M.params[P_TYPES]), J.arrival.shape[0]
    at, ends = _ran_at(m), G_TOTAL + m
    ran = M.gi[at]
    if ran > 0:  # Gavel's round bookkeeping: from the previous busy round's end
        if not np.isnan(M.g[G_END]):
            M.g[G_START] = M.g[G_END]
        M.g[G_END] = M.g[ends:ends + ran].max()
    for k in range(ran):
        r, t, end = M.gi[at + 1 + 2 * k], M.gi[at + 2 + 2 * k], M.g[ends + k]
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
        M.f[r, m + t] += end - M.g[G_START]
        if M.f[r, 3 * m] > 0:
            _stop(J, r, end, now)
    M.gi[at] = 0
    if ran > 0 and M.g[G_END] < now and _due(M, M.g[G_END]):
        _reset(M, active[:0], M.g[G_END])  # the cluster emptied then: Gavel's round there
    arrived = False
    for r in active:
        if not M.i[r, I_KNOWN] and not M.i[r, I_DROP]:
            M.i[r, I_KNOWN], M.i[r, I_ALLOC] = 1, 0
            M.f[r, m:2 * m] = p[P_ROUND] / 2
            M.f[r, 2 * m:3 * m] = 0.0
            M.g[G_STALE], arrived = 1.0, True
    if ran == 0 and not arrived and E.cnt[NXT] == N:
        M.g[G_RESET] = 0.0  # every job is in and the last round was idle: reset now
    host = 0
    if _due(M, now):
        _reset(M, _scheduled(M, active), now)
        host = 1
    if not p[P_AWARE] and M.gi[0] == M.gi[1]:
        host |= 2
    M.g[G_HOST] = host


@nb.njit(cache=True)
def _stop(J: Any, r: int, end: float, now: float) -> None:
    """Take back what row ``r`` ran after its task's ``end``: the engine runs a granted job
    until the round ends at ``now``, where Gavel's stops after its whole steps (less than one
    step's time earlier) and holds its GPUs idle. Time it spent restarting ran nothing."""
    idle = now - max(end, J.pause[r])
    if idle <= 0:
        return
    work = J.base[r] * idle
    J.rem[r] += work
    J.est[r] += work
    J.att[r] -= work
    J.ran0[r] -= idle
    J.ran1[r] -= work / J.alone[r]


@nb.njit(cache=True)
def _scheduled(M: Any, active: Any) -> Any:
    """The active rows the scheduler still knows (not dropped)."""
    keep = np.empty(active.shape[0], dtype=np.int64)
    k = 0
    for r in active:
        if not M.i[r, I_DROP]:
            keep[k] = r
            k += 1
    return keep[:k]


@nb.njit(cache=True)
def _task(C: Any, J: Any, M: Any, r: int, t: int, now: float) -> tuple[bool, float]:
    """Row ``r``'s task on type ``t`` this round: whether it runs (or fails), and its end.

    With step counts (``f[r, 3 m] > 0``) a job runs whole steps: ``floor(rate x round)`` or
    what it has left, and the task fails if that is fewer steps than its GPUs (Gavel splits a
    task's steps over its workers, and a worker with none fails it)."""
    m, round_s = C.type_gpus.shape[0], M.params[P_ROUND]
    top = C.speedup.shape[1] - 1
    rate = C.speedup[J.model[r], min(J.demand[r], top)] * C.speeds[J.model[r], t]
    per_s = M.f[r, 3 * m]
    if per_s <= 0.0:
        return True, now + min(round_s, J.rem[r] / rate)
    steps = min(np.floor(rate * per_s * round_s), max(1.0, np.ceil(J.rem[r] * per_s - 1e-6)))
    return steps >= J.demand[r], now + steps / (rate * per_s)


@nb.njit(cache=True)
def _place(C: Any, J: Any, M: Any, active: Any, grant: Any, now: float) -> tuple[float, int]:
    """Put the granted jobs in the allocation on their type's nodes (those already there
    first, keeping their GPUs; a failing task holds none), then dropped jobs on GPUs left
    free; write the plan and list the round's tasks. When the round's last task ends (-inf:
    no task), and how many jobs hold GPUs."""
    n, m = active.shape[0], C.type_gpus.shape[0]
    at, ends = _ran_at(m), G_TOTAL + m
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
            M.gi[at + 1 + 2 * ran], M.gi[at + 2 + 2 * ran] = r, t if out[a].sum() > 0 else -1
            M.g[ends + ran] = end
            last = max(last, end)
            ran += 1
    M.gi[at] = ran
    for a in range(n):  # dropped jobs finish their last steps on whatever is left
        r = active[a]
        if M.i[r, I_DROP] and gang_row(np.where(C.speeds[J.model[r]][C.node_type] > 0, free,
                                                0), J.demand[r], J.alloc[r], row):
            out[a] = row
            free -= row
    held = 0
    for a in range(n):
        r = active[a]
        held += out[a].sum() > 0
        if np.any(out[a] != M.out_alloc[r]):
            M.out_alloc[r] = out[a]
            touch(M, r)
    return last, held


@nb.njit(ROUND_KERNEL_SIG, cache=True)
def _gavel(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """A round (module docstring): bookkeeping, the host's allocation if it is reset, then
    the grants, placed on the granted type's nodes (a job keeps its GPUs where it can); the
    round ends when its last task does (``clk[NEXT_ROUND]``). A round of failing tasks only,
    or one that grants nothing once every job is in, is followed at once by another (Gavel's
    next iteration). Memory: module constants."""
    p, N = M.params, J.arrival.shape[0]
    active = active_rows(E)
    m = C.type_gpus.shape[0]
    while True:
        if M.g[G_HOST] >= 0:
            _bookkeeping(J, M, E, active, now)
            if M.g[G_HOST] > 0:
                return HOST
        M.g[G_HOST] = 0
        order = np.arange(m)
        if not p[P_AWARE]:
            k = M.gi[0]
            order = M.gi[2 + k * m:2 + (k + 1) * m].copy()
            M.gi[0] = k + 1
        known = _scheduled(M, active)
        got = gavel_grant(M.f[known, :m], M.f[known, m:2 * m], M.g[G_TOTAL:G_TOTAL + m],
                          M.f[known, 2 * m:3 * m], _throughput(C, J, known), J.demand[known],
                          M.i[known, I_ALLOC] > 0, order, C.type_gpus, p[P_FIFO] > 0)
        grant = np.full(active.shape[0], -1, dtype=np.int64)
        k = 0
        for a in range(active.shape[0]):  # `known` is `active` without the dropped rows
            if k < known.shape[0] and active[a] == known[k]:
                grant[a] = got[k]
                k += 1
        last, held = _place(C, J, M, active, grant, now)
        if held:
            if last > now:
                E.clk[NEXT_ROUND] = min(E.clk[NEXT_ROUND], last)
            M.g[G_RETRY] = 0.0
            return PLAN
        if last > -np.inf:
            continue  # only failing tasks, each under a second: the next round follows
        if E.cnt[NXT] < N or M.g[G_RETRY] > 0:
            M.g[G_RETRY] = 0.0
            return PLAN
        M.g[G_RETRY] = 1.0


@register
@dataclass(frozen=True)
class Gavel(KernelRoundPolicy):
    """Gavel: an allocation over time fractions per (job, type), realised round by round."""

    name: ClassVar[str] = "gavel"
    summary: ClassVar[str] = "job-level heterogeneity-aware LP allocation in rounds (Gavel)"

    round_s: float = param(360.0, low=60.0, high=1800.0, help="round length (s)")
    objective: str = param("max_min", kind="choice",
                           choices=("max_min", "max_sum", "finish_time", "fifo"),
                           help="allocation: max-min fairness (LAS), max-sum throughput, "
                                "finish-time fairness, FIFO")
    aware: bool = param(True, kind="choice", choices=(True, False),
                        help="heterogeneity-aware (Gavel's _perf policies) or agnostic")
    reset_s: float = param(1920.0, low=0.0, high=7200.0,
                           help="least time between allocation resets (s; Gavel: 1920)")
    seed: int = param(0, low=0, high=2**31 - 1, kind="int", searchable=False,
                      help="Gavel's scheduler seed (agnostic type orders and FIFO draws)")
    lp: str = param("ecos", kind="choice", choices=("ecos", "highs"), searchable=False,
                    help="LP solver: ECOS, as Gavel's cvxpy (its allocations exactly), or HiGHS")
    kernel = staticmethod(_gavel)

    @property
    def short_rounds(self) -> bool:
        return True

    def memory(self, cluster: ClusterArrays, jobs: JobArrays) -> PolicyMemory:
        """Allocation, credits, deficits and flags per row; type orders and the two random
        generators' states (module constants)."""
        m = cluster.type_gpus.shape[0]
        gpus = int(cluster.node_gpus.sum())  # a round has at most one task per GPU
        mem = empty_memory(jobs, cluster.node_gpus.shape[0], params=[
            self.round_s, self.reset_s, self.aware, self.objective == "fifo", m],
            f=3 * m + 4, i=5, g=G_TOTAL + m + gpus, gi=_ran_at(m) + 1 + 2 * gpus)
        mem.g[G_END] = np.nan
        mem.i[:, I_KEPT] = -1
        states = mem.gi[2 + ORDERS * m:_ran_at(m)]
        save(random.Random(self.seed + 5), states[:_MT_WORDS])
        save(random.Random(self.seed), states[_MT_WORDS:])
        return mem

    def round_kernel(self, cluster: ClusterArrays, jobs: JobArrays, workload: Any
                     ) -> tuple[Any, PolicyMemory] | None:
        """The kernel, with each row's steps per reference second where the workload counts
        steps (Gavel's traces and workloads: whole-step rounds)."""
        made = super().round_kernel(cluster, jobs, workload)
        steps = workload.type_speed.steps_per_s if workload.type_speed is not None else None
        if made is not None and steps is not None:
            made[1].f[:, 3 * cluster.type_gpus.shape[0] + F_STEPS] = steps[workload.model]
        return made

    def allocate(self, rate: FloatArray, demand: IntArray, type_gpus: IntArray,
                 rows: IntArray, memory: PolicyMemory, jobs: JobArrays, now: float
                 ) -> FloatArray:
        """The allocation ``x`` (``(jobs, types)``) of the jobs in workload ``rows`` with
        these rates and gangs, at an allocation reset at ``now`` (module docstring)."""
        if self.objective == "finish_time":
            return self._finish_time(rate, demand, type_gpus, rows, memory, jobs, now)
        if self.objective != "fifo":
            X = rate if self.aware else np.ones_like(rate)
            return allocation(X.tobytes(), demand.tobytes(), type_gpus.tobytes(),
                               self.objective, self.lp)
        kept = memory.i[:, I_KEPT]
        at = _ran_at(type_gpus.shape[0])
        words = memory.gi[at - _MT_WORDS:at]
        draws = rng(words)
        got = fifo(rows, rate, demand, type_gpus,
                    {int(r): int(kept[r]) for r in np.flatnonzero(kept >= 0)}, self.aware, draws)
        save(draws, words)
        kept[:] = -1
        x = np.zeros((rows.shape[0], type_gpus.shape[0]))
        for a, r in enumerate(rows):
            if int(r) in got:
                x[a, got[int(r)]] = 1.0
        if not self.aware:
            for r, t in got.items():
                kept[r] = t
        return x

    def _finish_time(self, rate: FloatArray, demand: IntArray, type_gpus: IntArray,
                     rows: IntArray, memory: PolicyMemory, jobs: JobArrays, now: float
                     ) -> FloatArray:
        """Finish-time fairness's allocation, in steps where the workload counts them; it
        keeps each job's isolated time so far, steps left and isolated rate (module
        docstring)."""
        f, at = memory.f, 3 * type_gpus.shape[0]
        per_s = f[rows, at + F_STEPS]
        unit = np.where(per_s > 0, per_s, 1.0)
        left = np.where(per_s > 0, np.rint(jobs.rem[rows] * per_s), jobs.rem[rows])
        if not self.aware:  # the first type's rate everywhere (its best where it has none)
            first = np.where(rate[:, 0] > 0, rate[:, 0], rate.max(axis=1))
            rate = np.repeat(first[:, None], rate.shape[1], axis=1)
        X = rate * unit[:, None]
        seen = memory.i[rows, I_ALLOC] > 0  # in the last allocation: it progressed since
        alone = f[rows, at + F_ALONE].copy()
        alone[seen] += (f[rows, at + F_LEFT][seen] - left[seen]) / f[rows, at + F_RATE][seen]
        x, isolated = finish_time_allocation(X[:, ::-1], demand, type_gpus[::-1], left,
                                             now - jobs.arrival[rows], alone)
        f[rows, at + F_ALONE], f[rows, at + F_LEFT], f[rows, at + F_RATE] = alone, left, isolated
        return x[:, ::-1]

    def host_step(self, cluster: ClusterArrays, jobs: JobArrays, memory: PolicyMemory,
                  state: EngineState, now: float) -> None:
        """Recompute the allocation for the jobs the scheduler knows, or draw more type
        orders."""
        M, m = memory, cluster.type_gpus.shape[0]
        if int(M.g[G_HOST]) & 1:
            rows = state.active[:int(state.cnt[N_ACTIVE])]
            rows = rows[M.i[rows, I_DROP] == 0]
            model, demand = jobs.model[rows], jobs.demand[rows]
            top = cluster.speedup.shape[1] - 1
            rate = cluster.speedup[model, np.minimum(demand, top)][:, None] * cluster.speeds[
                model]
            M.f[rows, :m] = self.allocate(rate, demand, cluster.type_gpus, rows, M, jobs, now)
            M.i[rows, I_ALLOC] = 1
        if int(M.g[G_HOST]) & 2:
            words = M.gi[2 + ORDERS * m:2 + ORDERS * m + _MT_WORDS]
            shuffler = rng(words)
            orders = M.gi[2:2 + ORDERS * m].reshape(ORDERS, m)
            for k in range(ORDERS):
                types = list(range(m))
                shuffler.shuffle(types)
                orders[k] = types
            save(shuffler, words)
            M.gi[0], M.gi[1] = 0, ORDERS
        M.g[G_HOST] = -1
