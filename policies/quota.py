"""Size-routed queues with guaranteed whole-GPU quotas: the classes as production schedulers run
them once exported (Kueue ClusterQueues in a cohort, Volcano queues, YARN capacity queues).

This is what ``paretosearch export`` deploys, as a policy the simulator runs, so that an operator
sees what deployment costs beside the configuration as searched (:mod:`paretosearch.export`):

- **Routing**: a job goes to the first class whose size bound (estimated GPU-seconds) is at
  least its size, as WFQ classes it.
- **Whole gangs**: a job runs on all the GPUs it asks for or on none (at most the cluster's),
  and keeps them until it ends or is preempted; nothing is clipped or resized.
- **Quotas**: each class owns an integer number of GPUs (its nominal quota). Waiting jobs are
  taken in arrival order; one is admitted on its own quota when it fits there and in the free
  GPUs, a later job may pass one that does not fit (Kueue's ``BestEffortFIFO``).
- **Reclaim** (``reclaim``; Kueue's ``reclaimWithinCohort: Any``): a job that fits its class's
  quota but not the free GPUs preempts jobs of classes running above their quota, the most
  recent arrival of the class furthest above its quota (per weight) first, while that class
  stays above it; a preempted job waits again and keeps its progress.
- **Borrowing** (the cohort lends what is idle): then, while some waiting job fits the free
  GPUs, the class with the smallest borrowed share (GPUs above quota / weight; ties: the first
  class) admits its first such job (Kueue's fair sharing).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from policies.base import FloatArray, KernelPolicy, param, register
from policies.pcs.wfq import classify
from simulator.errors import InvalidPolicyParams
from simulator.fluid.engine import KERNEL_SIG
from simulator.inputs.scaling import ScalingTable
from simulator.jit import njit, njit_lazily

__all__ = ["Quota"]


@njit
def _take(c: int, k: int, usage: Any, quota: Any, weight: Any, cls: Any, out: Any,
          need: float, free: float) -> float:
    """Preempt borrowed GPUs until ``need`` are free (module docstring); the free GPUs after.
    Preempts nothing unless enough can be taken."""
    borrowed = 0.0
    for j in range(k):
        if j != c:
            borrowed += max(0.0, usage[j] - quota[j])
    if free + borrowed < need:
        return free
    while free < need:
        worst, over = -1, 0.0
        for j in range(k):
            if j != c and usage[j] > quota[j] and (usage[j] - quota[j]) / weight[j] > over:
                worst, over = j, (usage[j] - quota[j]) / weight[j]
        for i in range(out.shape[0] - 1, -1, -1):  # the latest arrival first
            if cls[i] == worst and out[i] > 0.0:
                usage[worst] -= out[i]
                free += out[i]
                out[i] = 0.0
                break
    return free


@njit_lazily(KERNEL_SIG)
def _quota(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
           est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
           out: Any) -> None:
    k, n = int(params[0]), demand.shape[0]
    quota, weight = params[1 + k:1 + 2 * k], params[1 + 2 * k:1 + 3 * k]
    reclaim = params[1 + 3 * k] > 0.0
    cls = classify(params, est_size)
    usage = np.zeros(k)
    free = gpus
    for i in range(n):
        out[i] = alloc[i]  # a running gang keeps its GPUs
        usage[cls[i]] += out[i]
        free -= out[i]
    for i in range(n):  # on the class's own quota, reclaiming it if need be
        c, d = cls[i], min(float(demand[i]), gpus)
        if out[i] > 0.0 or usage[c] + d > quota[c]:
            continue
        if d > free and reclaim:
            free = _take(c, k, usage, quota, weight, cls, out, d, free)
        if d <= free:
            out[i], usage[c], free = d, usage[c] + d, free - d
    while True:  # borrowing: the smallest borrowed share first
        pick, share = -1, np.inf
        for i in range(n):
            c = cls[i]
            if out[i] == 0.0 and min(float(demand[i]), gpus) <= free:
                s = max(0.0, usage[c] - quota[c]) / weight[c]
                if s < share or (s == share and c < cls[pick]):
                    pick, share = i, s
        if pick < 0:
            return
        d = min(float(demand[pick]), gpus)
        out[pick], usage[cls[pick]], free = d, usage[cls[pick]] + d, free - d


@register
@dataclass(frozen=True)
class Quota(KernelPolicy):
    """Exported size classes as deployed: integer GPU quotas, whole gangs, borrowing, reclaim."""

    name = "quota"
    summary = "deployed size-class queues: whole-GPU quotas, borrowing, reclaim (Kueue-like)"
    kernel = staticmethod(_quota)
    reclaim: bool = param(True, kind="choice", choices=(True, False),
                          help="a class below its quota preempts GPUs others borrowed")
    thresholds: tuple[float, ...] = (math.inf,)
    quotas: tuple[int, ...] = ()
    """GPUs each class owns (none given: no class is held to a quota)."""
    weights: tuple[float, ...] = ()
    """Each class's fair-sharing weight when borrowing (none given: equal)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        th, k = self.thresholds, len(self.thresholds)
        if not th or any(b <= a for a, b in itertools.pairwise(th)) or th[-1] != math.inf:
            raise InvalidPolicyParams(f"quota: thresholds must increase and end with infinity "
                                      f"(null in JSON), got {list(th)}")
        for field, values in (("quotas", self.quotas), ("weights", self.weights)):
            if values and len(values) != k:
                raise InvalidPolicyParams(f"quota: {k} classes but {len(values)} {field}; give "
                                          f"one per class")
        if any(q < 0 or q != int(q) for q in self.quotas):
            raise InvalidPolicyParams(f"quota: quotas must be whole GPUs >= 0, got "
                                      f"{list(self.quotas)}")
        if any(not w > 0 for w in self.weights):
            raise InvalidPolicyParams(f"quota: weights must be > 0, got {list(self.weights)}")

    def kernel_args(self, scaling: ScalingTable) -> tuple[FloatArray, FloatArray]:
        k = len(self.thresholds)
        quotas = self.quotas or (math.inf,) * k
        weights = self.weights or (1.0,) * k
        params = np.array([k, *self.thresholds, *quotas, *weights, self.reclaim],
                          dtype=np.float64)
        return params, super().kernel_args(scaling)[1]
