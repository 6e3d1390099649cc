"""The records a run publishes, typed: a front member (:class:`FrontEntry`) and the
configuration chosen to deploy (:class:`ChosenConfig`). On disk they are JSON objects of the
same fields (``front.json``, ``chosen.json``); these classes are what code reads."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from paretosearch.search.objectives import Objective

__all__ = ["ChosenConfig", "FrontEntry", "config_hash"]


@dataclass(frozen=True)
class FrontEntry:
    """One configuration of the Pareto front."""

    params: Mapping[str, Any]
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
        return cls(dict(doc["params"]), dict(doc["objectives"]), dict(doc["metrics"]),
                   doc.get("test_metrics"), doc.get("fitted"))

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it."""
        return asdict(self)


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
    def of(cls, spec: Mapping[str, Any], entry: FrontEntry, *, front_index: int | None = None,
           run: str | None = None) -> ChosenConfig:
        """Front ``entry`` of the run with ``spec`` (``run.json``) as a ready config."""
        deployed = {"policy": spec["policy"], "params": {**spec["fixed"], **entry.params},
                    "fitted": None if entry.fitted is None else dict(entry.fitted)}
        return cls(deployed["policy"], deployed["params"], deployed["fitted"],
                   dict(entry.objectives), spec.get("cluster"), config_hash(deployed),
                   entry.test_metrics, front_index, run)

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it (where it came from only where known)."""
        doc = asdict(self)
        return {k: v for k, v in doc.items()
                if v is not None or k not in ("test_metrics", "front_index", "run")}


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 of a config's ``policy``, ``params`` and ``fitted`` (what is deployed)."""
    deployed = {k: config.get(k) for k in ("policy", "params", "fitted")}
    return hashlib.sha256(json.dumps(deployed, sort_keys=True).encode()).hexdigest()
