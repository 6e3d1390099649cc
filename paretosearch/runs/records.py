"""The records a run publishes, typed: a front member (:class:`FrontEntry`) and the
configuration chosen to deploy (:class:`ChosenConfig`). On disk they are JSON objects of the
same fields (``front.json``, ``chosen.json``); these classes are what code reads.

A front is published with the baselines beside it, and honestly: each entry names the
baselines that dominate it on the held-out test sample (:func:`mark_dominated`), and
:func:`front_warnings` says in words where a baseline beats the whole front."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from paretosearch.objectives import Objective, dominates, indistinct, parse_objectives
from paretosearch.runs.shapes import NUMBER, Or
from simulator.errors import ParetoSearchError, located

if TYPE_CHECKING:
    from paretosearch.definition import SearchDefinition

__all__ = ["BaselineWarning", "ChosenConfig", "FrontDocument", "FrontEntry", "config_hash",
           "front_warnings", "mark_dominated"]

Records = Mapping[str, Mapping[str, float]]
"""Baselines' records by name (``front.json``'s ``baselines`` or ``baselines_test``)."""


class BaselineWarning(UserWarning):
    """A baseline dominates every configuration of a published front (on either sample)."""


@dataclass(frozen=True)
class FrontEntry:
    """One configuration of the Pareto front."""

    params: Mapping[str, Any] = field(metadata={"shape": {str: Or(int, float, str, bool, None)}})
    """The searched parameters (the fixed ones are in the run's spec)."""
    objectives: Mapping[str, float]
    """Its value of each objective, by label, on the training sample."""
    metrics: Mapping[str, float]
    """Every metric measured on the training sample."""
    test_metrics: Mapping[str, float] | None = None
    """Every metric on the held-out test sample (None: not evaluated there)."""
    fitted: Mapping[str, Any] | None = None
    """Every field of the policy as fitted to the training workload (WFQ's classes), what an
    export deploys; None where the run predates it."""
    dominated_by: tuple[str, ...] | None = None
    """The baselines that dominate it on the test sample, on the run's objectives (empty:
    none does); None where no baseline was evaluated on the test sample."""

    @classmethod
    def of(cls, params: Mapping[str, Any], record: Mapping[str, float],
           objectives: Sequence[Objective], test: Mapping[str, float] | None = None,
           fitted: Mapping[str, Any] | None = None) -> FrontEntry:
        """The entry of a configuration with training ``record`` (its objectives picked
        from it), ``test`` record and ``fitted`` fields."""
        return cls(dict(params), {o.label: record[o.label] for o in objectives}, dict(record),
                   None if test is None else dict(test), None if fitted is None else dict(fitted))

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> FrontEntry:
        """The entry a JSON object holds (``front.json``; its shape checked by the reader)."""
        beaten, test = doc.get("dominated_by"), doc.get("test_metrics")
        return cls(dict(doc["params"]), _numbers(doc["objectives"]), _numbers(doc["metrics"]),
                   None if test is None else _numbers(test), doc.get("fitted"),
                   None if beaten is None else tuple(beaten))

    @property
    def dominated(self) -> bool:
        """Whether some baseline dominates it on the test sample."""
        return bool(self.dominated_by)

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it."""
        return asdict(self)


@dataclass(frozen=True)
class FrontDocument:
    """A run's published front (``front.json``): the front, the baselines on both samples,
    the hypervolume per generation, the parameters not searched, whether the search
    finished."""

    front: list[FrontEntry]
    """Each entry with the baselines that dominate it on the test sample."""
    hypervolume: tuple[tuple[int, float], ...] = field(default=(), metadata={
        "shape": [{"evaluations": int, "hypervolume": NUMBER}]})
    """(evaluations, hypervolume) after each generation."""
    baselines: Records = field(default_factory=dict)
    """Each baseline's record on the training sample; ``baselines_test``: on the test sample."""
    baselines_test: Records = field(default_factory=dict)
    dropped: Mapping[str, str] = field(default_factory=dict)
    """Parameters not searched, each with why."""
    done: bool = False
    """Whether the search finished (else it still runs, or was interrupted)."""

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> FrontDocument:
        """The document a ``front.json`` holds (its shape checked by the reader); entries
        written before they recorded the baselines that dominate them are marked here."""
        tests = {n: _numbers(r) for n, r in (doc.get("baselines_test") or {}).items()}
        front = [FrontEntry.from_dict(e) for e in doc["front"]]
        if any(e.dominated_by is None for e in front):
            front = mark_dominated(front, tests)
        return cls(front, tuple((h["evaluations"], math.nan if h["hypervolume"] is None
                                 else float(h["hypervolume"]))
                                for h in doc.get("hypervolume") or ()),
                   {n: _numbers(r) for n, r in (doc.get("baselines") or {}).items()}, tests,
                   dict(doc.get("dropped") or {}), bool(doc.get("done")))

    def warnings(self) -> list[str]:
        """:func:`front_warnings` of this front and its baselines."""
        return front_warnings(self.front, self.baselines, self.baselines_test)


@dataclass(frozen=True)
class ChosenConfig:
    """A front member made a ready config (``chosen.json``): what to deploy, what it scored,
    the cluster it was tuned for, and where it came from."""

    policy: str
    params: Mapping[str, Any]
    """Every parameter: the run's fixed ones and the searched ones."""
    fitted: Mapping[str, Any] | None
    """Every field of the policy as fitted to the training workload (what is deployed)."""
    objectives: Mapping[str, float]
    cluster: Mapping[str, Any] | None
    """The profile's name and GPUs by type (the run's spec)."""
    config_sha256: str
    """A hash of what is deployed: :func:`config_hash`."""
    test_metrics: Mapping[str, float] | None = None
    """Every metric on the test sample, where it was evaluated there."""
    front_index: int | None = None
    """Its index on the run's front, where it was chosen from there."""
    run: str | None = None
    """The run's own directory (resolved: not a link such as ``runs/latest``, which moves)."""

    @classmethod
    def of(cls, spec: SearchDefinition, entry: FrontEntry, *, front_index: int | None = None,
           run: str | None = None) -> ChosenConfig:
        """Front ``entry`` of the run with ``spec`` (``run.json``) as a ready config."""
        params = {**spec.fixed, **entry.params}
        fitted = None if entry.fitted is None else dict(entry.fitted)
        return cls(spec.policy, params, fitted, dict(entry.objectives), spec.cluster,
                   config_hash({"policy": spec.policy, "params": params, "fitted": fitted}),
                   entry.test_metrics, front_index, run)

    @property
    def deployed(self) -> Mapping[str, Any]:
        """Every field as deployed: ``fitted`` where it holds any (WFQ's class thresholds
        are fixed numbers in production, not fitted again), else ``params``."""
        return dict(self.fitted or self.params)

    @classmethod
    def from_dict(cls, doc: Any, source: str) -> ChosenConfig:
        """The config a ``chosen.json`` holds (``paretosearch select``), or one written by
        hand with only ``policy`` and ``params``; errors name ``source`` and the field."""
        fix = "write it with 'paretosearch select RUN --out FILE'"
        doc = doc if isinstance(doc, dict) else {}
        for name, kind, what, needed in (
                ("policy", str, "a policy name", True),
                ("params", dict, "an object of parameter values", "params" in doc),
                ("fitted", dict, "an object of parameter values", False)):
            value = doc.get(name)
            if not isinstance(value, kind) and (needed or value is not None):
                raise ParetoSearchError(located(source, column=name, value=value,
                                                problem=f"expected {what}", fix=fix))
        known = {f.name for f in fields(cls)}
        return cls(**{"params": {}, "objectives": {}, "cluster": None, "fitted": None,
                      **{k: v for k, v in doc.items() if k in known},
                      "config_sha256": config_hash(doc)})

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it (where it came from only where known)."""
        doc = asdict(self)
        return {k: v for k, v in doc.items()
                if v is not None or k not in ("test_metrics", "front_index", "run")}


def mark_dominated(front: Sequence[FrontEntry], baselines_test: Records) -> list[FrontEntry]:
    """The entries, each with the baselines that dominate it on the test sample
    (``dominated_by``; an entry never evaluated there is dominated by none). With no
    baseline evaluated on the test sample, the entries as they are."""
    if not baselines_test:
        return list(front)
    return [replace(e, dominated_by=tuple(
        name for name, rec in baselines_test.items()
        if e.test_metrics is not None and _beats(rec, e.test_metrics, e)))
        for e in front]


def front_warnings(front: Sequence[FrontEntry], baselines: Records,
                   baselines_test: Records) -> list[str]:
    """What an operator must hear before choosing from ``front``: each baseline that
    dominates every entry on the training sample (the search missed it), how many entries
    baselines dominate there (the family, as searched, loses to them), those that dominate
    every entry on the test sample (the front does not hold up on unseen data), and how many
    entries a baseline dominates on the test sample."""
    if not front:
        return []
    on_train = {name: [_beats(rec, e.metrics, e) for e in front]
                for name, rec in baselines.items()}
    out = [f"the baseline {name} dominates the whole front on the training sample: the search "
           "missed it. Search with a larger budget, or use the baseline"
           for name, hits in on_train.items() if all(hits)]
    missed = [name for name, hits in on_train.items() if any(hits) and not all(hits)]
    if missed:
        k = sum(any(on_train[name][i] for name in missed) for i in range(len(front)))
        out.append(f"{k} of {len(front)} configurations are dominated already on the training "
                   f"sample, by {', '.join(missed)}: this policy family, as searched, does not "
                   "reach those baselines' trade-offs there. Search with a larger budget, or "
                   "deploy the baseline if its trade-off suits")
    tested = [e for e in front if e.test_metrics is not None]
    objectives = parse_objectives(front[0].objectives)
    same = [e.test_metrics or {} for e in tested] + list(baselines_test.values())
    if len(same) > 1 and all(_defined(r, objectives) for r in same) and indistinct(
            same, objectives):
        out.append("the test sample does not tell the policies apart: every configuration and "
                   "baseline scores the same on it (its jobs hardly contend for GPUs), so it "
                   "says nothing of how the front holds up; test on a sample that loads the "
                   "cluster (a longer trace, or more generated jobs)")
    whole = [name for name, rec in baselines_test.items()
             if tested and all(_beats(rec, e.test_metrics or {}, e) for e in tested)]
    if whole:
        out.append(f"on the test sample, {', '.join(whole)} "
                   f"{'dominates' if len(whole) == 1 else 'each dominate'} every configuration "
                   "of the front: on unseen jobs this policy family, as searched, does not beat "
                   f"{'that baseline' if len(whole) == 1 else 'those baselines'}; deploy the "
                   "baseline, or search again with more replicates or a larger budget")
    beaten = [e for e in front if e.dominated]
    if beaten and len(whole) == 0:
        out.append(f"{len(beaten)} of {len(front)} configurations are dominated on the test "
                   "sample by a baseline (marked); 'select' skips them unless told "
                   "--include-dominated")
    return out


def _beats(baseline: Mapping[str, float], record: Mapping[str, float],
           entry: FrontEntry) -> bool:
    """Whether a baseline's record dominates ``record`` on ``entry``'s objectives (a value
    missing or undefined on either side decides nothing: no domination)."""
    objectives = parse_objectives(entry.objectives)
    return (_defined(baseline, objectives) and _defined(record, objectives)
            and dominates(baseline, record, objectives))


def _defined(record: Mapping[str, float], objectives: Sequence[Objective]) -> bool:
    """Whether ``record`` holds a number for every objective (not missing, not NaN)."""
    return all((v := record.get(o.label)) is not None and v == v for o in objectives)


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 of a config's ``policy``, ``params`` and ``fitted`` (what is deployed)."""
    deployed = {k: config.get(k) for k in ("policy", "params", "fitted")}
    return hashlib.sha256(json.dumps(deployed, sort_keys=True).encode()).hexdigest()


def _numbers(record: Mapping[str, Any]) -> dict[str, float]:
    """A record as JSON holds it, as numbers: null (how JSON writes NaN) back to NaN."""
    return {k: math.nan if v is None else float(v) for k, v in record.items()}
