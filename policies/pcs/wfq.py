"""Weighted fair queueing as PCS configures it (papers/pcs.md §3.1, §3.3; SPEC §3.1).

Jobs are classed once, by estimated size, against ascending thresholds (first class whose
threshold is >= the size). Classes share the GPUs by weight, work-conserving (a class that
needs less than its share hands the rest to the others in proportion to their weights).
Inside a class jobs are served in arrival order, each capped at the largest allocation whose
every step keeps ``speedup(g) / g >= zeta``; while the class's GPUs are not all used, the
pass is redone with ``zeta`` lowered by ``delta`` (PCS code, ``MCSScheduler``).

Two ways to configure it:

* the searched form ``WFQ(T=..., W=..., zeta_min=..., delta=...)`` followed by
  :meth:`WFQ.fit` on a training workload, which derives the classes from T (squared
  coefficient of variation within a class stays <= T) and weights ``w_i ∝ exp(-W i)``;
* the explicit form ``WFQ.explicit(thresholds, rates, zeta_min, delta)``, e.g. from PCS's
  ``pcs_configs.json`` via :meth:`WFQ.from_pcs_config`.

Weights are kept as exact normalised floats (PCS rounds them to 3 decimals first, which can
zero out a class; we keep every class's guaranteed share strictly positive).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, Self, TypeVar

import numpy as np
import numpy.typing as npt

from policies.base import KernelPolicy, param, register
from policies.pcs.baselines import water_fill
from simulator import libm
from simulator.errors import InvalidPolicyParams
from simulator.fluid.engine import KERNEL_SIG, QUEUE_SIG
from simulator.inputs.scaling import ScalingTable
from simulator.inputs.workload import Workload
from simulator.jit import njit, njit_lazily

__all__ = ["WFQ", "class_thresholds", "class_weights", "classify", "with_classes"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def class_thresholds(sizes: FloatArray, T: float) -> tuple[float, ...]:
    """Class thresholds from sorted sizes: close a class when its C² exceeds ``T`` (PCS code).

    Walk the ascending sizes keeping a running mean and variance; when adding a size pushes
    ``var / mean²`` above ``T``, the previous size becomes a threshold and the next class
    starts after the size that broke it. The last threshold is infinity.

    Where sizes tie, the walk can close two classes at the same size (a class ends on 17, the
    17 that broke it is skipped, the next class holds the other 17s and ends on 17 again). A
    job goes to the first class whose threshold is at least its size, so the second class
    could never hold a job: it is not kept.
    """
    out: list[float] = []
    n, total, total_sq = 0, 0.0, 0.0
    ordered = np.sort(np.asarray(sizes, dtype=np.float64))
    for i, x in enumerate(ordered):
        n += 1
        total += x
        total_sq += x * x
        mean = total / n
        var = total_sq / n - mean * mean
        if i > 0 and n > 1 and var / (mean * mean) > T:
            if not out or ordered[i - 1] > out[-1]:
                out.append(float(ordered[i - 1]))
            n, total, total_sq = 0, 0.0, 0.0
    out.append(math.inf)
    return tuple(out)


class _SizeClassed(Protocol):
    @property
    def T(self) -> float: ...

    @property
    def thresholds(self) -> tuple[float, ...]: ...


_Classed = TypeVar("_Classed", bound=_SizeClassed)


def with_classes(policy: _Classed, workload: Workload) -> _Classed:
    """``policy`` (a frozen dataclass with ``T`` and ``thresholds``) with its size classes
    derived from the training workload's estimated sizes; unchanged if it has them."""
    if policy.thresholds:
        return policy
    thresholds = class_thresholds(workload.estimated_service_s, policy.T)
    return replace(policy, thresholds=thresholds)  # type: ignore[type-var]


def class_weights(W: float, k: int) -> FloatArray:
    """``w_i ∝ exp(-W i)`` for ``k`` classes, normalised, from the largest down (none
    overflows) and floored so that no class's share underflows to 0: the one class-weight
    formula (wfq, wfq-hetero and unified, and the exports of their plans)."""
    w = libm.exp(-W * (np.arange(k) - (k - 1 if W < 0 else 0)))
    w = np.maximum(w / w.sum(), 1e-300)
    out: FloatArray = w / w.sum()
    return out


