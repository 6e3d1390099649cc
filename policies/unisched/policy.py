"""UniSched: leases, a reward generator and a MILP selector (papers/unisched.md §III; SPEC §3.3).

Every BE lease boundary (``be_lease_s``, the round) the selector decides which jobs run and on
which buddy cells (:mod:`policies.unisched.milp`). SLO jobs hold what they get for an SLO lease
of ``slo_lease_multiple`` BE leases, ending with a BE lease (§III-C1), and are not re-decided
before it expires; best-effort and profiler jobs hold BE leases. Rewards (§III-C2): a newly
arrived job is first a *profiler job* for ``profile_s`` on at most 2 GPUs of one node, worth
``profiler_reward``; a best-effort job is worth ``be_reward_scale / (1 + remaining time in BE
leases)`` (reciprocal of its remaining time, below the profiler reward at the default scale);
an SLO job is worth ``slo_reward * (step reward / 100) ** reward_decay`` for the deadline step
it can still meet, judged by the SR-aware duration estimate (eqs. 1, 3): remaining time at
its consolidated speed plus the expected suspend/resume overhead. Capacity its deadlines do
not need goes by the best-effort reward; an SLO job that can meet no step competes as a
best-effort job.

If the MILP finds no usable solution within ``milp_node_limit`` branch-and-bound nodes (a
work limit, so machine load never changes a decision), the previous cycle's solution is
reused for the jobs still waiting on it (the paper's cache). HiGHS decides only what the exact
method declines, and a run of N jobs asks it for at most ``milp_nodes_per_job`` x N budget
nodes of work, rounded up (:func:`policies.unisched.milp.node_cost`: what a HiGHS node of a
MILP costs); no solve gets more nodes than the work left pays for. Past that budget (not one
node of the MILP at hand left) the run decides without HiGHS: by the exact method's knapsack
optimum where no later plan certified it (:data:`policies.unisched.exact.UNPLANNED`: its
choice for the current lease is the relaxation's, which need not be the MILP's), with a
borderline deadline step read as exact arithmetic reads it (missed), and else (the exact
search's node limit) by the cache, as above. So the fallback's work is bounded per run, in
proportion to its jobs, and the same run decides the same way on any machine.

GPUs left over after the selection go, whole gangs at a time, to the other jobs in order of
urgency and reward (the MILP already fills whatever Proposition 1 allows, so this matters
only for jobs beyond ``milp_max_jobs``). Running jobs keep their nodes when they keep their
GPU count. With ``opportunistic`` (the Chronus artifact's check interval, whose
opportunistic run hands idle GPUs to waiting jobs between lease boundaries), the policy also
decides at arrivals and completions, but then only fills idle GPUs: every lease holds.

Deviations, each for the simulator's sake: the Estimator is the workload's estimate (no
iteration-count predictor); a profiler job's work counts as progress; the paper's binary lease
plan over the whole horizon is a fractional plan over doubling slots (see the MILP module);
jobs beyond ``milp_max_jobs`` (the most urgent SLO jobs by laxity, then by reward, enter)
wait for a later cycle (the Chronus artifact caps its search at 1,200 jobs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.cells import fits_cells, node_cells, place_cells
from policies.gangs import fill_in_order, gang_row
from policies.round_kernel import KernelRoundPolicy
from policies.unisched.estimate import (
    BE_LEASE,
    F_LEASE,
    MULTIPLE,
    PROFILE_S,
    F,
    expected_sr_overhead,
    expected_suspensions,
    outlook,
)
from policies.unisched.exact import BORDER, CERTIFIED, LIMIT, UNPLANNED, solve_arrays
from policies.unisched.milp import (
    NODE_LIMIT,
    NODES_PER_JOB,
    Selection,
    SelectorInput,
    charge,
    milp_variables,
    node_cost,
    selector_arrays,
    selector_input,
    solve_selector,
)
from simulator import libm
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.slo import SOFT, STRICT
from simulator.inputs.workload import Workload
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import (
    HOST,
    N_ACTIVE,
    PLAN,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    JobView,
    Layout,
    PolicyMemory,
    StateView,
    active_rows,
    empty_memory,
    gang_spread,
    touch,
)

__all__ = ["UniSched", "expected_sr_overhead", "expected_suspensions"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MAX_JOBS, HORIZON, INLINE, BUDGET = 7, 8, 9, 10  # params after the estimator's (INLINE: _exact)
# memory: per row (f) lease end, profiled seconds, reward now, work per deadline step, then each
# step's value (fixed per job, worked out once); per row (i) profiling at the last decision, cached
# cells, this decision's pick (rank, cells), gang, locked, profiling; globally (g) the next BE lease
# boundary, the last decision, when the host last solved the MILP, cache fallbacks, the last solve's
# seconds in HiGHS, HiGHS's work charged to the budget, boundaries decided past the budget without
# HiGHS and, of those, the ones with a borderline step (read strictly) and the ones past the exact
# search's node limit (the cache decides); (gi) the MILP's members and the urgency order
CELLS = 4  # cell sizes 1, 2, 4 and 8 GPUs
I = Layout(profiled=1, cached=1, cache=CELLS, rank=1, pick=CELLS, gpus=1, locked=1, profiling=1)
G = Layout(next=1, last=1, solved=1, fallbacks=1, solve_s=1, nodes=1, past=1, border=1, limit=1)
GI = Layout(count=1, rows=0)  # the members' count, then N entries each: members, order
F_PROF, F_NOW, F_WORK = F.PROF, F.NOW, F.WORK
I_PROFILED, I_CACHED, I_CACHE, I_RANK, I_PICK, I_GPUS, I_LOCKED, I_PROFILING = (
    I.PROFILED, I.CACHED, I.CACHE, I.RANK, I.PICK, I.GPUS, I.LOCKED, I.PROFILING)
G_NEXT, G_LAST, G_SOLVED, G_FALLBACKS, G_SOLVE_S = G.NEXT, G.LAST, G.SOLVED, G.FALLBACKS, G.SOLVE_S
G_NODES, G_PAST, G_BORDER, G_LIMIT = G.NODES, G.PAST, G.BORDER, G.LIMIT
GI_COUNT, GI_ROWS = GI.COUNT, GI.ROWS


@njit
def _trim(row: Any, gpus: int) -> Any:
    """A cell placement cut down to the gang's size (a round-up cell keeps its spare GPUs free)."""
    row = row.copy()
    extra = row.sum() - gpus
    for node in np.argsort(row, kind="mergesort"):
        cut = min(extra, row[node])
        row[node] -= cut
        extra -= cut
    return row


