"""The neutral export plan: what a chosen configuration asks of a production scheduler.

:func:`build_plan` reads a config document (``RUN/chosen.json``: policy, params, the fitted
policy, the cluster) into a :class:`Plan`: size classes with a weight per GPU type, job tiers
(SLO and best-effort) with a priority and a lease, whether classes reclaim their share by
preemption, and every setting of the policy that no target can express. The renderers in
:mod:`paretosearch.export.kube` and :mod:`paretosearch.export.hpc` only translate a plan.

Which parts of a policy a plan carries is decided per policy class (``functools.singledispatch``
over the policy's type, never its name); the policies no target can express are listed in
:data:`ONE_QUEUE` and become one queue holding every job, all of their parameters on the
cannot-express list. Every registered policy is one or the other (a test keeps it so).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from paretosearch.runs.records import ChosenConfig
from policies import (
    AFS,
    FIFO,
    LAS,
    LLF,
    OBP,
    OJPP,
    PAB,
    REGISTRY,
    SRSF,
    SRTF,
    WFQ,
    BestFit,
    BGreedy,
    CGreedy,
    FifoExclusive,
    Gavel,
    Hadar,
    Horus,
    Hydra,
    IGreedy,
    MaxMin,
    OJPPGreedy,
    Policy,
    Themis,
    Tiresias,
    Unified,
    UniSched,
    WFQHetero,
    YarnCS,
    make_policy,
)
from policies.pcs.wfq import class_weights
from policies.quota import Quota
from policies.unisched.chronus_gang import ChronusGang
from policies.unisched.gang_baselines import FifoGang, SrsfGang, ThemisGang
from policies.unisched.paper_baselines import OptimusGang, ThreeSigmaGang
from simulator import list_profiles, load_profile
from simulator.errors import InvalidPolicyParams, ParetoSearchError, located

__all__ = [
    "WEIGHT_SCALE", "ExportError", "InvalidConfigDocument", "JobTier", "Plan", "SizeClass",
    "build_plan", "deployed_config", "plan_dict", "scaled_integers",
]

_GPU_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
MAX_GPUS = 10**7
"""The most GPUs of one type an export takes (more than any cluster has; a scheduler's
quota arithmetic overflows long before 10**30)."""
MAX_BOUND = 2**63
"""Class bounds in GPU-seconds stay below this (a scheduler holds them as int64)."""


class ExportError(ParetoSearchError, ValueError):
    """An export that cannot be made: unknown format, bad option, missing input."""


class InvalidConfigDocument(ExportError):
    """A config document (``chosen.json``) with a missing or impossible field."""


@dataclass(frozen=True)
class SizeClass:
    """One WFQ size class: a queue.

    Attributes:
        name: queue name, valid in every target (``class0``, ... or ``all``).
        max_size_gpu_s: the class takes jobs whose estimated size (GPU-seconds: GPUs x run
            time on the reference GPU type) is at most this and above the previous class's.
        weight: the class's share of all GPUs (the shares of all classes sum to 1).
        weight_by_type: its share of each GPU type's GPUs.
    """

    name: str
    max_size_gpu_s: float
    weight: float
    weight_by_type: Mapping[str, float]


@dataclass(frozen=True)
class JobTier:
    """A kind of job (``slo`` or ``best-effort``) with its own priority and lease.

    Attributes:
        priority: 1 to 1000, higher runs first (from the policy's reward scalings).
        lease_s: how long a job of this tier holds its GPUs before it is decided again.
        preemptible: whether a higher-priority job may take its GPUs.
    """

    name: str
    priority: int
    lease_s: float
    preemptible: bool


@dataclass(frozen=True)
class Plan:
    """Everything a target needs, and what none of them can express."""

    policy: str
    gpus_by_type: Mapping[str, int]
    """GPUs per type, fastest type first."""
    classes: tuple[SizeClass, ...]
    tiers: tuple[JobTier, ...]
    """Empty when the policy treats every job alike."""
    reclaim: bool
    """A class below its share takes GPUs back, by preemption, from classes above theirs."""
    unexpressed: tuple[str, ...]
    source: Mapping[str, Any]

    @property
    def total_gpus(self) -> int:
        """GPUs of every type."""
        return sum(self.gpus_by_type.values())

    def quotas(self) -> dict[str, list[int]]:
        """Each GPU type's GPUs as whole-GPU quotas, one per class, by the classes' weights
        on that type (largest remainders): Kueue's nominal quotas, and what the deployed
        queues own (:func:`deployed_config`)."""
        return {t: apportion(n, [c.weight_by_type[t] for c in self.classes])
                for t, n in self.gpus_by_type.items()}

    def preempts(self, tier: JobTier) -> tuple[JobTier, ...]:
        """The tiers whose jobs a job of ``tier`` may preempt."""
        return tuple(t for t in self.tiers if t.preemptible and t.priority < tier.priority)

    def shaped(self, max_classes: int | None = None, prefix: str = "") -> Plan:
        """This plan with at most ``max_classes`` classes and queue names ``prefix`` +
        ``class0``... Adjacent classes are merged, the pair with the smallest share first
        (a merged class takes both size ranges and the sum of their shares); what merging
        changed goes on the cannot-express list."""
        classes, members = list(self.classes), [[c.name] for c in self.classes]
        while max_classes is not None and len(classes) > max_classes:
            k = min(range(len(classes) - 1),
                    key=lambda i: classes[i].weight + classes[i + 1].weight)
            a, b = classes[k], classes[k + 1]
            classes[k:k + 2] = [SizeClass(a.name, b.max_size_gpu_s, a.weight + b.weight,
                                          {t: a.weight_by_type[t] + b.weight_by_type[t]
                                           for t in a.weight_by_type})]
            members[k:k + 2] = [members[k] + members[k + 1]]
        if len(classes) > 1 or prefix:
            classes = [replace(c, name=prefix + _class_name(k, len(classes)))
                       for k, c in enumerate(classes)]
        merged = [f"{c.name} holds {group[0]} to {group[-1]}"
                  for c, group in zip(classes, members, strict=True) if len(group) > 1]
        lost = (f"size classes merged to fit {max_classes} queues ({'; '.join(merged)}): "
                "their jobs share one queue and the summed share",) if merged else ()
        return replace(self, classes=tuple(classes), unexpressed=(*self.unexpressed, *lost))


WEIGHT_SCALE = 1000
"""The integer the heaviest class or tier gets where a target wants integer weights."""


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split into integers in proportion to ``weights`` (largest remainders)."""
    w = np.asarray(weights, dtype=np.float64)
    exact = total * w / w.sum()
    out = np.floor(exact).astype(np.int64)
    out[np.argsort(out - exact, kind="stable")[:total - int(out.sum())]] += 1
    return [int(v) for v in out]


def scaled_integers(values: Sequence[float], top: int = WEIGHT_SCALE) -> list[int]:
    """Positive values as integers in [1, top], the largest becoming ``top``."""
    largest = max(values)
    return [max(1, round(top * v / largest)) for v in values]


@dataclass(frozen=True)
class _Semantics:
    """What the plan takes from one policy."""

    thresholds: tuple[float, ...] = (math.inf,)
    weights: tuple[tuple[float, ...], ...] = ((1.0,),)
    """Class weights on the fastest GPU type, the second, ... (the last for slower ones)."""
    tiers: tuple[JobTier, ...] = ()
    reclaim: bool = False
    expressed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


LEASE_NOTE = ("leases become time limits: a job still running when its lease ends is stopped, "
              "not decided again (the policy usually lets it go on); jobs longer than a lease "
              "must checkpoint and be resubmitted")


ONE_QUEUE: tuple[type[Policy], ...] = (
    FIFO, SRSF, SRTF, LAS, MaxMin, Themis, AFS, LLF, Hydra, Hadar, Gavel, YarnCS, Tiresias, Horus,
    FifoExclusive, OBP, PAB, OJPP, OJPPGreedy, BestFit, CGreedy, IGreedy, BGreedy, Quota,
    FifoGang, SrsfGang, ThemisGang, OptimusGang, ThreeSigmaGang, ChronusGang)
"""The policies no target can express: each is exported, by this decision, as one
first-come first-served queue, with every setting on the cannot-express list. A policy that is
neither here nor handled below cannot be exported until it is given one or the other."""


@functools.singledispatch
def _semantics(policy: Policy) -> _Semantics:
    raise ExportError(f"{policy.name}: no export semantics are declared for it "
                      "(paretosearch/export/plan.py: a handler, or ONE_QUEUE)")


def _one_queue(policy: Policy) -> _Semantics:
    return _Semantics(notes=(f"{policy.name} ({type(policy).summary}) has no equivalent: it is "
                             "exported as one first-come first-served queue holding every job",))


for _cls in ONE_QUEUE:
    _semantics.register(_cls, _one_queue)


@_semantics.register
def _wfq(policy: WFQ) -> _Semantics:
    _require_classes(policy.name, policy.thresholds)
    return _Semantics(policy.thresholds, (policy.rates,), reclaim=True, expressed=("T", "W"),
                      notes=("WFQ's fluid shares: a running job's GPU count changes as shares "
                             "move; production schedulers keep a job's gang fixed",))


@_semantics.register
def _wfq_hetero(policy: WFQHetero) -> _Semantics:
    _require_classes(policy.name, policy.thresholds)
    exponents = (policy.W_1, policy.W_2, policy.W_3)
    return _Semantics(policy.thresholds, _exponential(exponents, len(policy.thresholds)),
                      expressed=("T", "W_1", "W_2", "W_3"))


@_semantics.register
def _unified(policy: Unified) -> _Semantics:
    _require_classes(policy.name, policy.thresholds)
    exponents = (policy.W_1, policy.W_2, policy.W_3)
    return _Semantics(policy.thresholds, _exponential(exponents, len(policy.thresholds)),
                      _lease_tiers(policy.be_lease_s, policy.slo_lease_multiple,
                                   policy.slo_reward, policy.be_reward_scale, policy.preempt),
                      expressed=("T", "W_1", "W_2", "W_3", "be_lease_s", "slo_lease_multiple",
                                 "slo_reward", "be_reward_scale", "preempt"),
                      notes=(LEASE_NOTE,))


@_semantics.register
def _unisched(policy: UniSched) -> _Semantics:
    return _Semantics(tiers=_lease_tiers(policy.be_lease_s, policy.slo_lease_multiple,
                                         policy.slo_reward, policy.be_reward_scale, True),
                      expressed=("be_lease_s", "slo_lease_multiple", "slo_reward",
                                 "be_reward_scale"),
                      notes=(LEASE_NOTE,))


def _require_classes(name: str, thresholds: tuple[float, ...]) -> None:
    if not thresholds:
        raise InvalidConfigDocument(
            f"'fitted': {name} without class thresholds cannot be exported (the document has "
            "no fitted policy: a run from before fitted policies were recorded); re-select "
            "from a run of this version ('paretosearch select RUN'), or give 'fitted' with "
            "thresholds")


def _exponential(exponents: Sequence[float], k: int) -> tuple[tuple[float, ...], ...]:
    """The class weights of each exponent (:func:`policies.pcs.wfq.class_weights`)."""
    return tuple(tuple(float(v) for v in class_weights(W, k)) for W in exponents)


def _lease_tiers(be_lease_s: float, multiple: int, slo_reward: float, be_reward_scale: float,
                 be_preemptible: bool) -> tuple[JobTier, JobTier]:
    """SLO and best-effort tiers: priorities from the rewards' scales (an SLO job is worth up to
    ``slo_reward``, a best-effort job up to ``be_reward_scale``), SLO lease = multiple x BE."""
    slo, be = scaled_integers([slo_reward, be_reward_scale])
    return (JobTier("slo", slo, be_lease_s * multiple, True),
            JobTier("best-effort", be, be_lease_s, be_preemptible))


def build_plan(doc: Mapping[str, Any], *, source: str = "config document") -> Plan:
    """The plan for a config document (module docstring); ``source`` names it in errors.

    Raises:
        InvalidConfigDocument: naming the field at fault and its value.
    """
    if not isinstance(doc, Mapping):
        raise InvalidConfigDocument(f"{source}: expected a JSON object with 'policy', 'params', "
                                    f"'fitted' and 'cluster', got {type(doc).__name__}")
    policy = _policy(doc, source)
    gpus = _cluster(doc, source)
    _provenance(doc, source)
    try:
        sem = _semantics(policy)
    except InvalidConfigDocument as exc:
        raise InvalidConfigDocument(f"{source}, {exc}") from exc
    _check_semantics(sem, source)
    types = tuple(gpus)
    classes = []
    for k, bound in enumerate(sem.thresholds):
        by_type = {t: sem.weights[min(r, len(sem.weights) - 1)][k] for r, t in enumerate(types)}
        share = sum(gpus[t] * w for t, w in by_type.items()) / sum(gpus.values())
        classes.append(SizeClass(_class_name(k, len(sem.thresholds)), bound, share, by_type))
    domains = type(policy).domains()
    lost = [f"{name}={_fmt(getattr(policy, name))}: {dom.help}"
            for name, dom in domains.items() if name not in sem.expressed]
    return Plan(policy.name, gpus, tuple(classes), sem.tiers, sem.reclaim,
                (*sem.notes, *lost), dict(doc))


def _check_semantics(sem: _Semantics, source: str) -> None:
    """Refuse what no scheduler can hold, before anything is rendered or written: class
    bounds that are not positive and ascending (the last may be unbounded), and weights that
    are not finite and non-negative (a NaN or negative value a policy let through)."""
    bounds = list(sem.thresholds)
    numbers = all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)
    if not (numbers and bounds and all(0 < b < MAX_BOUND for b in bounds[:-1])
            and (0 < bounds[-1] < MAX_BOUND or bounds[-1] == math.inf)
            and bounds == sorted(bounds)):
        raise InvalidConfigDocument(located(
            source, column="fitted.thresholds", value=bounds,
            problem="expected positive, ascending class bounds in GPU-seconds, below 2^63 "
                    "(the last may be null: unbounded)",
            fix="re-select from a run of this version"))
    for row in sem.weights:
        if not all(isinstance(w, int | float) and math.isfinite(w) and w >= 0 for w in row):
            raise InvalidConfigDocument(located(
                source, column="fitted", value=list(row),
                problem="expected finite, non-negative class weights",
                fix="re-select from a run of this version"))


