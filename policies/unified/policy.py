"""The unified scheduler: every parameter family in one configuration (SPEC §3.7).

One frozen configuration decides, at every best-effort lease boundary:

- **who** gets GPUs - PCS's WFQ classes (``T`` derives the class thresholds from the training
  workload's estimated sizes, :func:`policies.pcs.wfq.class_thresholds`); each GPU type is shared
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

Each decision is one call of a compiled kernel (:mod:`policies.unified.kernel`), inside the
round engine's loop; :meth:`~policies.round_kernel.KernelRoundPolicy.plan` runs the same
kernel on a :class:`~simulator.rounds.RoundState`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.ojpp.placement import Bounds
from policies.pcs.wfq import class_cv, class_weights, tier_weight, with_classes
from policies.round_kernel import KernelRoundPolicy
from policies.unified.kernel import (
    F_LEASE,
    G_BOUNDARY,
    G_QUIET,
    GI,
    GI_CLASSES,
    GI_TIERS,
    LAYOUT,
    F,
    G,
    unified_kernel,
)
from policies.unisched.policy import be_reward_scale
from simulator.errors import InvalidPolicyParams
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.slo import SOFT, STRICT
from simulator.inputs.workload import Workload
from simulator.rounds.sharing import can_share
from simulator.rounds.view import ClusterArrays, JobView, Layout, PolicyMemory, empty_memory

__all__ = ["Unified"]

FloatArray = npt.NDArray[np.float64]


@register
@dataclass(frozen=True)
class Unified(KernelRoundPolicy):
    """WFQ classes, leases, rewards, per-type weights and interference bounds (module doc)."""

    name = "unified"
    summary = "WFQ classes + leases + rewards + per-type weights + interference bounds"
    shares_gpus = True
    kernel = staticmethod(unified_kernel)
    layouts: ClassVar[dict[str, Layout]] = {"f": F, "g": G, "gi": GI}
    T: float = class_cv()
    W_1: float = tier_weight(1)
    W_2: float = tier_weight(2)
    W_3: float = tier_weight(3)
    zeta_min: float = param(0.0, low=0.0, high=1.0,
                            help="cap a gang where speedup(g)/g falls below this")
    delta: float = param(0.2, low=0.0, high=1.0, help="cap relaxation for spare GPUs")
    be_lease_s: float = param(300.0, low=30.0, high=3600.0, log=True,
                              help="BE lease = decision interval, s")
    slo_lease_multiple: int = param(2, low=1, high=12, kind="int",
                                    help="a running SLO job keeps its GPUs this many leases")
    slo_reward: float = param(100.0, low=1.0, high=1e4, log=True,
                              help="worth of an SLO job meeting its first deadline")
    be_reward_scale: float = be_reward_scale()
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

    def bounds(self) -> Bounds:
        """Where a worker may go (OJPP's bounds, with Horus's overcommit as compute cap)."""
        return Bounds(alpha_cap=self.overcommit, tau_max=self.tau_max,
                      theta_max=self.theta_max, theta_balance=self.theta_balance)

    def weights(self, tier: int, k: int) -> FloatArray:
        """Class weights on the ``tier``-th fastest GPU type."""
        return class_weights((self.W_1, self.W_2, self.W_3)[min(tier, 2)], k)

    def memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """Parameters (:data:`policies.unified.kernel.LAYOUT`: bounds, scalars, class
        thresholds, each type's class weights), the types fastest first (by the mean speed
        over models, stable on ties), no leases, no boundary and no quiet stretch yet."""
        if not self.thresholds:
            raise InvalidPolicyParams("unified has no classes yet: call fit(workload)")
        k = len(self.thresholds)
        tiers = np.argsort(-cluster.speeds.mean(axis=0), kind="stable")
        params = np.concatenate([self.bounds().vector(),
                                 [float(getattr(self, name)) for name in LAYOUT],
                                 self.thresholds,
                                 *(self.weights(tier, k) for tier in range(len(tiers)))])
        mem = empty_memory(jobs, cluster.node_gpus.shape[0], params=params, f=F, g=G,
                           gi=GI.width + len(tiers))
        mem.f[:, F_LEASE] = -np.inf
        mem.g[G_BOUNDARY] = mem.g[G_QUIET] = -np.inf
        mem.gi[GI_CLASSES] = k
        mem.gi[GI_TIERS:] = tiers
        return mem