@njit
def _top_level(C: Any) -> int:
    return int(min(3, np.floor(np.log2(C.node_gpus.max()))))


@njit
def _select(C: Any, J: Any, M: Any, active: Any, now: float, gpus: Any, locked: Any,
            work: Any, order: Any, free: Any) -> bool:
    """Picks for this BE lease boundary (``memory.i`` rank and cells): everyone consolidated
    if all fit (the MILP's optimum, without the solver), else the host's solution. False if
    the host must solve first (the MILP's members and the order are left in ``memory.gi``)."""
    N, top = J.arrival.shape[0], _top_level(C)
    members = np.zeros(active.shape[0], dtype=np.int64)
    k = 0
    for a in order:
        reach = False
        for f in range(work.shape[1]):
            reach = reach or np.isfinite(work[a, f])
        if (not locked[a] or reach) and k < M.params[MAX_JOBS]:
            members[k] = a
            k += 1
    members = np.sort(members[:k])
    taken = np.zeros(4, dtype=np.int64)
    for a in members:
        if not locked[a]:
            taken += _consolidated(gpus[a], top)
    if fits_cells(taken, node_cells(free).sum(axis=0)):
        for a in range(active.shape[0]):
            r = active[a]
            M.i[r, I_RANK] = M.i[r, I_CACHED] = 0
        for rank, a in enumerate(members[~locked[members]]):
            r = active[a]
            M.i[r, I_RANK], M.i[r, I_CACHED] = rank + 1, 1
            M.i[r, I_PICK:I_PICK + CELLS] = _consolidated(gpus[a], top)
            M.i[r, I_CACHE:I_CACHE + CELLS] = M.i[r, I_PICK:I_PICK + CELLS]
        return True
    if M.g[G_SOLVED] == now:
        return True
    M.gi[GI_COUNT] = k
    M.gi[GI_ROWS:GI_ROWS + k] = active[members]
    M.gi[GI_ROWS + N:GI_ROWS + N + active.shape[0]] = active[order]
    return False