_PROVENANCE: dict[str, tuple[type | tuple[type, ...], str]] = {
    "run": (str, "the run directory's path"), "front_index": (int, "an index of its front"),
    "config_sha256": (str, "a hex digest"), "objectives": (Mapping, "an object of values")}


def _provenance(doc: Mapping[str, Any], source: str) -> None:
    """Where the config came from (printed in every export's header): optional, well typed."""
    for field, (kind, meaning) in _PROVENANCE.items():
        value = doc.get(field)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise InvalidConfigDocument(located(source, column=field, value=value,
                                                problem=f"expected {meaning}",
                                                fix="leave it out or write it again with "
                                                    "'paretosearch select'"))


def _class_name(k: int, n: int) -> str:
    """Queue ``k`` of ``n``: ``class0``, ``class1``, ... or ``all`` for a single one."""
    return f"class{k}" if n > 1 else "all"


def _policy(doc: Mapping[str, Any], source: str) -> Policy:
    name = doc.get("policy")
    if not isinstance(name, str) or name.lower() not in REGISTRY:
        raise InvalidConfigDocument(located(source, column="policy", value=name,
                                            problem="expected a policy name",
                                            fix=f"one of {', '.join(sorted(REGISTRY))}"))
    try:  # as deployed: the fitted fields, else the parameters (one rule: ChosenConfig)
        chosen = ChosenConfig.from_dict(doc, source)
    except ParetoSearchError as exc:
        raise InvalidConfigDocument(str(exc)) from exc
    field = "fitted" if chosen.fitted else "params"
    try:
        return make_policy(name, chosen.deployed)
    except (InvalidPolicyParams, TypeError) as exc:
        raise InvalidConfigDocument(located(source, column=field, problem=str(exc))) from exc


