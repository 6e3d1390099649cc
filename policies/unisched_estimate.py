"""UniSched's Estimator and reward generator (papers/unisched.md §III-B, §III-C2).

At each decision, for every active job: its GPUs (at most 2 while profiling), its speed at the
consolidated allocation, its reward for running now, and, for SLO jobs, the work each deadline
step needs by the SR-aware duration estimate (eqs. 1, 3) - everything the selector MILP
(:mod:`policies.unisched_milp`) is built from.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, comb, floor
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from policies.cells import candidates, node_cells
from policies.unisched_milp import SelectorInput
from simulator.rounds import RoundState
from simulator.slo import PROFILER, SOFT, STRICT

if TYPE_CHECKING:
    from policies.unisched import UniSched

__all__ = ["Outlook", "expected_sr_overhead", "expected_suspensions"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def expected_sr_overhead(n_leases: int, deadline_leases: int, t_sr: float, *,
                         best_effort: bool = False) -> float:
    """Expected suspend/resume overhead of a job needing ``n_leases`` leases (eq. 3).

    An SLO job that must run ``n`` of the ``m`` leases before its deadline, each schedule
    equally likely, is suspended once between consecutive runs of leases: with ``k + 1`` runs
    (``C(n-1, k) C(m-n+1, k+1)`` of the ``C(m, n)`` schedules) it pays ``k`` times ``t_sr``.
    A best-effort job, with no deadline to bound it, is charged ``n / 2`` suspensions.

    Args:
        n_leases: leases of work the job needs (n >= 1).
        deadline_leases: leases until its deadline (m >= n); ignored for best-effort jobs.
        t_sr: seconds one suspension and resumption cost together.
        best_effort: use the best-effort rule.
    """
    n, m = n_leases, deadline_leases
    if n < 1:
        raise ValueError(f"a job needs at least one lease (got {n})")
    if best_effort:
        return n / 2 * t_sr
    if m < n:
        raise ValueError(f"{n} leases cannot fit before a deadline {m} leases away")
    total = comb(m, n)
    return t_sr * sum(k * comb(n - 1, k) * comb(m - n + 1, k + 1)
                      for k in range(min(n - 1, m - n) + 1)) / total


def expected_suspensions(n: int, m: int) -> float:
    """Eq. 3 divided by ``t_sr``, in closed form: ``n (m - n + 1) / m - 1``.

    The ``n`` leases fall into ``k + 1`` runs; a lease starts a run when the lease before it
    is not taken, so the expected number of runs is ``n/m + (m - 1) (n/m) (m - n)/(m - 1)``.
    """
    return n * (m - n + 1) / m - 1.0


@dataclass(frozen=True, eq=False)
class Outlook:
    """What the reward generator and the Estimator say about each active job.

    Attributes:
        gpus: GPUs the job runs on now (at most 2 while profiling).
        rate: reference work per second at the consolidated allocation (eq. 8's ``A*``).
        now_value: reward for running in the current lease (profiler / best-effort rule).
        work_s: ``(jobs, steps)`` SR-aware seconds at ``rate`` still needed (eqs. 1, 3),
            less what a held SLO lease will still do; inf: the step is out of reach; NaN: no
            such step or it has passed. Equal across a job's steps.
        deadline_s: ``(jobs, steps)`` deadlines, seconds from now.
        step_value: ``(jobs, steps)`` ``slo_reward * (reward / 100) ** reward_decay``.
        order: most deserving first: SLO jobs that can still meet a step by laxity, then the
            rest by ``now_value``.
        profiling: jobs in their profiling phase.
    """

    gpus: IntArray
    rate: FloatArray
    now_value: FloatArray
    work_s: FloatArray
    deadline_s: FloatArray
    step_value: FloatArray
    order: IntArray
    profiling: npt.NDArray[np.bool_]

    @classmethod
    def build(cls, p: UniSched, state: RoundState, locked: npt.NDArray[np.bool_],
              profiling: npt.NDArray[np.bool_]) -> Outlook:
        """Rewards (§III-C2) and SR-aware durations (eqs. 1, 3) at this decision."""
        cl = state.cluster
        gpus = np.where(profiling, np.minimum(state.demand, 2), state.demand).astype(np.int64)
        spread = state.demand > cl.node_gpus.max()
        rate = state.gang_rates().min(axis=1) * np.where(spread, cl.inter_node_factor, 1.0)
        left_s = state.est_remaining.clip(0.0) / rate
        now_value = np.where(profiling | (state.job_class == PROFILER), p.profiler_reward,
                             p.be_reward_scale * p.be_lease_s / (left_s + p.be_lease_s))
        deadline = state.deadlines_s - state.now
        slo = np.isin(state.job_class, (STRICT, SOFT)) & ~profiling
        work = np.full(deadline.shape, np.nan)
        rate_now = state.rate(state.alloc)
        leases: dict[int, float] = state.memo.get("lease_end", {})
        for i in np.flatnonzero(slo):
            credit = 0.0
            if locked[i]:  # work its running lease still does, in consolidated seconds
                credit = (leases[int(state.rows[i])] - state.now) * rate_now[i] / rate[i]
            ahead = np.flatnonzero(deadline[i] > 0)
            if not ahead.size:
                continue
            # eq. 3 over the leases to the next deadline; the later (soft) steps need the same
            n = max(1, ceil(left_s[i] / p.slo_lease_s))
            m = max(n, floor(deadline[i, ahead[0]] / p.slo_lease_s))
            need = max(left_s[i] + cl.restart_s * expected_suspensions(n, m) - credit, 0.0)
            work[i, ahead] = np.where(need <= deadline[i, ahead], need, np.inf)
        value = p.slo_reward * (state.rewards / 100.0) ** p.reward_decay
        reach = np.isfinite(work)
        laxity = np.where(reach, deadline - np.nan_to_num(work, posinf=0.0), np.inf).min(
            axis=1, initial=np.inf)
        order = np.lexsort((-now_value, laxity))
        return cls(gpus, rate, now_value, work, deadline, value, order.astype(np.int64),
                   profiling)

    def selector_input(self, state: RoundState, locked: npt.NDArray[np.bool_], p: UniSched
                       ) -> tuple[SelectorInput, IntArray]:
        """The MILP for the jobs up for decision (and locked ones that still need leases)."""
        reach = np.isfinite(self.work_s).any(axis=1)
        keep = self.order[(~locked | reach)[self.order]][: p.milp_max_jobs]
        members = np.sort(keep)
        cl = state.cluster
        top = int(min(3, np.floor(np.log2(cl.node_gpus.max()))))
        cells, owner, phi = [], [], []
        for k, i in enumerate(members):
            options = candidates(int(self.gpus[i]), top)[:1 if self.profiling[i] else None]
            cells.append(options)
            owner.append(np.full(options.shape[0], k))
            whole = (np.arange(options.shape[0]) == 0) | (self.gpus[i] > 2 ** top)
            phi.append(np.where(whole, 1.0, cl.inter_node_factor))
        node_free = cl.node_gpus - np.where(locked[:, None], state.alloc, 0).sum(axis=0)
        dl = self.deadline_s[members]
        horizon = float(np.where(np.isfinite(self.work_s[members]), dl, 0.0).max(initial=0.0))
        inp = SelectorInput(
            cand_cells=np.concatenate(cells) if cells else np.zeros((0, 4), dtype=np.int64),
            cand_job=np.concatenate(owner).astype(np.int64) if owner else np.zeros(0, np.int64),
            cand_phi=np.concatenate(phi) if phi else np.zeros(0),
            now_value=self.now_value[members], may_start=~locked[members],
            work_s=self.work_s[members], deadline_s=dl, step_value=self.step_value[members],
            slot_s=_slots(p.slo_lease_s, horizon, p.horizon_slots),
            free_now=node_cells(node_free).sum(axis=0),
            free_later=node_cells(cl.node_gpus).sum(axis=0))
        return inp, members


def _slots(lease_s: float, horizon_s: float, most: int) -> FloatArray:
    """Slot lengths: one SLO lease, then doubling, the last reaching ``horizon_s``."""
    slots = [lease_s]
    while sum(slots) < horizon_s and len(slots) < most:
        slots.append(lease_s * 2 ** (len(slots) - 1))
    slots[-1] = max(slots[-1], horizon_s - sum(slots[:-1]))
    return np.array(slots)
