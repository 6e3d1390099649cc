"""The nightly retune's inputs: its spec (``retune.yaml``) and the newest window of a trace."""

from __future__ import annotations

import glob
import math
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from paretosearch.config import SearchConfig
from paretosearch.io import regular_file
from paretosearch.settings import SearchSettings, options
from simulator import Workload, parametric_table, read_trace
from simulator.errors import ParetoSearchError, located
from simulator.inputs.files import read_yaml
from simulator.inputs.model_info import load_scaling

__all__ = ["RetuneSpec", "TooFewJobs", "Window", "read_window"]


class TooFewJobs(ParetoSearchError, ValueError):
    """The window is too thin to tune on."""


_KEYS = {"trace", "scaling_table", "window", "profile", "policy", "fixed", "objectives",
         "search", "warm_start", "production", "out", "workers", "slo_mix", "sharing"}
_WINDOW_KEYS = {"seconds", "min_jobs", "max_jobs"}
_SEARCH_KEYS = {o.key.removeprefix("search.") for _, o in options(SearchSettings) if o.key}
_WINDOW_S, _MIN_JOBS = 7 * 86400.0, 200
_KINDS = {int: "an integer", str: "text", list: "a list", dict: "a mapping",
          bool: "true or false"}


@dataclass(frozen=True)
class RetuneSpec:
    """What a nightly retune does (``retune.yaml``; see ``deploy/retune.yaml``).

    Paths in the file are relative to the file's folder.
    """

    trace: str
    """A trace file, or a glob of files whose arrival times share one clock."""
    out: Path
    """The retune's folder: ``runs/``, ``current``, ``cache.sqlite``, ``retune.lock``."""
    window_s: float = _WINDOW_S
    min_jobs: int = _MIN_JOBS
    max_jobs: int | None = None
    scaling_table: Path | None = None
    config: SearchConfig = field(default_factory=SearchConfig)
    """The search: the spec's ``policy``, ``profile``, ``fixed``, ``objectives``, ``search``
    (budget, sizes, seed, mode), ``slo_mix`` and ``sharing``."""
    warm_start: bool = True
    production: Path | None = None
    """The config in production (``chosen.json`` of ``paretosearch select``)."""
    workers: int = 2
    workers_named: bool = False
    """Whether the spec names ``workers`` (then no cluster file from the environment or the
    working directory is used)."""

    @classmethod
    def load(cls, path: str | Path) -> RetuneSpec:
        """Read and check ``retune.yaml``; errors name the file, field and value."""
        path = Path(path)
        doc = read_yaml(path, ParetoSearchError, "retune spec")
        if not isinstance(doc, dict):
            raise ParetoSearchError(f"{path}: a retune spec is a mapping of fields "
                                    "(see deploy/retune.yaml)")
        spec = _Fields(str(path), doc, path.parent)
        window, search = spec.section("window", _WINDOW_KEYS), spec.section("search", _SEARCH_KEYS)
        spec.only(_KEYS)
        min_jobs = window.integer("min_jobs", _MIN_JOBS, low=2)
        max_jobs = window.get("max_jobs", int, None)
        if max_jobs is not None and max_jobs < min_jobs:
            raise window.fail("max_jobs", max_jobs, f"must be >= window.min_jobs ({min_jobs})")
        return cls(
            trace=str(spec.required_path("trace")), out=spec.required_path("out"),
            window_s=window.number("seconds", _WINDOW_S, low=0.0), min_jobs=min_jobs,
            max_jobs=max_jobs, scaling_table=spec.path("scaling_table"),
            config=_config({"": spec, "search": search}),
            warm_start=spec.get("warm_start", bool, True), production=spec.path("production"),
            workers=spec.integer("workers", 2, low=0), workers_named="workers" in spec.doc)


def _config(sections: dict[str, _Fields]) -> SearchConfig:
    """The search a spec asks for: each field declared with a retune key
    (:class:`~paretosearch.settings.Option`) read from its section, of the field's kind, and
    checked as the config checks it (policy first: the fixed parameters are its own)."""
    values: dict[type, dict[str, Any]] = {SearchConfig: {}, SearchSettings: {}}
    defaults: dict[type, Any] = {SearchConfig: SearchConfig(), SearchSettings: SearchSettings()}
    for cls in (SearchConfig, SearchSettings):
        for f, o in options(cls):
            if o.key is None:
                continue
            section, _, key = o.key.rpartition(".")
            fields_ = sections[section]
            if key not in fields_.doc:
                continue
            kind = _kind(typing.get_type_hints(cls)[f.name])
            # an explicit null only where the default is one
            value = fields_.get(key, kind, getattr(defaults[cls], f.name))
            read: Any = tuple(value) if kind is list else value
            policy = values[SearchConfig].get("policy", SearchConfig.policy)
            try:
                if cls is SearchSettings:
                    SearchSettings(**{f.name: read})
                else:
                    SearchConfig(**{"policy": policy, f.name: read})
            except ParetoSearchError as exc:  # the settings' messages name the value
                raise fields_.fail(key, None if cls is SearchSettings else value,
                                   str(exc)) from exc
            values[cls][f.name] = read
    return SearchConfig(**values[SearchConfig], settings=SearchSettings(**values[SearchSettings]))


