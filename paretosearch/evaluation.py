"""One evaluation: a candidate policy configuration simulated on the search's workloads.

:class:`Task` is what every evaluation shares (policy family, fixed parameters, cluster,
whether to predict) and :func:`evaluate` is the pure function a runner calls, here or on a
Dask worker: same inputs, same record, whichever process ran it. A record holds every metric
under every measure (averaged over the workload replicates) plus the wall time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from policies import Domain, get_policy
from simulator import ClusterProfile, Workload, simulate, summary
from simulator.errors import InvalidPolicyParams

__all__ = ["MEASURES", "SearchSpace", "Task", "evaluate"]

MEASURES = ("avg", "p50", "p90", "p99", "max")
"""The measures every evaluation records for every metric."""

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Task:
    """What every evaluation of one search shares (small: it travels with each Dask task)."""

    policy: str
    profile: ClusterProfile
    fixed: Mapping[str, Any] = field(default_factory=dict)
    predict: bool = True


def evaluate(task: Task, params: Mapping[str, Any], workloads: Sequence[Workload],
             train: Workload) -> dict[str, float]:
    """Simulate one configuration on every workload replicate; average the metrics.

    Args:
        task: the shared settings.
        params: the candidate's searched parameters.
        workloads: the replicates to simulate (common to every candidate).
        train: the workload the policy derives its settings from (WFQ's classes).

    Returns:
        ``{"metric:measure": value, ..., "wall_s": seconds}``.
    """
    t0 = time.perf_counter()
    policy = get_policy(task.policy).from_params({**task.fixed, **params}).fit(train)
    sums: dict[str, list[float]] = {}
    for wl in workloads:
        stats = summary(simulate(wl, task.profile, policy, predict=task.predict), MEASURES)
        for metric, values in stats.items():
            for how, v in values.items():
                sums.setdefault(f"{metric}:{how}", []).append(v)
    record = {k: float(np.mean(v)) if not all(math.isnan(x) for x in v) else math.nan
              for k, v in sums.items()}
    record["wall_s"] = time.perf_counter() - t0
    return record


@dataclass(frozen=True)
class SearchSpace:
    """The searched parameters of a policy family, mapped onto the unit cube.

    Log-scaled domains are searched in log space; integer domains are rounded on decoding.
    """

    names: tuple[str, ...]
    domains: tuple[Domain, ...]

    @classmethod
    def of(cls, policy: str, fixed: Mapping[str, Any] | None = None) -> SearchSpace:
        """Every searchable, bounded numeric parameter of ``policy`` not fixed by the caller."""
        fixed = fixed or {}
        doms = get_policy(policy).domains()
        unknown = sorted(set(fixed) - set(doms) - {"thresholds", "rates"})
        if unknown:
            raise InvalidPolicyParams(f"policy {policy!r} has no parameter {unknown[0]!r}; its "
                                      f"parameters are {list(doms)}")
        keep = [(n, d) for n, d in doms.items() if n not in fixed and d.searched]
        if not keep:
            raise InvalidPolicyParams(f"policy {policy!r} has nothing left to search")
        return cls(tuple(n for n, _ in keep), tuple(d for _, d in keep))

    def __len__(self) -> int:
        return len(self.names)

    def decode(self, x: FloatArray) -> dict[str, Any]:
        """Parameters for a point of the unit cube."""
        out: dict[str, Any] = {}
        for name, dom, u in zip(self.names, self.domains, np.clip(x, 0.0, 1.0), strict=True):
            if dom.log and dom.low > 0:
                value = float(math.exp(math.log(dom.low) + u * math.log(dom.high / dom.low)))
            else:
                value = float(dom.low + u * (dom.high - dom.low))
            out[name] = round(value) if dom.kind == "int" else min(max(value, dom.low),
                                                                          dom.high)
        return out