@functools.lru_cache(maxsize=64)
def _cap_counts(scaling: ScalingTable, zeta: float, delta: float) -> FloatArray:
    """``counts[m, s]``: model m's clipped demand at the s-th ζ of the relaxation sequence.

    The sequence is ζ, ζ-δ, ζ-2δ, ... (by repeated subtraction, as PCS does), ending at the
    first value <= 0, where nothing is clipped.
    """
    zs = [zeta]
    while zs[-1] > 0:
        zs.append(zs[-1] - delta)
    pm = scaling.prefix_efficiency()
    counts: FloatArray = (pm[:, :, None] >= np.asarray(zs)[None, None, :]).sum(axis=1).astype(
        np.float64)
    counts[:, -1] = np.inf
    counts.flags.writeable = False  # shared through the cache
    return counts


@njit
def classify(params: Any, est_size: Any) -> Any:
    """Each job's class: the first whose threshold is >= its estimated size (``params``: the
    number of classes, then their thresholds; what follows is not read)."""
    k_classes = int(params[0])
    cls = np.empty(est_size.shape[0], dtype=np.int64)
    for i in range(est_size.shape[0]):
        k = 0
        while k < k_classes - 1 and est_size[i] > params[1 + k]:
            k += 1
        cls[i] = k
    return cls


@njit(inline="always")
def _serve(params: Any, aux: Any, gpus: float, class_demand: Any, head: Any, nxt: Any,
           demand: Any, model: Any, pos: Any, val: Any) -> int:
    """Share the GPUs among the classes, then serve each class's queue in arrival order.

    Writes (job, GPUs) pairs into ``pos``, ``val`` for the jobs up to the one that uses the
    class's last GPU; the rest of the queue gets nothing (the queue kernel's contract,
    :data:`simulator.fluid.engine.QUEUE_SIG`). Returns the number of pairs.
    """
    k_classes = int(params[0])
    rates = params[1 + k_classes:1 + 2 * k_classes]
    class_gpus = np.empty(k_classes)
    water_fill(class_demand, gpus, rates, class_gpus)
    m = 0
    for k in range(k_classes):
        need = class_gpus[k]
        step = aux.shape[1] - 1
        for s in range(aux.shape[1]):  # first ζ of the sequence that uses the class's GPUs
            usable = 0.0
            i = head[k]
            while i >= 0:
                usable += min(float(demand[i]), aux[model[i], s])
                if usable >= need - 1e-9:
                    break
                i = nxt[i]
            if usable >= need - 1e-9:
                step = s
                break
        left = need
        i = head[k]
        while i >= 0 and left > 0.0:
            a = min(left, min(float(demand[i]), aux[model[i], step]))
            pos[m], val[m] = i, a
            m += 1
            left -= a
            i = nxt[i]
    return m


@njit_lazily(QUEUE_SIG)
def _wfq_queue(params: Any, aux: Any, gpus: float, class_demand: Any, head: Any, nxt: Any,
               demand: Any, model: Any, pos: Any, val: Any) -> int:
    return _serve(params, aux, gpus, class_demand, head, nxt, demand, model, pos, val)


