"""WFQ on a heterogeneous cluster: one weight exponent per GPU type (SPEC §3.1, last bullet).

PCS's classes (squared coefficient of variation of estimated sizes <= T, derived by
:meth:`WFQHetero.fit` exactly as :class:`policies.wfq.WFQ` does) share each GPU type by their
own weights ``w_i^r ∝ exp(-W_r · i)``, so an operator can, say, reserve the fast GPUs for
small jobs and let large jobs soak up the slow ones. Types are ranked by the profile's
relative speed: ``W_1`` weighs the fastest type, ``W_2`` the second, ``W_3`` the third and
any slower ones; on a one-type cluster only ``W_1`` matters.

Whole GPUs, decided in rounds on the round engine. Each round, on each type from the fastest:
the type's GPUs are water-filled across classes by weight (a class needing less hands the rest
to the others), running jobs keep their placement and count against their class's share
(this policy never preempts, so rounds cost no restarts), then waiting jobs are admitted in
class and arrival order when their whole gang fits in their class's share on one type.
GPUs no share can use go to any waiting job that fits (work conservation in whole gangs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy, param, register
from policies.gangs import place_gang
from policies.wfq import with_classes
from simulator import libm
from simulator.errors import InvalidPolicyParams
from simulator.profile import ClusterProfile
from simulator.rounds import RoundState
from simulator.workload import Workload

__all__ = ["WFQHetero", "share_by_weight"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

def share_by_weight(capacity: float, weights: FloatArray, demand: FloatArray) -> FloatArray:
    """Split ``capacity`` by weight, capped by demand; leftovers re-shared until none moves."""
    share = np.zeros_like(demand)
    open_ = demand > 0
    left = float(capacity)
    while left > 1e-9 and open_.any():
        give = left * weights * open_ / (weights * open_).sum()
        take = np.minimum(give, demand - share)
        share += take
        left -= float(take.sum())
        open_ &= share < demand - 1e-9
    return share


@register
@dataclass(frozen=True)
class WFQHetero(RoundPolicy):
    """PCS's WFQ classes with one weight exponent per GPU-type tier. ``fit`` before use."""

    name = "wfq-hetero"
    summary = "WFQ classes with per-GPU-type weights, whole gangs in rounds (heterogeneous)"
    T: float = param(1.0, low=0.001, high=1000.0, log=True,
                     help="max squared coefficient of variation of sizes within a class")
    W_1: float = param(1.0, low=-3.0, high=3.0, help="class weight exponent on the fastest type")
    W_2: float = param(1.0, low=-3.0, high=3.0, help="class weight exponent on the second type")
    W_3: float = param(1.0, low=-3.0, high=3.0,
                       help="class weight exponent on the third and slower types")
    round_s: float = param(360.0, low=30.0, high=3600.0, log=True,
                           help="seconds between decisions")
    thresholds: tuple[float, ...] = ()

    @classmethod
    def inapplicable(cls, workload: Workload, profile: ClusterProfile) -> dict[str, str]:
        """The exponents of tiers the cluster lacks (``W_2`` and ``W_3`` on one GPU type)."""
        types = ", ".join(profile.gpus_by_type)
        n = len(profile.gpus_by_type)
        return {name: f"the cluster has no {nth} GPU type (only {types})"
                for name, nth, k in (("W_2", "second", 2), ("W_3", "third", 3)) if n < k}

    def fit(self, workload: Workload) -> Self:
        """Derive classes from the training workload's estimated sizes (no-op if known)."""
        return with_classes(self, workload)

    def plan(self, state: RoundState) -> IntArray:
        if not self.thresholds:
            raise InvalidPolicyParams("wfq-hetero has no classes yet: call fit(workload)")
        cluster = state.cluster
        k = len(self.thresholds)
        cls = np.minimum(np.searchsorted(np.array(self.thresholds), state.est_size), k - 1)
        running = state.alloc.sum(axis=1) > 0
        plan = np.where(running[:, None], state.alloc, 0)
        waiting = ~running
        speed = state.speeds.mean(axis=0)
        for tier, t in enumerate(np.argsort(-speed, kind="stable")):
            on_t = cluster.node_type == t
            w = libm.exp(-(self.W_1, self.W_2, self.W_3)[min(tier, 2)] * np.arange(k))
            need = np.bincount(cls, weights=np.where(waiting, state.demand, 0), minlength=k)
            held = np.bincount(cls, weights=plan[:, on_t].sum(axis=1), minlength=k)
            share = share_by_weight(cluster.node_gpus[on_t].sum(), w,
                                    (held + need).astype(np.float64)) - held
            free = np.where(on_t, cluster.node_gpus - plan.sum(axis=0), 0)
            for j in np.lexsort((state.arrival_s, cls)):
                if waiting[j] and state.demand[j] <= share[cls[j]] + 1e-9:
                    self._admit(j, state, plan, free, waiting, share, cls)
        free = cluster.node_gpus - plan.sum(axis=0)
        for j in np.lexsort((state.arrival_s, cls)):  # spare GPUs: whole gangs, one type
            if waiting[j]:
                for t in np.argsort(-speed, kind="stable"):
                    if self._admit(j, state, plan, np.where(cluster.node_type == t, free, 0),
                                   waiting, None, cls):
                        free = cluster.node_gpus - plan.sum(axis=0)
                        break
        return plan

    @staticmethod
    def _admit(j: int, state: RoundState, plan: IntArray, free: IntArray,
               waiting: npt.NDArray[np.bool_], share: FloatArray | None, cls: IntArray) -> bool:
        row = place_gang(free, int(state.demand[j]))
        if row is None:
            return False
        plan[j] = row
        free -= row
        waiting[j] = False
        if share is not None:
            share[cls[j]] -= state.demand[j]
        return True
