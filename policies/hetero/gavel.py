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
  over, outside the scheduler, and mark it dropped: the per-job metrics leave it out, as
  Gavel's averages do). Work counts in steps where the
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
- ``max_sum`` (Gavel's ``max_sum_throughput_perf``): maximize ``sum x[j, t] X[j, t]``, in
  Gavel's units: a job of many steps per second counts for more than a slow one.
- ``finish_time`` (Gavel's ``finish_time_fairness``): minimize the largest ratio of the time
  a job would take under ``x`` (time since it arrived plus its remaining steps at
  ``sum_t x[j, t] X[j, t]``) to the time it would take alone (the time its progress so far
  would have taken at its isolated rate, summed from reset to reset, plus its remaining steps
  at that rate; the isolated rate is ``X_j`` under an even split of every type over the jobs).
  A second-order cone program, solved with ECOS as cvxpy hands it to ECOS for Gavel, over the
  types in Gavel's name order (the reverse of the profile's: k80 < p100 < v100). Agnostic:
  every type at the job's rate on the profile's first (Gavel: V100; a job that cannot run
  there, which Gavel's measurements never have, at its best rate).
- ``makespan`` (Gavel's ``min_total_duration``): the allocation under which every job can
  finish its remaining steps at ``sum_t x[j, t] X[j, t]`` within the shortest makespan ``T``
  Gavel's search finds (halving ``[100 s, 1e6 s]`` to within 5 %, then the next decade while
  none is feasible: one feasibility LP per try, solved with ECOS as cvxpy hands it over, so
  ``lp`` does not apply). Agnostic: every type at the job's first-type rate, as for
  ``finish_time``.
- ``fifo``: jobs in arrival order each get one type for all their time (``x = 1``) while some
  type has room for the gang: the fastest (aware), or, agnostic, Gavel's own choice (it draws a
  random index, ``random.Random(seed)``, but takes the last type in name order that has free
  GPUs, which can overbook it; reproduced, draws included). Agnostic FIFO keeps earlier
  choices across resets.

``X[j, t]`` is the job's throughput with its gang on type ``t``: Gavel's measured steps per
second where the workload has them (Gavel's traces), else its progress rate (in steps per
second where the workload counts steps). Gavel solves the LP with
cvxpy's ECOS; so do we by default (``lp="ecos"``: the program cvxpy builds, built from
Gavel's own throughputs where the workload has them, so its allocations to the last bit:
:mod:`policies.hetero.gavel_lp`), since the LP rarely has one optimum and which one a solver
returns moves every job. ``lp="highs"`` uses HiGHS's interior point without crossover
instead (another optimum; README, fidelity table). Gavel's
simulator has no restart cost and ignores placement; on a profile that charges them, a
task that starts with a restart does its steps after the pause (its round lasts that much
longer) and a spread gang runs slower. Gavel's packing policies
(``*_packed``: pairs of jobs of one gang size time-sharing a gang at their measured
co-located rates) are not reproduced: jobs here never share a GPU, as under every Gavel
policy without packing (``horus``, ``ojpp`` and ``unified`` model co-location).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.hetero.gavel_lp import allocation, fifo, finish_time_allocation, rng, save
from policies.hetero.gavel_rounds import (
    F_ALONE,
    F_GANG,
    F_LEFT,
    F_RATE,
    F_STEPS,
    G_END,
    G_HOST,
    G_RETRY,
    G_TOTAL,
    GI,
    GI_COUNT,
    GI_CURSOR,
    GI_ORDERS,
    I_ALLOC,
    I_DROP,
    I_KEPT,
    MT_WORDS,
    ORDERS,
    P_AWARE,
    P_FIFO,
    RAN,
    S_FIFO,
    S_SHUFFLER,
    T_ALLOC,
    T_CREDIT,
    T_DEFICIT,
    T_END,
    TASK,
    F,
    G,
    I,
    bookkeeping,
    gavel_grant,
    place,
    ran_at,
    scheduled,
    states_at,
    throughput_of,
)
from policies.round_kernel import KernelRoundPolicy
from simulator.jit import njit_lazily
from simulator.rounds.view import (
    HOST,
    N_ACTIVE,
    NXT,
    PLAN,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    JobView,
    Layout,
    PolicyMemory,
    StateView,
    active_rows,
    empty_memory,
)