@njit_lazily(KERNEL_SIG)
def _wfq(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
         est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any, speedup: Any,
         out: Any) -> None:
    k_classes = int(params[0])
    n = demand.shape[0]
    cls = classify(params, est_size)
    class_demand = np.zeros(k_classes)
    head = np.full(k_classes, -1, dtype=np.int64)
    tail = np.full(k_classes, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    for i in range(n):  # one queue per class, arrival order inside
        k = cls[i]
        class_demand[k] += demand[i]
        if tail[k] >= 0:
            nxt[tail[k]] = i
        else:
            head[k] = i
        tail[k] = i
    pos = np.empty(n, dtype=np.int64)
    val = np.empty(n)
    m = _serve(params, aux, gpus, class_demand, head, nxt, demand, model, pos, val)
    out[:] = 0.0
    for j in range(m):
        out[pos[j]] = val[j]


def class_cv() -> Any:
    """The ``T`` parameter of every policy with WFQ's size classes."""
    return param(1.0, low=0.001, high=1000.0, log=True,
                 help="max squared coefficient of variation of sizes within a class")


TIER_WEIGHT_HELP = ("class weight exponent on the fastest type",
                    "class weight exponent on the second type",
                    "class weight exponent on the third and slower types")


def tier_weight(tier: int) -> Any:
    """``W_<tier>`` (1-3) of the policies with a class weight exponent per GPU-type tier."""
    return param(1.0, low=-3.0, high=3.0, help=TIER_WEIGHT_HELP[tier - 1])


@register
@dataclass(frozen=True)
class WFQ(KernelPolicy):
    """PCS's WFQ. Build, ``fit`` on a training workload (or use :meth:`explicit`), simulate."""

    name = "wfq"
    summary = "PCS weighted fair queueing: size classes, weights, demand clipping"
    kernel = staticmethod(_wfq)
    queue_kernel = staticmethod(_wfq_queue)
    T: float = class_cv()
    W: float = param(1.0, low=-3.0, high=3.0, help="class weight exponent: w_i ∝ exp(-W·i)")
    zeta_min: float = param(0.5, low=0.0, high=1.0,
                            help="demand clipping: keep GPUs while speedup(g)/g >= zeta")
    delta: float = param(0.1, low=0.01, high=0.9, help="zeta step when a class has spare GPUs")
    thresholds: tuple[float, ...] = ()
    rates: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        th, rt = self.thresholds, self.rates
        if len(th) != len(rt):
            raise InvalidPolicyParams(f"WFQ: {len(th)} thresholds but {len(rt)} rates; give one "
                                      "rate per class (the last threshold is infinity)")
        if th:
            if any(b <= a for a, b in itertools.pairwise(th)) or th[-1] != math.inf:
                raise InvalidPolicyParams(f"WFQ: thresholds must increase and end with "
                                          f"infinity (null in JSON), got {list(th)}")
            if any(r <= 0 for r in rt) or not math.isclose(sum(rt), 1.0, rel_tol=1e-6):
                raise InvalidPolicyParams(f"WFQ: rates must be > 0 and sum to 1, got {list(rt)}")

    @classmethod
    def explicit(cls, thresholds: list[float | None], rates: list[float], *,
                 zeta_min: float = 0.0, delta: float = 0.1) -> Self:
        """WFQ with given class thresholds (None = infinity) and class rates."""
        th = tuple(math.inf if t is None else float(t) for t in thresholds)
        return cls(zeta_min=zeta_min, delta=delta, thresholds=th,
                   rates=tuple(float(r) for r in rates))

    @classmethod
    def from_pcs_config(cls, entry: Mapping[str, Any]) -> Self:
        """From one entry of PCS's ``pcs_configs.json`` (rates as ``[numerator, denominator]``)."""
        try:
            rates = [n / d for n, d in entry["class_rates"]]
            return cls.explicit(list(entry["class_thresholds"]), rates,
                                zeta_min=float(entry["clip_demand_factor"]),
                                delta=float(entry["delta"]))
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise InvalidPolicyParams(
                f"not a PCS config entry (needs class_thresholds, class_rates as [num, den], "
                f"clip_demand_factor, delta): {exc!r}") from exc

    @property
    def fitted(self) -> bool:
        """Whether classes are known (explicitly or by :meth:`fit`)."""
        return bool(self.thresholds)

    def fit(self, workload: Workload) -> Self:
        """Derive classes from the training workload's estimated sizes (no-op if explicit)."""
        if self.fitted:
            return self
        th = class_thresholds(workload.estimated_service_s, self.T)
        return replace(self, thresholds=th,
                       rates=tuple(float(v) for v in class_weights(self.W, len(th))))

    def queue_classes(self, workload: Workload) -> tuple[IntArray, int]:
        params, _ = self.kernel_args(workload.scaling)
        return classify(params, workload.estimated_service_s), len(self.rates)

    def kernel_args(self, scaling: ScalingTable) -> tuple[FloatArray, FloatArray]:
        if not self.fitted:
            raise InvalidPolicyParams("WFQ has no classes yet: call fit(training_workload) "
                                      "or build it with WFQ.explicit(...)")
        params = np.array([len(self.rates), *self.thresholds, *self.rates], dtype=np.float64)
        return params, _cap_counts(scaling, self.zeta_min, self.delta)
