"""What a search is, declared once: the CLI's options, the retune spec's fields and the API's
arguments are all read into a :class:`SearchConfig` (the workload itself is an argument of
its own, as data is to a scikit-learn estimator)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from paretosearch.objectives import parse_objectives
from paretosearch.settings import SearchSettings, option
from policies import KernelPolicy, RoundPolicy, make_policy
from simulator import ClusterProfile, load_profile
from simulator.errors import InvalidPolicyParams, ParetoSearchError
from simulator.inputs.generate import MAX_JOBS, PHILLY_LOAD
from simulator.inputs.slo import MIXES

__all__ = ["GENERATED_REPLICATES", "SearchConfig", "policy_of"]

GENERATED_REPLICATES = 3
"""Generated samples averaged per evaluation unless told otherwise (and as many for the test
sample): one 1,000-job draw of the heavy-tailed generator ranks configurations too unlike the
next draw (docs/robust-fronts.md)."""

MAX_REPLICATES = 1_000
MAX_LOAD = 100.0
"""The highest offered load of a generated sample (1 fills the cluster)."""



def policy_of(name: str, params: Mapping[str, Any]) -> KernelPolicy | RoundPolicy:
    """:func:`policies.make_policy` for parameters from a file or an option: one of a type the
    policy cannot compare (``rates: [{}, 1]``) is refused as the out-of-range ones are.

    Raises:
        ParetoSearchError: an unknown policy, or parameters it cannot take.
    """
    try:
        return make_policy(name, params)
    except ParetoSearchError:
        raise
    except (TypeError, ValueError) as exc:
        raise InvalidPolicyParams(f"policy {name!r}: parameters it cannot take ({exc})") from exc


@dataclass(frozen=True)
class SearchConfig:
    """A search: the policy family and what it holds fixed, the cluster, the objectives, the
    generated samples (where the workload is not a trace) and how hard to search.

    Every field is checked on construction; the errors name the field and the bad value.
    """

    policy: str = option("wfq", flag="--policy", key="policy",
                         help="policy family to tune (default: %(default)s; 'paretosearch "
                              "policies' lists them)")
    """Policy family to tune (``paretosearch policies`` lists them)."""
    profile: str | ClusterProfile = option("pcs-64", key="profile")
    """Cluster profile: a name, a YAML path or a profile (``--profile`` or ``--cluster``)."""
    fixed: Mapping[str, Any] = option(factory=dict, flag="--set", key="fixed",
                                      metavar="NAME=VALUE",
                                      help="hold a parameter fixed (repeatable)")
    """Parameters held fixed (not searched)."""
    objectives: tuple[str, ...] = option(
        ("jct:avg", "pred_err:p99"), flag="--objective", key="objectives",
        metavar="METRIC:MEASURE", help="objective, repeatable (default: jct:avg and pred_err:p99)")
    """Objectives as ``METRIC:MEASURE`` labels (``jct`` alone reads as ``jct:avg``). The
    default pairs avg JCT with the p99 prediction error, as PCS's Fig. 7 does: over a front
    the average error barely moves (under 1 %), its p99 trades off visibly against JCT
    (docs/robust-fronts.md)."""
    settings: SearchSettings = field(default_factory=SearchSettings)
    jobs: int = option(1000, flag="--generate", metavar="N",
                       help="jobs per generated sample (default: %(default)s)")
    """Jobs per generated sample."""
    load: float = option(PHILLY_LOAD, flag="--load",
                         help="offered load of generated samples, 1 fills the cluster "
                              "(default: %(default)s, the Philly traces' median on 64 GPUs)")
    """Offered load of generated samples (:data:`simulator.inputs.generate.PHILLY_LOAD`)."""
    replicates: int | None = option(
        None, flag="--replicates",
        help="generated samples averaged per evaluation, and as many test samples (default: "
             f"{GENERATED_REPLICATES}; a trace is one sample)")
    """Generated samples averaged per evaluation (common random numbers: every candidate
    faces the same draws), and as many test samples; None: :data:`GENERATED_REPLICATES` for a
    generated workload, 1 for a trace (one sample, split into train and test halves)."""
    slo_mix: str | None = option(
        None, flag="--slo-mix", key="slo_mix", metavar="MIX", choices=tuple(sorted(MIXES)),
        help="give the jobs deadlines and rewards with a UniSched mix "
             f"({', '.join(sorted(MIXES))}) for the slo_miss / be_jct objectives")
    """Give the jobs deadlines and rewards with a UniSched mix (``SLO``, ``MIX1``, ``MIX2``)."""
    sharing: bool = option(
        False, flag="--sharing", key="sharing",
        help="give the jobs SYNTHETIC GPU-sharing requirements (utilization, memory surges) "
             "for co-locating policies (horus, ojpp, unified) and the slowdown / "
             "perf_guaranteed / gpus_used / gpu_util_sum objectives")
    """Give jobs without their own SYNTHETIC GPU-sharing requirements."""
    cluster: ClusterProfile = field(init=False, repr=False, compare=False)
    """The profile, loaded."""

    def __post_init__(self) -> None:
        labels = tuple(o.label for o in parse_objectives(self.objectives))
        object.__setattr__(self, "objectives", labels)
        object.__setattr__(self, "fixed", dict(self.fixed))
        object.__setattr__(self, "cluster", self.profile if isinstance(
            self.profile, ClusterProfile) else load_profile(self.profile))
        policy_of(self.policy, self.fixed)  # unknown family or bad fixed values fail here
        for name, low, high in (("jobs", 1, MAX_JOBS), ("replicates", 1, MAX_REPLICATES)):
            value = getattr(self, name)
            if name == "replicates" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ParetoSearchError(f"search {name} must be an integer from {low} to "
                                        f"{high:,} (got {value!r})")
        if not (isinstance(self.load, int | float) and math.isfinite(self.load)
                and 0 < self.load <= MAX_LOAD):
            raise ParetoSearchError(f"search load must be a number > 0 and at most {MAX_LOAD} "
                                    f"(got {self.load!r})")
        if self.slo_mix is not None and self.slo_mix not in MIXES:
            raise ParetoSearchError(f"slo_mix {self.slo_mix!r}: known mixes are "
                                    f"{', '.join(sorted(MIXES))}")

    def with_objectives(self, *objectives: object) -> SearchConfig:
        """The same search for other objectives (parsed as :func:`parse_objectives` does)."""
        return replace(self, objectives=tuple(o.label for o in parse_objectives(objectives)))

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it (the profile by name or path): :meth:`from_dict` reads it back."""
        profile = self.profile if isinstance(self.profile, str) else self.cluster.name
        return {"policy": self.policy, "profile": profile, "fixed": dict(self.fixed),
                "objectives": list(self.objectives), "settings": asdict(self.settings),
                "jobs": self.jobs, "load": self.load, "replicates": self.replicates,
                "slo_mix": self.slo_mix, "sharing": self.sharing}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], source: str = "config") -> SearchConfig:
        """The config :meth:`to_dict` wrote; ``source`` names it in errors."""
        try:
            return cls(**{**doc, "objectives": tuple(doc["objectives"]),
                          "settings": SearchSettings(**doc["settings"])})
        except (KeyError, TypeError) as exc:
            raise ParetoSearchError(f"{source}: not a search config ({exc}); the fields are "
                                    f"{', '.join(cls().to_dict())}") from exc