__all__ = ["Gavel"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
@njit_lazily(ROUND_KERNEL_SIG)
def _gavel(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """A round (module docstring): bookkeeping, the host's allocation if it is reset, then
    the grants, placed on the granted type's nodes (a job keeps its GPUs where it can); the
    round ends when its last task does (``memory.round_end``). A round of failing tasks only,
    or one that grants nothing once every job is in, is followed at once by another (Gavel's
    next iteration). Memory: the constants of :mod:`policies.hetero.gavel_rounds`."""
    p, N = M.params, J.arrival.shape[0]
    active = active_rows(E)
    m = C.type_gpus.shape[0]
    while True:
        if M.g[G_HOST] >= 0:
            bookkeeping(J, M, E, active, now)
            if M.g[G_HOST] > 0:
                return HOST
        M.g[G_HOST] = 0
        order = np.arange(m)
        if not p[P_AWARE]:
            k = M.gi[GI_CURSOR]
            at = GI_ORDERS + k * m
            order = M.gi[at:at + m].copy()
            M.gi[GI_CURSOR] = k + 1
        known = scheduled(M, active)
        got = gavel_grant(M.f[known, T_ALLOC * m:T_CREDIT * m],
                          M.f[known, T_CREDIT * m:T_DEFICIT * m], M.g[G_TOTAL:G_TOTAL + m],
                          M.f[known, T_DEFICIT * m:T_END * m], throughput_of(C, J, known),
                          J.demand[known], M.i[known, I_ALLOC] > 0, order, C.type_gpus,
                          p[P_FIFO] > 0)
        grant = np.full(active.shape[0], -1, dtype=np.int64)
        k = 0
        for a in range(active.shape[0]):  # `known` is `active` without the dropped rows
            if k < known.shape[0] and active[a] == known[k]:
                grant[a] = got[k]
                k += 1
        last, held = place(C, J, M, active, grant, now)
        if held:
            if last > now:
                M.round_end[0] = last
            M.g[G_RETRY] = 0.0
            return PLAN
        if last > -np.inf:
            continue  # only failing tasks, each under a second: the next round follows
        if E.cnt[NXT] < N or M.g[G_RETRY] > 0:
            M.g[G_RETRY] = 0.0
            return PLAN
        M.g[G_RETRY] = 1.0


def _throughputs(rate: FloatArray, rows: IntArray, memory: PolicyMemory) -> FloatArray:
    """Gavel's throughputs of the ``rows``' gangs on each type, which its programs are built
    from: the measured steps per second where the workload has them, else ``rate`` (reference
    seconds per second) in steps per second where it counts steps, else ``rate``."""
    m = rate.shape[1]
    gang = memory.f[rows, T_END * m + F_GANG:T_END * m + F_GANG + m]
    if (gang >= 0).all():
        return gang
    per_s = memory.f[rows, T_END * m + F_STEPS]
    return rate * np.where(per_s > 0, per_s, 1.0)[:, None]


def _agnostic(X: FloatArray) -> FloatArray:
    """The heterogeneity-agnostic programs' throughputs: each job's rate on the profile's
    first type everywhere (Gavel: V100; its best where it has none there)."""
    first = np.where(X[:, 0] > 0, X[:, 0], X.max(axis=1))
    return np.repeat(first[:, None], X.shape[1], axis=1)


def _left(rows: IntArray, memory: PolicyMemory, jobs: JobView, m: int) -> FloatArray:
    """The work the ``rows`` have left (``m`` types): whole steps where the workload counts
    them (Gavel's ``num_steps_remaining``), else reference seconds."""
    per_s = memory.f[rows, T_END * m + F_STEPS]
    return np.where(per_s > 0, np.rint(jobs.est[rows] * per_s), jobs.est[rows])


@register
@dataclass(frozen=True)
class Gavel(KernelRoundPolicy):
    """Gavel: an allocation over time fractions per (job, type), realised round by round."""

    name: ClassVar[str] = "gavel"
    summary: ClassVar[str] = "job-level heterogeneity-aware LP allocation in rounds (Gavel)"

    round_s: float = param(360.0, low=60.0, high=1800.0, help="round length (s)")
    objective: str = param("max_min", kind="choice",
                           choices=("max_min", "max_sum", "finish_time", "fifo", "makespan"),
                           help="allocation: max-min fairness (LAS), max-sum throughput, "
                                "finish-time fairness, FIFO, or the shortest makespan "
                                "(Gavel's min_total_duration; always ECOS)")
    aware: bool = param(True, kind="choice", choices=(True, False),
                        help="heterogeneity-aware (Gavel's _perf policies) or agnostic")
    reset_s: float = param(1920.0, low=0.0, high=7200.0,
                           help="least time between allocation resets (s; Gavel: 1920)")
    seed: int = param(0, low=0, high=2**31 - 1, kind="int", searchable=False,
                      help="Gavel's scheduler seed (agnostic type orders and FIFO draws)")
    lp: str = param("ecos", kind="choice", choices=("ecos", "highs"), searchable=False,
                    help="LP solver: ECOS, as Gavel's cvxpy (its allocations exactly), or HiGHS")
    kernel = staticmethod(_gavel)
    clairvoyant: ClassVar[bool] = True  # Gavel's simulator knows each job's steps left
    layouts: ClassVar[dict[str, Layout]] = {"f": F, "i": I, "g": G, "gi": GI}
    """``f`` starts with the per-type blocks of :data:`~policies.hetero.gavel_rounds.TYPED`."""

    @property
    def short_rounds(self) -> bool:
        return True

    def memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """Allocation, credits, deficits and flags per row; type orders and the two random
        generators' states (:mod:`policies.hetero.gavel_rounds`)."""
        m = cluster.type_gpus.shape[0]
        gpus = int(cluster.node_gpus.sum())  # a round has at most one task per GPU
        mem = empty_memory(jobs, cluster.node_gpus.shape[0], params=[
            self.round_s, self.reset_s, self.aware, self.objective == "fifo", m],
            f=T_END * m + F.width + m, i=I, g=G.width + m + gpus,
            gi=ran_at(m) + RAN.width + TASK.width * gpus)
        mem.g[G_END] = np.nan
        mem.f[:, T_END * m + F_GANG:] = -1.0  # unknown
        mem.i[:, I_KEPT] = -1
        states = mem.gi[states_at(m):ran_at(m)]
        save(random.Random(self.seed + 5), states[S_SHUFFLER:S_SHUFFLER + MT_WORDS])
        save(random.Random(self.seed), states[S_FIFO:S_FIFO + MT_WORDS])
        return mem

    def dropped(self, memory: PolicyMemory) -> npt.NDArray[np.bool_]:
        """The rows Gavel dropped (5 failed tasks in a row), from a finished run's memory."""
        return memory.i[:, I_DROP] > 0

    def round_kernel(self, cluster: ClusterArrays, jobs: JobView, workload: Any
                     ) -> tuple[Any, PolicyMemory] | None:
        """The kernel, with each row's steps per reference second where the workload counts
        steps (Gavel's traces and workloads: whole-step rounds), and its gang's measured
        steps per second on each type where the workload has them (Gavel's traces)."""
        made = super().round_kernel(cluster, jobs, workload)
        table, m = workload.type_speed, cluster.type_gpus.shape[0]
        steps = table.steps_per_s if table is not None else None
        if made is not None and steps is not None:
            made[1].f[:, T_END * m + F_STEPS] = steps[workload.model]
            gang = table.gang_columns(cluster.speeds)
            if gang is not None:
                made[1].f[:, T_END * m + F_GANG:T_END * m + F_GANG + m] = gang[workload.model]
        return made

    def allocate(self, rate: FloatArray, demand: IntArray, type_gpus: IntArray,
                 rows: IntArray, memory: PolicyMemory, jobs: JobView, now: float
                 ) -> FloatArray:
        """The allocation ``x`` (``(jobs, types)``) of the jobs in workload ``rows`` with
        these rates and gangs, at an allocation reset at ``now`` (module docstring)."""
        if self.objective == "finish_time":
            return self._finish_time(rate, demand, type_gpus, rows, memory, jobs, now)
        if self.objective == "makespan":
            X = _throughputs(rate, rows, memory)
            return allocation((X if self.aware else _agnostic(X)).tobytes(), demand.tobytes(),
                              type_gpus.tobytes(), "makespan", "ecos",
                              _left(rows, memory, jobs, rate.shape[1]).tobytes())
        if self.objective != "fifo":
            X = _throughputs(rate, rows, memory) if self.aware else np.ones_like(rate)
            return allocation(X.tobytes(), demand.tobytes(), type_gpus.tobytes(),
                              self.objective, self.lp)
        kept = memory.i[:, I_KEPT]
        at = states_at(type_gpus.shape[0]) + S_FIFO
        words = memory.gi[at:at + MT_WORDS]
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
                     rows: IntArray, memory: PolicyMemory, jobs: JobView, now: float
                     ) -> FloatArray:
        """Finish-time fairness's allocation, in steps where the workload counts them; it
        keeps each job's isolated time so far, steps left and isolated rate (module
        docstring)."""
        f, at = memory.f, T_END * type_gpus.shape[0]
        left = _left(rows, memory, jobs, type_gpus.shape[0])
        X = _throughputs(rate, rows, memory)
        if not self.aware:
            X = _agnostic(X)
        seen = memory.i[rows, I_ALLOC] > 0  # in the last allocation: it progressed since
        alone = f[rows, at + F_ALONE].copy()
        alone[seen] += (f[rows, at + F_LEFT][seen] - left[seen]) / f[rows, at + F_RATE][seen]
        x, isolated = finish_time_allocation(X[:, ::-1], demand, type_gpus[::-1], left,
                                             now - jobs.arrival[rows], alone)
        f[rows, at + F_ALONE], f[rows, at + F_LEFT], f[rows, at + F_RATE] = alone, left, isolated
        return x[:, ::-1]

    def host_step(self, cluster: ClusterArrays, jobs: JobView, memory: PolicyMemory,
                  state: StateView, now: float) -> None:
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
            M.f[rows, T_ALLOC * m:T_CREDIT * m] = self.allocate(rate, demand, cluster.type_gpus,
                                                                rows, M, jobs, now)
            M.i[rows, I_ALLOC] = 1
        if int(M.g[G_HOST]) & 2:
            at = states_at(m) + S_SHUFFLER
            words = M.gi[at:at + MT_WORDS]
            shuffler = rng(words)
            orders = M.gi[GI_ORDERS:states_at(m)].reshape(ORDERS, m)
            for k in range(ORDERS):
                types = list(range(m))
                shuffler.shuffle(types)
                orders[k] = types
            save(shuffler, words)
            M.gi[GI_CURSOR], M.gi[GI_COUNT] = 0, ORDERS
        M.g[G_HOST] = -1
