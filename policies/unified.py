"""The unified scheduler: every parameter family in one configuration (SPEC §3.7).

One frozen configuration decides, at every best-effort lease boundary:

- **who** gets GPUs - PCS's WFQ classes (``T`` derives the class thresholds from the training
  workload's estimated sizes, :func:`policies.wfq.class_thresholds`); each GPU type is shared
  between the classes by weights ``w_i ∝ exp(-W_r i)``, one exponent per type tier (``W_1``
  the fastest type, ``W_2`` the second, ``W_3`` the rest: heterogeneity). A job's gang is
  capped at the largest size whose every step keeps ``speedup(g) / g >= zeta_min`` (at least
  ``min_gpus``); GPUs the classes leave unused go to the remaining jobs with the cap relaxed
  to ``zeta_min - delta`` (PCS's two knobs, in whole GPUs);
- **when** allocations may change - leases (UniSched): decisions every ``be_lease_s``; a
  running SLO job keeps its GPUs for ``slo_lease_multiple`` BE leases; a running best-effort
  job is displaced at a lease boundary only if ``preempt`` is on (and a job that keeps
  running keeps its devices), and only when a more valuable job waits. At a boundary a running
  job whose lease is over moves to a faster GPU type with room for it when the time it saves
  beats the restart overhead (longest jobs first), so long jobs admitted last do not stay
  stranded on slow GPUs. Between boundaries the policy only fills idle capacity (arrivals and
  completions);
- in which order - rewards (UniSched): an SLO job is worth ``slo_reward`` x (reward of the
  first deadline step it can still meet / 100), a best-effort job (or an SLO job that can meet
  none) ``be_reward_scale x lease / (remaining time + lease)``; jobs are admitted in order of
  worth, so the two scalings decide how SLO jobs outrank best-effort ones;
- **where** and how tightly jobs share GPUs - OJPP's and Horus's bounds: a worker joins a
  device only if memory fits (eq. 3), cumulative utilization stays within ``overcommit``,
  the collision probability within ``tau_max`` (eq. 4), every co-located worker's predicted
  slowdown within ``theta_max`` (eq. 6) and the job's workers' slowdowns within
  ``theta_balance`` of each other (eq. 8). Without sharing data, jobs get devices of their own.

Dimensions a workload cannot use are dropped from the search (:meth:`Unified.inapplicable`):
the SLO and reward ones without SLO jobs, the bounds without sharing data, the per-type
exponents of tiers the cluster lacks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy, param, register
from policies.gangs import place_gang
from policies.ojpp_placement import Bounds, DeviceLoad, place_workers
from policies.wfq import with_classes
from policies.wfq_hetero import share_by_weight
from simulator import libm
from simulator.errors import InvalidPolicyParams
from simulator.profile import ClusterProfile
from simulator.rounds import RoundState
from simulator.sharing import can_share
from simulator.slo import SOFT, STRICT
from simulator.workload import Workload

__all__ = ["Unified"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@register
@dataclass(frozen=True)
class Unified(RoundPolicy):
    """WFQ classes, leases, rewards, per-type weights and interference bounds (module doc)."""

    name = "unified"
    summary = "WFQ classes + leases + rewards + per-type weights + interference bounds"
    shares_gpus = True
    T: float = param(1.0, low=0.001, high=1000.0, log=True,
                     help="max squared coefficient of variation of sizes within a class")
    W_1: float = param(1.0, low=-3.0, high=3.0, help="class weight exponent on the fastest type")
    W_2: float = param(1.0, low=-3.0, high=3.0, help="class weight exponent on the second type")
    W_3: float = param(1.0, low=-3.0, high=3.0,
                       help="class weight exponent on the third and slower types")
    zeta_min: float = param(0.0, low=0.0, high=1.0,
                            help="cap a gang where speedup(g)/g falls below this")
    delta: float = param(0.2, low=0.0, high=1.0, help="cap relaxation for spare GPUs")
    be_lease_s: float = param(300.0, low=30.0, high=3600.0, log=True,
                              help="BE lease = decision interval, s")
    slo_lease_multiple: int = param(2, low=1, high=12, kind="int",
                                    help="a running SLO job keeps its GPUs this many leases")
    slo_reward: float = param(100.0, low=1.0, high=1e4, log=True,
                              help="worth of an SLO job meeting its first deadline")
    be_reward_scale: float = param(1.0, low=1e-3, high=100.0, log=True,
                                   help="best-effort worth = scale x lease/(remaining + lease)")
    preempt: bool = param(True, kind="choice", choices=(True, False),
                          help="displace running best-effort jobs at lease boundaries")
    tau_max: float = param(0.1, low=0.0, high=1.0,
                           help="max memory-collision probability on a device (OJPP eq. 4)")
    theta_max: float = param(0.5, low=0.0, high=3.0,
                             help="max predicted slowdown of any worker on a device (eq. 6)")
    theta_balance: float = param(0.5, low=0.0, high=3.0,
                                 help="max spread of a job's workers' slowdowns (eq. 8)")
    overcommit: float = param(1.0, low=0.2, high=3.0,
                              help="max cumulative GPU utilization on a device (Horus)")
    thresholds: tuple[float, ...] = ()

    SLO_ONLY: ClassVar[tuple[str, ...]] = ("slo_lease_multiple", "slo_reward",
                                           "be_reward_scale")
    SHARING_ONLY: ClassVar[tuple[str, ...]] = ("tau_max", "theta_max", "theta_balance",
                                               "overcommit")

    @classmethod
    def inapplicable(cls, workload: Workload, profile: ClusterProfile) -> dict[str, str]:
        """Leases of SLO jobs and the rewards without SLO jobs; the bounds without sharing
        data; exponents of GPU-type tiers the cluster lacks."""
        out: dict[str, str] = {}
        slos = workload.slos
        if slos is None or not np.isin(slos.job_class, (STRICT, SOFT)).any():
            out |= dict.fromkeys(cls.SLO_ONLY, "the workload has no SLO jobs")
        if not can_share(workload, profile):
            out |= dict.fromkeys(cls.SHARING_ONLY, "jobs cannot share GPUs: the workload has "
                                 "no sharing data (gpu_util, gpu_mem_gib, mem_surge_gib, "
                                 "mem_surge_p) or the cluster no slowdown model")
        types = len(profile.gpus_by_type)
        for name, nth, k in (("W_2", "second", 2), ("W_3", "third", 3)):
            if types < k:
                out[name] = f"the cluster has no {nth} GPU type"
        return out

    @property
    def round_s(self) -> float:
        return self.be_lease_s

    @property
    def reacts(self) -> bool:
        return True

    def fit(self, workload: Workload) -> Self:
        """Derive the classes from the training workload's estimated sizes (no-op if known)."""
        return with_classes(self, workload)

    def plan(self, state: RoundState) -> IntArray:
        if not self.thresholds:
            raise InvalidPolicyParams("unified has no classes yet: call fit(workload)")
        memo = state.memo
        boundary = state.now >= memo.get("boundary", -math.inf) - 1e-9
        if boundary:
            memo["boundary"] = state.now + self.be_lease_s
        leases: dict[int, float] = memo.setdefault("lease_end", {})
        running = state.placed.any(axis=1)
        slo = np.isin(state.job_class, (STRICT, SOFT))
        in_lease = np.array([leases.get(int(r), -math.inf) > state.now + 1e-9
                             for r in state.rows], dtype=bool)
        worth = self._worth(state)
        best_waiting = worth[~running].max(initial=-math.inf)
        movable = boundary & ~in_lease & (slo | np.bool_(self.preempt)) & (worth < best_waiting)
        locked = running & ~movable
        may_speed_up = boundary & running & ~in_lease
        if locked.all() and not may_speed_up.any():  # nothing waits, nothing moves
            return state.placed.astype(np.int64)
        book = _Book(state, self, locked)
        order = np.lexsort((state.arrival_s, -worth))
        for relaxed in (False, True):
            for j in order:
                if not book.placed[j]:
                    book.admit(int(j), relaxed)
        for j in order[::-1]:  # longest first: they gain the most from faster GPUs
            if may_speed_up[j] and locked[j]:
                book.speed_up(int(j))
        active = set(state.rows.tolist())
        memo["lease_end"] = {r: end for r, end in leases.items() if r in active}
        for j in np.flatnonzero(book.fresh):  # a new lease from now
            memo["lease_end"][int(state.rows[j])] = state.now + self.be_lease_s * (
                self.slo_lease_multiple if slo[j] else 1)
        return book.plan.astype(np.int64)

    def bounds(self) -> Bounds:
        """Where a worker may go (OJPP's bounds, with Horus's overcommit as compute cap)."""
        return Bounds(alpha_cap=self.overcommit, tau_max=self.tau_max,
                      theta_max=self.theta_max, theta_balance=self.theta_balance)

    def _worth(self, state: RoundState) -> FloatArray:
        """Each job's reward for running now (module docstring)."""
        rate = state.gang_rates().max(axis=1)
        needed = np.where(rate > 0, state.est_remaining / np.maximum(rate, 1e-12), np.inf)
        lease = self.be_lease_s
        worth = self.be_reward_scale * lease / (needed + lease)
        if state.deadlines_s.shape[1]:
            reach = state.deadlines_s >= state.now + needed[:, None]
            step = np.where(reach & ~np.isnan(state.deadlines_s), state.rewards, 0.0)
            first = np.where(reach.any(axis=1), step[np.arange(len(state)),
                                                      reach.argmax(axis=1)], 0.0)
            slo = np.isin(state.job_class, (STRICT, SOFT)) & (first > 0)
            worth = np.where(slo, self.slo_reward * first / 100.0, worth)
        return worth

    def weights(self, tier: int, k: int) -> FloatArray:
        """Class weights on the ``tier``-th fastest GPU type."""
        w = libm.exp(-(self.W_1, self.W_2, self.W_3)[min(tier, 2)] * np.arange(k))
        out: FloatArray = w / w.sum()
        return out

    def gang(self, state: RoundState, j: int, zeta: float) -> int:
        """Largest gang whose every step keeps ``speedup(g)/g >= zeta`` (>= min_gpus)."""
        d, lo = int(state.demand[j]), int(state.min_gpus[j])
        g = np.arange(1, d + 1, dtype=np.float64)
        eff = state.scaling.speed(np.full(d, state.model[j]), g) / g
        bad = np.flatnonzero(eff < zeta - 1e-12)
        return max(lo, int(bad[0]) if bad.size else d)


