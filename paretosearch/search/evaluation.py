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

from paretosearch.objectives import MEASURES
from policies import Domain, get_policy, make_policy
from simulator import ClusterProfile, Workload, simulate, summary
from simulator.errors import InvalidPolicyParams

__all__ = ["SearchSpace", "Task", "evaluate"]

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
    policy = make_policy(task.policy, {**task.fixed, **params}).fit(train)
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
    """The searched parameters of a policy family, each with its code for the optimiser.

    A numeric parameter is coded on the unit interval (log-scaled domains in log space,
    integer domains rounded on decoding); a choice by the index of its option.

    Attributes:
        names, domains: the searched parameters, in declaration order.
        dropped: parameters left out because they cannot affect results on the search's
            workload and cluster (:meth:`policies.Policy.inapplicable`), each with its reason;
            they keep their defaults.
    """

    names: tuple[str, ...]
    domains: tuple[Domain, ...]
    dropped: Mapping[str, str] = field(default_factory=dict, hash=False)

    @classmethod
    def of(cls, policy: str, fixed: Mapping[str, Any] | None = None, *,
           workload: Workload | Sequence[Workload] | None = None,
           profile: ClusterProfile | None = None) -> SearchSpace:
        """Every searched parameter of ``policy`` not fixed by the caller.

        Given the workload (or every training replicate) and the profile, parameters the
        policy declares inapplicable to them (on each workload) are dropped.
        """
        fixed = fixed or {}
        family = get_policy(policy)
        doms = family.domains()
        unknown = sorted(set(fixed) - set(doms) - {"thresholds", "rates"})
        if unknown:
            raise InvalidPolicyParams(f"policy {policy!r} has no parameter {unknown[0]!r}; its "
                                      f"parameters are {list(doms)}")
        dropped: dict[str, str] = {}
        if workload is not None and profile is not None:
            samples = [workload] if isinstance(workload, Workload) else list(workload)
            found = [family.inapplicable(w, profile) for w in samples]
            dropped = {n: why for n, why in found[0].items()
                       if all(n in f for f in found) and n in doms and n not in fixed
                       and doms[n].searched}
        keep = [(n, d) for n, d in doms.items() if n not in fixed and d.searched
                and n not in dropped]
        if not keep:
            why = "".join(f"; {n} dropped: {r}" for n, r in dropped.items())
            raise InvalidPolicyParams(f"policy {policy!r} has nothing left to search{why}")
        return cls(tuple(n for n, _ in keep), tuple(d for _, d in keep), dropped)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def mixed(self) -> bool:
        """Whether some searched parameter is a choice (coded by option index)."""
        return any(d.kind == "choice" for d in self.domains)

    def encode(self, params: Mapping[str, Any]) -> list[float]:
        """The code of a parameter set (inverse of :meth:`decode`; values clipped to their
        domains, a missing parameter at its domain's midpoint, an unknown choice at 0)."""
        codes: list[float] = []
        for name, dom in zip(self.names, self.domains, strict=True):
            if dom.kind == "choice":
                value = params.get(name)
                codes.append(float(dom.choices.index(value)) if value in dom.choices else 0.0)
                continue
            if name not in params:
                codes.append(0.5)
                continue
            v = min(max(float(params[name]), dom.low), dom.high)
            if dom.log and dom.low > 0:
                codes.append(math.log(v / dom.low) / math.log(dom.high / dom.low))
            else:
                codes.append((v - dom.low) / (dom.high - dom.low))
        return codes

    def holds(self, params: Mapping[str, Any]) -> bool:
        """Whether ``params`` is a point of this space: every searched parameter, each in its
        domain, and no other (a candidate read back from a run's journal)."""
        if set(params) != set(self.names):
            return False
        try:
            for name, dom in zip(self.names, self.domains, strict=True):
                dom.check(name, params[name])
        except (InvalidPolicyParams, OverflowError):  # an integer past a float's range
            return False
        return True

    def unit_codes(self, u: Sequence[float] | FloatArray) -> list[float]:
        """The codes of a point of the unit cube: a number's code is its coordinate, a
        choice's the option whose k-th of [0, 1) the coordinate is in."""
        return [min(int(x * len(d.choices)), len(d.choices) - 1) if d.kind == "choice"
                else float(x) for d, x in zip(self.domains, u, strict=True)]

    def decode(self, x: Sequence[Any] | FloatArray | Mapping[str, Any]) -> dict[str, Any]:
        """Parameters for a point: a code per parameter, in order or by name.

        A numeric code is a point of the unit interval (clipped to it); a choice code is the
        index of the option.
        """
        codes = [x[n] for n in self.names] if isinstance(x, Mapping) else list(x)
        out: dict[str, Any] = {}
        for name, dom, code in zip(self.names, self.domains, codes, strict=True):
            if dom.kind == "choice":
                out[name] = dom.choices[int(code)]
                continue
            u = min(max(float(code), 0.0), 1.0)
            if dom.log and dom.low > 0:
                value = float(math.exp(math.log(dom.low) + u * math.log(dom.high / dom.low)))
            else:
                value = float(dom.low + u * (dom.high - dom.low))
            out[name] = round(value) if dom.kind == "int" else min(max(value, dom.low),
                                                                          dom.high)
        return out