@njit
def _exact(C: Any, J: Any, M: Any, active: Any, now: float, free: Any) -> bool:
    """The selector's answer for the MILP's members ``_select`` left in ``memory.gi``, by the
    exact method in the kernel: the same input :meth:`UniSched.host_step` builds, without
    a call back to Python at each boundary. False where HiGHS must decide (the host step);
    past the run's HiGHS budget the knapsack's uncertified optimum is taken here instead."""
    p, steps = M.params, J.deadlines.shape[1]
    value = F_WORK + steps  # each step's value follows its work
    members = M.gi[GI_ROWS:GI_ROWS + M.gi[GI_COUNT]].copy()
    work = M.f[members, F_WORK:F_WORK + steps]
    deadline = J.deadlines[members] - now
    cells, job, phi, slot_s, free_now, free_later = selector_arrays(
        C.node_gpus, gang_spread(C, J.model[members], M.i[members, I_GPUS]),
        M.i[members, I_GPUS], M.i[members, I_PROFILING] > 0, work, deadline, free,
        p[BE_LEASE] * p[MULTIPLE], int(p[HORIZON]))
    size = milp_variables(job, work, deadline, slot_s.shape[0])
    spent = M.g[G_NODES] + node_cost(size) > p[BUDGET]  # not one node of this MILP left
    verdict, choice, _, _, border = _judge(
        spent, cells, job, phi, M.f[members, F_NOW], M.i[members, I_LOCKED] == 0, work,
        deadline, M.f[members, value:value + steps], slot_s, free_now, free_later)
    if verdict == CERTIFIED or (spent and verdict == UNPLANNED):  # border: only when spent
        _count(M, spent, verdict, border)
        _take(M, active, members, choice, cells, now)
        return True
    return False  # HiGHS decides, or past the budget the host step's cache


@njit
def _judge(spent: bool, cells: Any, job: Any, phi: Any, now_value: Any, may_start: Any,
           work: Any, deadline: Any, value: Any, slot_s: Any, free_now: Any, free_later: Any
           ) -> tuple[int, Any, Any, float, bool]:
    """The exact method's verdict, choice, steps and objective (``solve_arrays``), and
    whether a step was borderline: past the run's HiGHS budget (``spent``) such a step is read
    as exact arithmetic reads it, where HiGHS would otherwise judge it."""
    verdict, choice, step, total = solve_arrays(cells, job, phi, now_value, may_start, work,
                                                deadline, value, slot_s, free_now, free_later,
                                                False)
    if not (spent and verdict == BORDER):
        return verdict, choice, step, total, False
    verdict, choice, step, total = solve_arrays(cells, job, phi, now_value, may_start, work,
                                                deadline, value, slot_s, free_now, free_later,
                                                True)
    return verdict, choice, step, total, True


@njit
def _count(M: Any, spent: bool, verdict: int, border: bool) -> None:
    """A boundary past the budget in the memory's counters: decided without HiGHS and not
    certified, with a borderline step, past the exact search's node limit."""
    if spent:
        M.g[G_PAST] += verdict != CERTIFIED or border
        M.g[G_BORDER] += border
        M.g[G_LIMIT] += verdict == LIMIT


@njit
def _take(M: Any, active: Any, members: Any, choice: Any, cand_cells: Any, now: float) -> None:
    """The selector's picks as this boundary's ranks (member order) and the cells cached."""
    M.i[active, I_RANK] = 0
    M.i[active, I_CACHED] = 0
    rank = 0
    for k in range(members.shape[0]):
        if choice[k] >= 0:
            r, rank = members[k], rank + 1
            M.i[r, I_RANK], M.i[r, I_CACHED] = rank, 1
            M.i[r, I_PICK:I_PICK + CELLS] = cand_cells[choice[k]]
            M.i[r, I_CACHE:I_CACHE + CELLS] = cand_cells[choice[k]]
    M.g[G_SOLVED] = now


