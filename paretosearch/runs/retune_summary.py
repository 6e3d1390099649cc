"""What a nightly retune records, typed: what it set out to do (:class:`RetuneStart`,
``retune-start.json``) and what it published (:class:`RetuneSummary`, ``retune.json``), with
the production config's drift (:class:`ProductionCheck`). On disk they are the JSON objects
:meth:`to_dict` gives; :class:`~paretosearch.runs.store.RunStore` checks their shape, derived
from these classes (:func:`~paretosearch.runs.shapes.shape_of`), before :meth:`from_dict`
reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Change", "Drift", "ObjectiveDrift", "PassedOver", "ProductionCheck",
           "RetuneStart", "RetuneSummary", "RetuneWindow", "SincePrevious", "WarmStart"]


@dataclass(frozen=True)
class RetuneWindow:
    """The newest window of the trace, the workload a retune searched on."""

    files: tuple[str, ...]
    jobs: int
    jobs_in_trace: int
    start_s: float
    """First and last arrival of the window, on the trace's clock."""
    end_s: float
    digest: str
    """The window's workload digest (what the evaluation cache keys on)."""

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RetuneWindow:
        return cls(tuple(doc["files"]), doc["jobs"], doc["jobs_in_trace"], doc["start_s"],
                   doc["end_s"], doc["digest"])


@dataclass(frozen=True)
class WarmStart:
    """The configurations the first generation starts from."""

    source: str | None = field(metadata={"json": "from"})
    """The published run they came from (``from`` on disk); None: a cold start."""
    configs: int
    seeds: tuple[Mapping[str, Any], ...] | None = None
    """The configurations themselves (kept in ``retune-start.json`` only, so that a resumed
    run starts as it began)."""

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> WarmStart:
        seeds = doc.get("seeds")
        return cls(doc["from"], doc["configs"], None if seeds is None else tuple(seeds))

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"from": self.source, "configs": self.configs}
        return doc if self.seeds is None else {**doc, "seeds": [dict(s) for s in self.seeds]}


@dataclass(frozen=True)
class PassedOver:
    """The newest run, when it was neither published nor resumed (it is left as it is)."""

    run: str
    why: str


@dataclass(frozen=True)
class RetuneStart:
    """What a retune run is about to do: its folder, whether it resumes, its window and
    warm start."""

    run: str
    resumed: bool
    window: RetuneWindow
    warm_start: WarmStart
    not_resumed: PassedOver | None = None

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RetuneStart:
        passed = doc.get("not_resumed")
        return cls(doc["run"], doc["resumed"], RetuneWindow.from_dict(doc["window"]),
                   WarmStart.from_dict(doc["warm_start"]),
                   None if passed is None else PassedOver(passed["run"], passed["why"]))

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "resumed": self.resumed, "window": _plain(self.window),
                "warm_start": self.warm_start.to_dict(),
                "not_resumed": None if self.not_resumed is None else _plain(self.not_resumed)}


@dataclass(frozen=True)
class ObjectiveDrift:
    """One objective of a drift check: production's value and, where the front dominates
    production, the safest switch's value and its relative gain (positive = better)."""

    production: float
    front: float | None = None
    gain: float | None = None


@dataclass(frozen=True)
class Drift:
    """How a new front compares with the production config on one sample."""

    dominated: bool
    """Some front member is at least as good on every objective and better on one."""
    dominated_by: tuple[int, ...]
    """Their indices on the front."""
    best: int | None
    """The dominating member whose smallest gain is largest: the safest switch."""
    objectives: Mapping[str, ObjectiveDrift]

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Drift:
        return cls(doc["dominated"], tuple(doc["dominated_by"]), doc["best"],
                   {k: ObjectiveDrift(**v) for k, v in doc["objectives"].items()})

    def to_dict(self) -> dict[str, Any]:
        return {"dominated": self.dominated, "dominated_by": list(self.dominated_by),
                "best": self.best,
                "objectives": {k: {f: v for f, v in _plain(o).items()
                                   if v is not None or f == "production"}
                               for k, o in self.objectives.items()}}


@dataclass(frozen=True)
class Change:
    """One objective of the production config, the previous run and now (``change``:
    relative, positive = worse; None where the previous value was 0)."""

    before: float
    now: float
    change: float | None


@dataclass(frozen=True)
class SincePrevious:
    """How the same production config moved since the previous published run."""

    run: str
    objectives: Mapping[str, Change]


@dataclass(frozen=True)
class ProductionCheck:
    """The production config re-evaluated on the new window, and its drift."""

    source: str
    """The chosen-config file it was read from (resolved)."""
    config_sha256: str
    policy: str
    config: Mapping[str, Any]
    """Every field as deployed."""
    train: Mapping[str, float]
    """Its value of each objective on the training and the test sample."""
    test: Mapping[str, float]
    drift_train: Drift
    drift_test: Drift
    since_previous: SincePrevious | None

    @property
    def drifted(self) -> bool:
        """The new front dominates it on both samples."""
        return self.drift_train.dominated and self.drift_test.dominated

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ProductionCheck:
        since = doc.get("since_previous")
        return cls(doc["source"], doc["config_sha256"], doc["policy"], doc["config"],
                   doc["train"], doc["test"], Drift.from_dict(doc["drift_train"]),
                   Drift.from_dict(doc["drift_test"]),
                   None if since is None else SincePrevious(
                       since["run"], {k: Change(**v) for k, v in since["objectives"].items()}))

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "config_sha256": self.config_sha256,
                "policy": self.policy, "config": dict(self.config), "train": dict(self.train),
                "test": dict(self.test), "drift_train": self.drift_train.to_dict(),
                "drift_test": self.drift_test.to_dict(),
                "since_previous": None if self.since_previous is None
                else _plain(self.since_previous)}


@dataclass(frozen=True)
class RetuneSummary:
    """A published retune (``retune.json``): where it started, what it searched, what it
    cost, the production config's drift and the exit code."""

    start: RetuneStart = field(metadata={"json": ""})
    """As it started (its warm start without the configurations themselves)."""
    published_at: str
    previous: str | None
    """The run ``current`` pointed at before."""
    policy: str
    objectives: tuple[str, ...]
    evaluations_run: int = field(metadata={"json": "evaluations.run"})
    evaluations_from_cache: int = field(metadata={"json": "evaluations.from_cache"})
    front_size: int
    wall_s: float
    production: ProductionCheck | None
    """None: the spec names no production config."""
    exit: int

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RetuneSummary:
        prod = doc["production"]
        return cls(RetuneStart.from_dict(doc), doc["published_at"], doc["previous"],
                   doc["policy"], tuple(doc["objectives"]), doc["evaluations"]["run"],
                   doc["evaluations"]["from_cache"], doc["front_size"], doc["wall_s"],
                   None if prod is None else ProductionCheck.from_dict(prod), doc["exit"])

    def to_dict(self) -> dict[str, Any]:
        return {**self.start.to_dict(), "published_at": self.published_at,
                "previous": self.previous, "policy": self.policy,
                "objectives": list(self.objectives),
                "evaluations": {"run": self.evaluations_run,
                                "from_cache": self.evaluations_from_cache},
                "front_size": self.front_size, "wall_s": self.wall_s,
                "production": None if self.production is None else self.production.to_dict(),
                "exit": self.exit}


def _plain(record: Any) -> dict[str, Any]:
    """A record of plain fields (and records of them) as JSON holds it."""
    doc = asdict(record)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in doc.items()}