class _Book:
    """One decision's bookkeeping: the plan being built, class shares left, device loads."""

    def __init__(self, state: RoundState, p: Unified, locked: BoolArray) -> None:
        self.state, self.p = state, p
        self.plan: BoolArray = np.where(locked[:, None], state.placed, False)
        self.placed = locked.copy()
        self.fresh = np.zeros(len(state), dtype=bool)  # placed or moved by this decision
        self.rates = state.gang_rates()
        k = len(p.thresholds)
        self.cls = np.minimum(np.searchsorted(np.array(p.thresholds), state.est_size), k - 1)
        cluster = state.cluster
        self.device_type = cluster.node_type[cluster.device_node]
        speed = state.speeds.mean(axis=0)
        self.tiers = np.argsort(-speed, kind="stable")
        cap = max(1.0, p.overcommit) if state.sharing is not None else 1.0
        want = np.array([p.gang(state, j, p.zeta_min) for j in range(len(state))])
        self.share = np.zeros((len(self.tiers), k))
        for tier, t in enumerate(self.tiers):
            on_t = self.device_type == t
            held = np.bincount(self.cls, weights=self.plan[:, on_t].sum(axis=1), minlength=k)
            need = np.bincount(self.cls, weights=np.where(locked, 0, want), minlength=k)
            self.share[tier] = share_by_weight(cap * on_t.sum(), p.weights(tier, k),
                                               (held + need).astype(np.float64)) - held

    def admit(self, j: int, relaxed: bool) -> None:
        """Place job ``j`` on the fastest type where its class has share (any, if relaxed)."""
        s, p = self.state, self.p
        g = p.gang(s, j, p.zeta_min - p.delta if relaxed else p.zeta_min)
        for tier, t in enumerate(self.tiers):
            if not relaxed and self.share[tier, self.cls[j]] < g - 1e-9:
                continue
            devices = self._place(j, g, int(t))
            if devices is not None:
                self.plan[j, devices] = True
                self.placed[j] = self.fresh[j] = True
                self.share[tier, self.cls[j]] -= g
                return

    def speed_up(self, j: int) -> None:
        """Move running job ``j`` to the fastest GPU type with room for it, if the time it
        saves there beats the restart overhead (idle fast GPUs pull jobs off slow ones)."""
        s = self.state
        held = self.plan[j]
        types = np.unique(self.device_type[held])
        speed = s.speeds[s.model[j]]
        now = speed[types].min()
        left_s = s.est_remaining[j] / max(float(self.rates[j, types].min()), 1e-12)
        for t in self.tiers:
            if left_s * (1.0 - now / speed[t]) <= s.cluster.restart_s + 1e-9:
                continue
            devices = self._place(j, int(held.sum()), int(t))
            if devices is not None:
                self.plan[j] = False
                self.plan[j, devices] = True
                self.fresh[j] = True
                return

    def _place(self, j: int, g: int, t: int) -> IntArray | None:
        """Devices of type ``t`` for ``g`` workers of job ``j``: its current ones if they
        still hold it, else a placement within the bounds (own devices without sharing)."""
        s = self.state
        on_t = self.device_type == t
        current = np.flatnonzero(s.placed[j] & on_t)
        if s.sharing is None:
            empty = on_t & ~self.plan.any(axis=0)
            if current.size == g and empty[current].all():
                return current
            return _own_devices(s, empty, g)
        others = self.plan.copy()
        others[j] = False
        load = DeviceLoad.of(s.sharing, s.rows, others)
        jobs, r = s.sharing.jobs, int(s.rows[j])
        empty = ~others.any(axis=0)
        room = on_t & ((load.alpha + jobs.gpu_util[r] <= self.p.overcommit + 1e-9) | empty) & (
            load.gamma_gib + jobs.mem_gib[r] + np.maximum(load.surge_gib, jobs.surge_gib[r])
            <= s.sharing.device_mem_gib + 1e-9)
        if room.sum() < g:  # cheap necessary condition: compute and memory alone
            return None
        return place_workers(s.sharing, load, r, g, self.p.bounds(), allowed=on_t,
                             prefer=current)


def _own_devices(state: RoundState, empty: BoolArray, g: int) -> IntArray | None:
    """``g`` empty devices on as few nodes as possible (whole-GPU gangs, no sharing)."""
    cluster = state.cluster
    free = np.add.reduceat(empty.astype(np.int64), cluster.node_first)
    row = place_gang(free, g)
    if row is None:
        return None
    picks = [np.flatnonzero(empty[f:f + n])[:c] + f for f, n, c in
             zip(cluster.node_first, cluster.node_gpus, row, strict=True) if c]
    out: IntArray = np.concatenate(picks)
    return out