@njit
def _consolidated(gpus: int, top: int) -> Any:
    """The smallest cell multiset holding the gang in one piece (``candidates(...)[0]``)."""
    out = np.zeros(4, dtype=np.int64)
    size = 2 ** top
    if gpus <= size:
        out[int(np.ceil(np.log2(gpus)))] = 1
    else:
        out[top] = -(-gpus // size)
    return out


@njit
def _place(C: Any, J: Any, M: Any, active: Any, locked: Any, order: Any, free: Any) -> None:
    """Nodes for the picked cells; continuing jobs stay put; leftovers filled by reward."""
    gpus = M.i[:, I_GPUS]
    picks = np.array([r for r in active if M.i[r, I_RANK] > 0], dtype=np.int64)
    picks = picks[np.argsort(M.i[picks, I_RANK], kind="mergesort")]
    stay = np.array([r for r in picks if J.alloc[r].sum() == gpus[r]], dtype=np.int64)
    fill_in_order(M.out_alloc, free, stay, gpus, J.alloc)
    new = np.array([r for r in picks if not np.any(M.out_alloc[r] != 0)], dtype=np.int64)
    if new.size:
        rows, ok = place_cells(free, M.i[new, I_PICK:I_PICK + CELLS].copy())
        none, row = np.zeros_like(free), np.zeros_like(free)
        for j, r in enumerate(new):
            fits = ok[j]
            if fits:
                row[:] = _trim(rows[j], gpus[r])
                fits = not np.any(row > free)
            if fits or gang_row(free, gpus[r], none, row):
                M.out_alloc[r, :] = row
                free -= row
    rest = np.array([active[a] for a in order if not locked[a] and M.i[active[a], I_RANK] == 0],
                    dtype=np.int64)
    fill_in_order(M.out_alloc, free, rest, gpus, J.alloc)


@njit_lazily(ROUND_KERNEL_SIG)
def _unisched(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Select jobs and cells at a BE lease boundary; between boundaries only fill idle GPUs."""
    p, active = M.params, active_rows(E)
    n = active.shape[0]
    boundary = now >= M.g[G_NEXT] - 1e-6
    boundary_next = now + p[BE_LEASE] if boundary else M.g[G_NEXT]
    last = now if np.isnan(M.g[G_LAST]) else M.g[G_LAST]
    profiled, profiling, locked = np.empty(n), np.empty(n, np.bool_), np.empty(n, np.bool_)
    free = C.node_gpus.copy()
    for a in range(n):
        r = active[a]
        profiled[a] = M.f[r, F_PROF] + now - last if M.i[r, I_PROFILED] else M.f[r, F_PROF]
        profiling[a] = profiled[a] < p[PROFILE_S] - 1e-6
        locked[a] = M.f[r, F_LEASE] > now + 1e-6 and J.held[r] > 0
        if locked[a]:
            free -= J.alloc[r]
    gpus, now_value, work, _, order = outlook(C, J, M, active, now, profiling, locked)
    for a in range(n):
        r = active[a]
        M.i[r, I_GPUS], M.i[r, I_LOCKED], M.i[r, I_PROFILING] = gpus[a], locked[a], profiling[a]
        M.f[r, F_NOW] = now_value[a]
        M.f[r, F_WORK:F_WORK + work.shape[1]] = work[a]
    if boundary:
        if not (_select(C, J, M, active, now, gpus, locked, work, order, free.copy())
                or (p[INLINE] > 0 and _exact(C, J, M, active, now, free))):
            return HOST
        for a in range(n):
            if not locked[a]:
                M.out_alloc[active[a], :] = 0
                touch(M, active[a])
        _place(C, J, M, active, locked, order, free)
    else:  # the artifact's opportunistic run: every lease holds, idle GPUs go by reward
        for r in fill_in_order(M.out_alloc, C.node_gpus - E.node_used, active[order],
                               M.i[:, I_GPUS], J.alloc):
            touch(M, r)
    # SLO jobs (past profiling) that start a lease hold it for m BE leases; it ends with a
    # BE lease (§III-C1), so one started between boundaries ends m - 1 leases after the next
    end = boundary_next + (p[MULTIPLE] - 1) * p[BE_LEASE]
    for a in range(n):
        r = active[a]
        held = np.any(M.out_alloc[r] != 0)
        slo = (J.job_class[r] == STRICT or J.job_class[r] == SOFT) and not profiling[a]
        if not locked[a]:
            if slo and held and (boundary or J.held[r] == 0):
                M.f[r, F_LEASE] = end
            elif not held or boundary:
                M.f[r, F_LEASE] = -np.inf
        M.f[r, F_PROF] = profiled[a]
        M.i[r, I_PROFILED] = profiling[a] and held
    M.g[G_NEXT], M.g[G_LAST], M.g[G_SOLVED] = boundary_next, now, -np.inf
    return PLAN



def be_reward_scale() -> Any:
    """``be_reward_scale`` of every policy with UniSched's rewards."""
    return param(1.0, low=1e-3, high=100.0, log=True,
                 help="best-effort reward = scale / (1 + leases left)")

@register
@dataclass(frozen=True)
class UniSched(KernelRoundPolicy):
    """UniSched's lease-based, reward-maximising scheduler (module docstring)."""

    name = "unisched"
    summary = "leases + rewards + MILP job and buddy-cell selection (SLO and best-effort)"
    be_lease_s: float = param(300.0, low=30.0, high=3600.0, log=True,
                              help="BE lease = round length, s (UniSched: 300)")
    slo_lease_multiple: int = param(2, low=1, high=12, kind="int",
                                    help="SLO lease in BE leases (UniSched: 10 min = 2)")
    slo_reward: float = param(100.0, low=1.0, high=1e4, log=True,
                              help="reward of meeting an SLO job's first deadline")
    be_reward_scale: float = be_reward_scale()
    profiler_reward: float = param(1.0, low=0.0, high=100.0,
                                   help="reward of a profiler job (above any BE job)")
    reward_decay: float = param(1.0, low=0.0, high=4.0,
                                help="soft-SLO step worth slo_reward * (reward/100)^decay")
    profile_s: float = param(300.0, low=0.0, high=3600.0,
                             help="profiling phase of a new job on <= 2 GPUs, s (0: none)")
    horizon_slots: int = param(6, low=1, high=12, kind="int", searchable=False,
                               help="plan-ahead slots of the MILP (doubling lengths)")
    milp_max_jobs: int = param(1000, low=10, high=5000, kind="int", log=True, searchable=False,
                               help="most urgent / rewarding jobs given to the MILP")
    opportunistic: bool = param(True, kind="choice", choices=(True, False),
                                help="fill idle GPUs at arrivals and completions in between")
    milp_node_limit: int = param(NODE_LIMIT, low=0, high=10**7, kind="int", searchable=False,
                                 help="HiGHS nodes per MILP (cache past it without a solution)")
    milp_nodes_per_job: float = param(NODES_PER_JOB, low=0.0, high=10_000.0, searchable=False,
                                      help="HiGHS work per job of a run, in nodes of a "
                                           "1,000-variable MILP (past it: the exact method)")

    SLO_ONLY: ClassVar[tuple[str, ...]] = ("slo_lease_multiple", "slo_reward", "reward_decay")
    """Parameters read only for strict and soft SLO jobs (their lease, step values)."""

    @classmethod
    def inapplicable(cls, workload: Workload, profile: ClusterProfile) -> dict[str, str]:
        """The SLO-only parameters, on a workload without strict or soft SLO jobs."""
        slos = workload.slos
        if slos is not None and np.isin(slos.job_class, (STRICT, SOFT)).any():
            return {}
        return dict.fromkeys(cls.SLO_ONLY, "the workload has no SLO jobs")

    @property
    def round_s(self) -> float:
        return self.be_lease_s

    @property
    def slo_lease_s(self) -> float:
        """The SLO lease, s."""
        return self.be_lease_s * self.slo_lease_multiple

    @property
    def reacts(self) -> bool:
        return self.opportunistic

    kernel = staticmethod(_unisched)
    layouts: ClassVar[dict[str, Layout]] = {"f": F, "i": I, "g": G, "gi": GI}

    def memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """Leases, profiling, the MILP's cache and scratch (module constants)."""
        n, steps = jobs.arrival.shape[0], jobs.deadlines.shape[1]
        mem = empty_memory(jobs, cluster.node_gpus.shape[0], params=[
            self.be_lease_s, self.slo_lease_multiple, self.slo_reward, self.be_reward_scale,
            self.profiler_reward, self.reward_decay, self.profile_s, self.milp_max_jobs,
            self.horizon_slots, self.inline, math.ceil(self.milp_nodes_per_job * n)],
            f=F.width + 2 * steps, i=I, g=G, gi=GI.width + 2 * n)
        mem.f[:, F_LEASE] = -np.inf
        value = F_WORK + steps  # each step's value follows its work
        mem.f[:, value:value + steps] = self.slo_reward * libm.power(
            jobs.rewards / 100.0, self.reward_decay)
        mem.g[G_NEXT], mem.g[G_LAST], mem.g[G_SOLVED], mem.g[G_SOLVE_S] = (-np.inf, np.nan,
                                                                           -np.inf, np.nan)
        return mem

    def host_step(self, cluster: ClusterArrays, jobs: JobView, memory: PolicyMemory,
                  state: StateView, now: float) -> None:
        """Solve the selector MILP (HiGHS, within the run's node budget) for this boundary and
        leave its picks in memory; if it finds no usable solution, or the budget is spent and
        the exact method has no choice, reuse the last cycle's cells (the paper's cache)."""
        M, n, N = memory, int(state.cnt[N_ACTIVE]), jobs.arrival.shape[0]
        active = state.active[:n]
        members = M.gi[GI_ROWS:GI_ROWS + M.gi[GI_COUNT]].copy()
        order = M.gi[GI_ROWS + N:GI_ROWS + N + n].copy()
        locked = M.i[active, I_LOCKED].astype(bool)
        free = cluster.node_gpus - jobs.alloc[active[locked]].sum(axis=0)
        steps = jobs.deadlines.shape[1]
        value = F_WORK + steps
        inp = selector_input(
            cluster, gpus=M.i[members, I_GPUS], model=jobs.model[members],
            profiling=M.i[members, I_PROFILING] > 0,
            now_value=M.f[members, F_NOW], may_start=M.i[members, I_LOCKED] == 0,
            work_s=M.f[members, F_WORK:F_WORK + steps],
            deadline_s=jobs.deadlines[members] - now,
            step_value=M.f[members, value:value + steps],
            node_free=free, lease_s=self.slo_lease_s, slots=self.horizon_slots)
        sel = self._budgeted(inp, M)
        M.g[G_SOLVE_S] = sel.solve_s
        if sel.usable:
            _take(M, active, members, sel.choice, inp.cand_cells, now)
            return
        M.g[G_FALLBACKS] += 1
        M.i[active, I_RANK] = 0
        taken, rank = np.zeros(4, dtype=np.int64), 0
        for r in order:
            cells = M.i[r, I_CACHE:I_CACHE + CELLS]
            if (M.i[r, I_LOCKED] or not M.i[r, I_CACHED]
                    or int(cells @ (1, 2, 4, 8)) < M.i[r, I_GPUS]):
                continue
            if fits_cells(taken + cells, inp.free_now):
                taken, rank = taken + cells, rank + 1
                M.i[r, I_RANK] = rank
                M.i[r, I_PICK:I_PICK + CELLS] = cells
        M.g[G_SOLVED] = now

    @property
    def inline(self) -> bool:
        """Whether the kernel answers with the exact method itself, calling the host step
        only for HiGHS: not where a subclass records or times each selection."""
        return (type(self).select is UniSched.select
                and type(self).host_step is UniSched.host_step)

    def _budgeted(self, inp: SelectorInput, M: PolicyMemory) -> Selection:
        """:meth:`select` within the run's HiGHS budget (charged to ``M``: :func:`charge`);
        past it the exact method's choice, certified or not (none: the cache decides)."""
        left = int(M.params[BUDGET] - M.g[G_NODES])
        cost = node_cost(milp_variables(inp.cand_job, inp.work_s, inp.deadline_s, inp.slot_s.size))
        if left >= cost:
            sel = self.select(inp, min(self.milp_node_limit, left // cost))
            if not sel.exact:
                M.g[G_NODES] += charge(sel)
            return sel
        verdict, choice, step, total, border = _judge(
            True, inp.cand_cells, inp.cand_job, inp.cand_phi, inp.now_value, inp.may_start,
            inp.work_s, inp.deadline_s, inp.step_value, inp.slot_s, inp.free_now,
            inp.free_later)
        _count(M, True, verdict, border)
        if verdict not in (CERTIFIED, UNPLANNED):
            none = np.full(inp.now_value.shape[0], -1, dtype=np.int64)
            return Selection(none, none, float("nan"), 0, False, 0.0, exact=True)
        return Selection(choice, step, total, status=0, usable=True, solve_s=0.0, exact=True)

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        """The selector's answer for one boundary, HiGHS given at most ``node_limit`` nodes
        (a subclass may record or time it)."""
        return solve_selector(inp, node_limit=node_limit)

    @staticmethod
    def lease_ends(memo: dict[str, Any]) -> dict[int, float]:
        """The SLO leases held after the last decision of a run of ``plan`` calls sharing
        ``memo``: workload row -> lease end (s)."""
        ends = memo["kernel_memory"].f[:, F_LEASE]
        return {int(r): float(ends[r]) for r in np.flatnonzero(np.isfinite(ends))}
