"""WFQ on a heterogeneous cluster: one weight exponent per GPU type (SPEC §3.1, last bullet).

PCS's classes (squared coefficient of variation of estimated sizes <= T, derived by
:meth:`WFQHetero.fit` exactly as :class:`policies.pcs.wfq.WFQ` does) share each GPU type by their
own weights ``w_i^r ∝ exp(-W_r · i)``, so an operator can, say, reserve the fast GPUs for
small jobs and let large jobs soak up the slow ones. Types are ranked by the profile's
relative speed: ``W_1`` weighs the fastest type, ``W_2`` the second, ``W_3`` the third and
any slower ones; on a one-type cluster only ``W_1`` matters.

Whole GPUs, decided in rounds on the round engine (a compiled kernel). Each round, on each
type from the fastest: the type's GPUs are water-filled across classes by weight (a class
needing less hands the rest to the others), running jobs keep their placement and count
against their class's share (this policy never preempts, so rounds cost no restarts), then
waiting jobs are admitted in class and arrival order when their whole gang fits in their
class's share on one type. GPUs no share can use go to any waiting job that fits (work
conservation in whole gangs). A job is never placed on a type where its speed is 0. After a
decision no waiting gang fits in any type's free GPUs, so the plan stands until a job arrives
or finishes (the kernel declares itself quiet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.gangs import gang_row
from policies.pcs.wfq import class_cv, class_weights, tier_weight, with_classes
from policies.round_kernel import KernelRoundPolicy
from simulator import libm
from simulator.errors import InvalidPolicyParams
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.workload import Workload
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import (
    PLAN,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    JobView,
    Layout,
    PolicyMemory,
    active_rows,
    empty_memory,
    touch,
)

__all__ = ["WFQHetero", "share_by_weight"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@njit
def share_by_weight(capacity: float, weights: Any, demand: Any) -> Any:
    """Split ``capacity`` by weight, capped by demand; leftovers re-shared until none moves.

    Sums are NumPy's (pairwise), so Python and compiled callers get the same bits."""
    k = demand.shape[0]
    share = np.zeros(k)
    open_ = demand > 0
    left = float(capacity)
    give, take = np.zeros(k), np.zeros(k)
    while left > 1e-9 and open_.any():
        for c in range(k):
            give[c] = weights[c] * open_[c]
        total = libm.pairwise_sum(give)
        for c in range(k):
            give[c] = left * weights[c] * open_[c] / total
            take[c] = min(give[c], demand[c] - share[c])
            share[c] += take[c]
        left -= libm.pairwise_sum(take)
        for c in range(k):
            open_[c] = open_[c] and share[c] < demand[c] - 1e-9
    return share

GI = Layout(tiers=0)
"""``gi``: the GPU types, fastest first (one entry per type)."""
GI_TIERS = GI.TIERS


@njit
def _admit(J: Any, M: Any, r: int, free: Any, none: Any, row: Any) -> bool:
    """Place row ``r``'s whole gang on ``free`` (updated); False if it does not fit."""
    if not gang_row(free, J.demand[r], none, row):
        return False
    M.out_alloc[r, :] = row
    touch(M, r)
    free -= row
    return True


@njit_lazily(ROUND_KERNEL_SIG)
def _wfq_hetero(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """One decision: per-type class shares, then spare GPUs (module docstring). ``params``:
    the class thresholds, then each tier's class weights; ``gi``: the types, fastest first."""
    active, tiers = active_rows(E), M.gi[GI_TIERS:]
    n_types, nodes = tiers.shape[0], C.node_gpus.shape[0]
    k = M.params.shape[0] // (1 + n_types)
    cls = np.empty(active.shape[0], dtype=np.int64)
    waiting = np.empty(active.shape[0], dtype=np.bool_)
    for a in range(active.shape[0]):
        r = active[a]
        cls[a] = min(np.searchsorted(M.params[:k], J.est_size[r]), k - 1)
        waiting[a] = J.alloc[r].sum() == 0
    none, row = np.zeros(nodes, dtype=np.int64), np.zeros(nodes, dtype=np.int64)
    used = E.node_used.copy()
    for tier in range(n_types):
        t = tiers[tier]
        need, held = np.zeros(k), np.zeros(k)
        for a in range(active.shape[0]):
            r = active[a]
            if waiting[a]:
                need[cls[a]] += J.demand[r]
            for h in range(nodes):
                if C.node_type[h] == t:
                    held[cls[a]] += M.out_alloc[r, h] * (not waiting[a])
        weights = M.params[k * (1 + tier):k * (2 + tier)]
        cap = 0
        free = np.zeros(nodes, dtype=np.int64)
        for h in range(nodes):
            if C.node_type[h] == t:
                cap += C.node_gpus[h]
                free[h] = C.node_gpus[h] - used[h]
        share = share_by_weight(float(cap), weights, held + need) - held
        for c in range(k):
            for a in range(active.shape[0]):
                r = active[a]
                if cls[a] == c and waiting[a] and J.demand[r] <= share[c] + 1e-9 and C.speeds[
                        J.model[r], t] > 0 and _admit(J, M, r, free, none, row):
                    used += row
                    waiting[a] = False
                    share[c] -= J.demand[r]
    for c in range(k):  # spare GPUs: whole gangs, one type
        for a in range(active.shape[0]):
            if cls[a] != c or not waiting[a]:
                continue
            for tier in range(n_types):
                if C.speeds[J.model[active[a]], tiers[tier]] <= 0:  # cannot run there
                    continue
                free = np.where(C.node_type == tiers[tier], C.node_gpus - used, 0)
                if _admit(J, M, active[a], free, none, row):
                    used += row
                    waiting[a] = False
                    break
    M.quiet[0] = np.inf  # no waiting gang fits anywhere now
    return PLAN


@register
@dataclass(frozen=True)
class WFQHetero(KernelRoundPolicy):
    """PCS's WFQ classes with one weight exponent per GPU-type tier. ``fit`` before use."""

    name = "wfq-hetero"
    summary = "WFQ classes with per-GPU-type weights, whole gangs in rounds (heterogeneous)"
    T: float = class_cv()
    W_1: float = tier_weight(1)
    W_2: float = tier_weight(2)
    W_3: float = tier_weight(3)
    round_s: float = param(360.0, low=30.0, high=3600.0, log=True,
                           help="seconds between decisions")
    thresholds: tuple[float, ...] = ()
    kernel = staticmethod(_wfq_hetero)
    layouts: ClassVar[dict[str, Layout]] = {"gi": GI}

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

    def memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """The thresholds and per-tier class weights (``params``) and the types by speed,
        fastest first (``gi``: the mean over models, stable on ties)."""
        if not self.thresholds:
            raise InvalidPolicyParams("wfq-hetero has no classes yet: call fit(workload)")
        k = len(self.thresholds)
        tiers = np.argsort(-cluster.speeds.mean(axis=0), kind="stable")
        exps = (self.W_1, self.W_2, self.W_3)
        weights = [class_weights(exps[min(tier, 2)], k) for tier in range(len(tiers))]
        mem = empty_memory(jobs, cluster.node_gpus.shape[0],
                           params=np.concatenate([self.thresholds, *weights]),
                           gi=GI.width + len(tiers))
        mem.gi[GI_TIERS:] = tiers
        return mem