def _cluster(doc: Mapping[str, Any], source: str) -> dict[str, int]:
    """GPUs per type, fastest first when the profile is a shipped one (else as given)."""
    cluster = doc.get("cluster")
    cluster = cluster if isinstance(cluster, Mapping) else {}
    gpus = cluster.get("gpus_by_type")
    if not isinstance(gpus, Mapping) or not gpus or not all(
            isinstance(t, str) and _GPU_TYPE.match(t) and isinstance(n, int)
            and not isinstance(n, bool) and 0 < n <= MAX_GPUS for t, n in gpus.items()):
        raise InvalidConfigDocument(located(
            source, column="cluster.gpus_by_type", value=gpus,
            problem=f"expected GPUs per type, e.g. {{'V100': 64}}, each an integer from 1 to "
                    f"{MAX_GPUS:,} and "
                    "each type a name of letters, digits and '_.-' (it is written into "
                    "scheduler configs)",
            fix="re-select from a run of this version, or add \"cluster\": {\"profile\": "
                "NAME, \"gpus_by_type\": {TYPE: COUNT}}"))
    profile = cluster.get("profile")
    if isinstance(profile, str) and profile in list_profiles():
        speed = load_profile(profile).relative_speed
        if all(t in speed for t in gpus):
            return {t: gpus[t] for t in sorted(gpus, key=lambda t: -speed[t])}
    return dict(gpus)


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def deployed_config(plan: Plan) -> dict[str, Any] | None:
    """What the exported queues do, as a policy the simulator runs (:mod:`policies.quota`):
    the plan's size classes (merged ones too) routed by their exact bounds, each owning the
    whole GPUs of its queues' nominal quotas (summed over GPU types), lending idle ones and
    borrowing by the integer queue weights, reclaiming by preemption where the plan does;
    jobs hold whole gangs. None for a plan with job tiers (their priorities and leases are
    not modelled)."""
    if plan.tiers:
        return None
    return {"policy": "quota", "params": {
        "reclaim": plan.reclaim,
        "quotas": [sum(q) for q in zip(*plan.quotas().values(), strict=True)],
        "weights": scaled_integers([c.weight for c in plan.classes]),
        "thresholds": [c.max_size_gpu_s if math.isfinite(c.max_size_gpu_s) else None
                       for c in plan.classes]}}


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data (an unbounded class size as None)."""
    return {"policy": plan.policy, "gpus_by_type": dict(plan.gpus_by_type),
            "classes": [{"name": c.name, "weight": c.weight,
                         "max_size_gpu_s": c.max_size_gpu_s if math.isfinite(c.max_size_gpu_s)
                         else None, "weight_by_type": dict(c.weight_by_type)}
                        for c in plan.classes],
            "tiers": [asdict(t) for t in plan.tiers], "reclaim": plan.reclaim,
            "cannot_express": list(plan.unexpressed)}
