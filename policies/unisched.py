"""UniSched: leases, a reward generator and a MILP selector (papers/unisched.md §III; SPEC §3.3).

Every BE lease boundary (``be_lease_s``, the round) the selector decides which jobs run and on
which buddy cells (:mod:`policies.unisched_milp`). SLO jobs hold what they get for an SLO lease
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

If the MILP finds no solution within ``milp_time_limit_s``, the previous cycle's solution is
reused for the jobs still waiting on it (the paper's cache). GPUs left over after the
selection go, whole gangs at a time, to the other jobs in order of urgency and reward (the
MILP already fills whatever Proposition 1 allows, so this matters only for jobs beyond
``milp_max_jobs``). Running jobs keep their nodes when they keep their GPU count. With
``opportunistic`` (the Chronus artifact's check interval, whose opportunistic run hands idle
GPUs to waiting jobs between lease boundaries), the policy also decides at arrivals and
completions, but then only fills idle GPUs: every lease holds.

Deviations, each for the simulator's sake: the Estimator is the workload's estimate (no
iteration-count predictor); a profiler job's work counts as progress; the paper's binary lease
plan over the whole horizon is a fractional plan over doubling slots (see the MILP module);
jobs beyond ``milp_max_jobs`` (the most urgent SLO jobs by laxity, then by reward, enter)
wait for a later cycle (the Chronus artifact caps its search at 1,200 jobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy, param, register
from policies.cells import fits_cells, place_cells
from policies.gangs import fill_in_order, place_gang
from policies.unisched_estimate import Outlook, expected_sr_overhead, expected_suspensions
from policies.unisched_milp import Selection, solve_selector
from simulator.profile import ClusterProfile
from simulator.rounds import RoundState
from simulator.slo import SOFT, STRICT
from simulator.workload import Workload

__all__ = ["UniSched", "expected_sr_overhead", "expected_suspensions"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@register
@dataclass(frozen=True)
class UniSched(RoundPolicy):
    """UniSched's lease-based, reward-maximising scheduler (module docstring)."""

    name = "unisched"
    summary = "leases + rewards + MILP job and buddy-cell selection (SLO and best-effort)"
    be_lease_s: float = param(300.0, low=30.0, high=3600.0, log=True,
                              help="BE lease = round length, s (UniSched: 300)")
    slo_lease_multiple: int = param(2, low=1, high=12, kind="int",
                                    help="SLO lease in BE leases (UniSched: 10 min = 2)")
    slo_reward: float = param(100.0, low=1.0, high=1e4, log=True,
                              help="reward of meeting an SLO job's first deadline")
    be_reward_scale: float = param(1.0, low=1e-3, high=100.0, log=True,
                                   help="best-effort reward = scale / (1 + leases left)")
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
    milp_time_limit_s: float = param(10.0, low=1e-4, high=600.0, searchable=False,
                                      help="MILP time budget per cycle, s (cache on timeout)")

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

    def plan(self, state: RoundState) -> IntArray:
        """Select jobs and cells at a BE lease boundary; between boundaries only fill idle GPUs."""
        memo, now = state.memo, state.now
        leases: dict[int, float] = memo.setdefault("lease_end", {})
        boundary = now >= memo.get("next_boundary", -np.inf) - 1e-6
        if boundary:
            memo["next_boundary"] = now + self.be_lease_s
        locked = np.array([leases.get(int(r), -np.inf) > now + 1e-6 for r in state.rows],
                          dtype=bool) & (state.alloc.sum(axis=1) > 0)
        profiling = self._profiling(state)
        jobs = Outlook.build(self, state, locked, profiling)
        if boundary:
            picked, sel = self._select(state, jobs, locked)
            out = self._place(state, jobs, locked, picked)
            if sel is not None:
                memo.setdefault("solve_s", []).append(sel.solve_s)
        else:  # the artifact's opportunistic run: every lease holds, idle GPUs go by reward
            out = state.alloc.copy()
            free = state.cluster.node_gpus - out.sum(axis=0)
            fill_in_order(out, free, jobs.order, jobs.gpus, state.alloc)
        # SLO jobs (past profiling) that start a lease hold it for m BE leases; it ends with
        # a BE lease (§III-C1), so one started between boundaries ends m - 1 leases after next
        slo = np.isin(state.job_class, (STRICT, SOFT)) & ~profiling
        held = out.sum(axis=1) > 0
        end = memo["next_boundary"] + (self.slo_lease_multiple - 1) * self.be_lease_s
        started = held & (boundary | (state.alloc.sum(axis=1) == 0))
        for i in np.flatnonzero(~locked):
            row = int(state.rows[i])
            if slo[i] and started[i]:
                leases[row] = end
            elif not held[i] or boundary:
                leases.pop(row, None)
        memo["profiling_rows"] = {int(r) for r in state.rows[profiling & held]}
        memo["last_now"] = now
        active = set(state.rows.tolist())
        memo["lease_end"] = {r: t for r, t in leases.items() if r in active}
        return out

    def _profiling(self, state: RoundState) -> npt.NDArray[np.bool_]:
        """Jobs still in their profiling phase; credits the last lease's profiling."""
        done: dict[int, float] = state.memo.setdefault("profiled_s", {})
        last = state.memo.get("last_now", state.now)
        for r in state.memo.get("profiling_rows", ()):
            done[r] = done.get(r, 0.0) + state.now - last
        active = set(state.rows.tolist())
        state.memo["profiled_s"] = done = {r: s for r, s in done.items() if r in active}
        seen = np.array([done.get(int(r), 0.0) for r in state.rows])
        return seen < self.profile_s - 1e-6

    def _select(self, state: RoundState, jobs: Outlook, locked: npt.NDArray[np.bool_]
                ) -> tuple[dict[int, IntArray], Selection | None]:
        """Cells for each chosen job: the MILP's answer, or the cached one on a timeout."""
        memo = state.memo
        inp, members = jobs.selector_input(state, locked, self)
        cache: dict[int, tuple[int, ...]] = memo.setdefault("cache", {})
        picked: dict[int, IntArray] = {}
        first = np.searchsorted(inp.cand_job, np.arange(members.size))
        starting = first[inp.may_start]
        if fits_cells(inp.cand_cells[starting].sum(axis=0), inp.free_now):
            # everyone fits consolidated now, so every job runs at full speed from now on:
            # the MILP's optimum, without the solver
            for k in np.flatnonzero(inp.may_start):
                picked[int(members[k])] = inp.cand_cells[first[k]]
            memo["cache"] = {int(state.rows[i]): tuple(c) for i, c in picked.items()}
            return picked, None
        sel = solve_selector(inp, time_limit_s=self.milp_time_limit_s)
        if sel.usable:
            for k in np.flatnonzero(sel.choice >= 0):
                picked[int(members[k])] = inp.cand_cells[sel.choice[k]]
            memo["cache"] = {int(state.rows[i]): tuple(c) for i, c in picked.items()}
            return picked, sel
        memo["fallbacks"] = memo.get("fallbacks", 0) + 1
        taken = np.zeros(4, dtype=np.int64)  # the paper's cache: last cycle's cells, if they fit
        for i in jobs.order:
            cells = cache.get(int(state.rows[i]))
            if locked[i] or cells is None or sum(np.array(cells) * [1, 2, 4, 8]) < jobs.gpus[i]:
                continue
            if fits_cells(taken + cells, inp.free_now):
                taken += cells
                picked[int(i)] = np.array(cells, dtype=np.int64)
        return picked, sel

    def _place(self, state: RoundState, jobs: Outlook, locked: npt.NDArray[np.bool_],
               picked: dict[int, IntArray]) -> IntArray:
        """Nodes for the chosen cells; continuing jobs stay put; leftovers filled by reward."""
        out = np.zeros_like(state.alloc)
        out[locked] = state.alloc[locked]
        free = state.cluster.node_gpus - out.sum(axis=0)
        stay = np.array([i for i in picked if int(state.alloc[i].sum()) == jobs.gpus[i]],
                        dtype=np.int64)
        fill_in_order(out, free, stay, jobs.gpus, state.alloc)
        new = [i for i in picked if not out[i].any()]
        if new:
            rows = place_cells(free, np.array([picked[i] for i in new]))
            for i, row in zip(new, rows, strict=True):
                row = _trim(row, int(jobs.gpus[i])) if row is not None else None
                if row is None or (row > free).any():
                    row = place_gang(free, int(jobs.gpus[i]))
                if row is not None:
                    out[i] = row
                    free -= row
        rest = np.array([i for i in jobs.order if not locked[i] and i not in picked],
                        dtype=np.int64)
        fill_in_order(out, free, rest, jobs.gpus, state.alloc)
        return out


def _trim(row: IntArray, gpus: int) -> IntArray:
    """A cell placement cut down to the gang's size (a round-up cell keeps its spare GPUs free)."""
    row = row.copy()
    extra = int(row.sum()) - gpus
    for node in np.argsort(row, kind="stable"):
        cut = min(extra, int(row[node]))
        row[node] -= cut
        extra -= cut
    return row