def _kind(annotation: Any) -> type:
    """What a spec holds for a field of this type: a list, a mapping or the scalar itself."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return list
    if origin is Mapping:
        return dict
    scalar: type = next((a for a in typing.get_args(annotation) if a is not type(None)),
                        annotation)
    return scalar


class _Fields:
    """Typed reads of one mapping of a spec file, with errors that say where."""

    def __init__(self, source: str, doc: dict[str, Any], base: Path, prefix: str = "") -> None:
        self.source, self.doc, self.base, self.prefix = source, doc, base, prefix

    def fail(self, key: str, value: object, problem: str) -> ParetoSearchError:
        return ParetoSearchError(located(self.source, column=self.prefix + key, value=value,
                                         problem=problem))

    def only(self, keys: set[str]) -> None:
        unknown = sorted(set(self.doc) - keys)
        if unknown:
            raise self.fail(unknown[0], self.doc[unknown[0]],
                            f"unknown field; the fields are {', '.join(sorted(keys))}")

    def get(self, key: str, kind: type, default: Any) -> Any:
        value = self.doc.get(key, default)
        if (value is None and default is not None) or (  # an explicit null where none fits
                value is not None and not isinstance(value, kind)) or (
                kind is not bool and isinstance(value, bool)):
            raise self.fail(key, value, f"must be {_KINDS[kind]}")
        return value

    def number(self, key: str, default: float, *, low: float) -> float:
        value = self.doc.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value >= low):
            raise self.fail(key, value, f"must be a number >= {low:g}")
        return float(value)

    def integer(self, key: str, default: int, *, low: int) -> int:
        """The integer at ``key`` (>= ``low``), or ``default`` where the key is absent."""
        if key not in self.doc:
            return default
        value = self.doc[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(key, value, f"must be an integer >= {low}")
        return value

    def path(self, key: str) -> Path | None:
        """An optional path, made absolute against the spec's folder (not resolved)."""
        value = self.get(key, str, None)
        return None if value is None else Path(os.path.abspath(
            self.base / Path(value).expanduser()))

    def required_path(self, key: str) -> Path:
        path = self.path(key)
        if path is None:
            raise self.fail(key, None, "is required")
        return path

    def section(self, key: str, keys: set[str]) -> _Fields:
        sub = _Fields(self.source, self.get(key, dict, {}), self.base, f"{key}.")
        sub.only(keys)
        return sub


# --- the window -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Window:
    """The newest window of the trace, arrivals re-based to 0."""

    workload: Workload
    files: list[str]
    start_s: float
    """First and last arrival of the window, on the trace's clock."""
    end_s: float
    jobs_in_trace: int


def read_window(spec: RetuneSpec) -> Window:
    """The jobs that arrived in the last ``window_s`` seconds of the trace (the newest
    ``max_jobs`` of them, if set); :class:`TooFewJobs` below ``min_jobs``."""
    files = sorted(glob.glob(spec.trace)) if glob.has_magic(spec.trace) else [spec.trace]
    if not files:
        raise ParetoSearchError(f"{spec.trace}: no trace file matches; check the spec's "
                                "'trace' field")
    scaling = (None if spec.scaling_table is None else
               load_scaling(spec.scaling_table).merged(parametric_table(64)))
    frames = [read_trace(regular_file(f), scaling=scaling).to_frame() for f in files]
    frame = pd.concat(frames, ignore_index=True)
    if len(files) > 1:  # a job re-exported by a later file is kept once
        frame = frame.drop_duplicates(keep="last")
    frame = frame.sort_values("arrival_s", kind="stable")
    newest = float(frame["arrival_s"].iloc[-1])
    window = frame[frame["arrival_s"] >= newest - spec.window_s]
    if spec.max_jobs is not None:
        window = window.iloc[-spec.max_jobs:]
    if len(window) < spec.min_jobs:
        raise TooFewJobs(f"{spec.trace}: {len(window)} jobs arrived in the last "
                         f"{spec.window_s:g} s (window.min_jobs is {spec.min_jobs}); nothing "
                         "published, 'current' unchanged")
    start = float(window["arrival_s"].iloc[0])
    window = window.assign(arrival_s=window["arrival_s"] - start)
    name = files[0] if len(files) == 1 else spec.trace
    workload = Workload.from_frame(window, scaling=scaling,
                                   source=f"{name}[{start:.0f}s..{newest:.0f}s]")
    return Window(workload, files, start, newest, len(frame))
