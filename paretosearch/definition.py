"""What a search is, resolved on its samples (:class:`SearchDefinition`, a run's ``run.json``):
its config, the parameters searched and those dropped, and the samples it trains and tests
on. A resumed run must have the same definition; readers of a run (``select``, reports,
retunes) read it typed."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from paretosearch.config import SearchConfig, policy_of
from paretosearch.objectives import parse_objectives
from paretosearch.settings import SearchSettings
from simulator import Workload
from simulator.errors import ParetoSearchError, located

__all__ = ["SearchDefinition"]


@dataclass(frozen=True)
class SearchDefinition:
    """A search as resolved on its samples. Definitions are equal where the searches are the
    same (``config``, how it was asked for, is not compared: the rest follows from it)."""

    policy: str
    profile: str
    """The cluster profile's name."""
    objectives: tuple[str, ...]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    cluster: Mapping[str, Any] | None = None
    """The profile's name and GPUs by type (None: a run that predates it)."""
    settings: SearchSettings | None = None
    space: tuple[str, ...] | None = None
    """The parameters searched."""
    dropped: Mapping[str, str] = field(default_factory=dict)
    """Parameters not searched, each with why (kept at their defaults)."""
    train: tuple[str, ...] = ()
    """Where each training sample came from; ``test``: each test sample."""
    test: tuple[str, ...] = ()
    train_digests: tuple[str, ...] = ()
    """The training samples' content digests."""
    config: Mapping[str, Any] | None = field(default=None, compare=False)
    """The config as asked for (:meth:`SearchConfig.to_dict`: the profile as named, the
    generated samples' sizes); None where the run predates it. :meth:`search_config`."""

    @classmethod
    def of(cls, config: SearchConfig, space: Sequence[str], dropped: Mapping[str, str],
           train: Sequence[Workload], test: Sequence[Workload]) -> SearchDefinition:
        """The definition of a search for ``config`` with ``space`` on these samples."""
        profile = config.cluster
        return cls(config.policy, profile.name, tuple(config.objectives),
                   _plain(config.fixed), {"profile": profile.name,
                                          "gpus_by_type": dict(profile.gpus_by_type)},
                   config.settings, tuple(space), dict(dropped), tuple(w.source for w in train),
                   tuple(w.source for w in test), tuple(w.digest() for w in train),
                   config.to_dict())

    def search_config(self, source: str) -> SearchConfig:
        """The search's config, to search again (``source`` names the file in errors).

        Raises:
            ParetoSearchError: a run written before runs kept it (None) or a damaged one.
        """
        if self.config is None:
            raise ParetoSearchError(located(source, column="config", problem=(
                "missing: written by an earlier paretosearch")))
        return SearchConfig.from_dict(self.config, f"{source}, field config")

    def to_dict(self) -> dict[str, Any]:
        """As ``run.json`` holds it (:meth:`from_dict` reads it back)."""
        doc = {"policy": self.policy, "profile": self.profile, "cluster": self.cluster,
               "fixed": dict(self.fixed), "objectives": list(self.objectives),
               "settings": None if self.settings is None else asdict(self.settings),
               "space": None if self.space is None else list(self.space),
               "dropped": dict(self.dropped), "train": list(self.train),
               "test": list(self.test), "train_digests": list(self.train_digests),
               "config": self.config}
        return {k: v for k, v in doc.items() if v is not None}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], source: str) -> SearchDefinition:
        """The definition a ``run.json`` holds, as this or an earlier paretosearch wrote it
        (its shape checked by the reader); errors name ``source`` and the field."""
        for name, check in (("objectives", lambda: parse_objectives(doc["objectives"])),
                            ("fixed", lambda: policy_of(doc["policy"], doc.get("fixed", {})))):
            try:
                check()
            except ParetoSearchError as exc:
                raise ParetoSearchError(located(source, column=name, problem=str(exc))) from exc
        settings, space = doc.get("settings"), doc.get("space")
        try:
            settings = None if settings is None else SearchSettings(**settings)
        except (TypeError, ParetoSearchError) as exc:
            raise ParetoSearchError(located(source, column="settings", problem=str(exc))) from exc
        return cls(doc["policy"], doc["profile"], tuple(doc["objectives"]),
                   dict(doc.get("fixed") or {}),
                   doc.get("cluster"), settings, None if space is None else tuple(space),
                   dict(doc.get("dropped") or {}), tuple(doc.get("train") or ()),
                   tuple(doc.get("test") or ()), tuple(doc.get("train_digests") or ()),
                   doc.get("config"))


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    """Parameter values as JSON holds them (a tuple is a list), so that a definition read
    back equals the one written."""
    return dict(json.loads(json.dumps(dict(values))))
