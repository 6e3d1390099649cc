"""The nightly retune: search again on the newest window of a growing trace, publish.

One run of :func:`retune`:

1. takes the lock (``OUT/retune.lock``; a second overlapping retune stops at once);
2. reads the trace (a file or a glob of files on one clock), keeps the newest window;
3. resumes the newest unpublished run on the same window if one was interrupted, else starts
   a new versioned run in ``OUT/runs/<id>``, warm-started from the front ``OUT/current``
   points at; every evaluation also lands in the shared content-keyed cache
   (``OUT/cache.sqlite``), so nothing already simulated on this window runs again;
4. re-evaluates the configuration in production on the new window and reports drift:
   whether the new front dominates it, by how much on each objective, and how it moved
   since the last run;
5. writes ``retune.json`` and a report (``report.md`` + ``report.png``), and only then moves
   ``OUT/current`` to the new run (an atomic rename of a symlink): ``current`` never points
   at a partial run, and a failure anywhere leaves it where it was.

Exit codes (:class:`Exit`) tell cron / a CronJob / systemd what happened.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from paretosearch.api import PolicySearch
from paretosearch.cache import EvaluationCache
from paretosearch.io import write_json, write_text
from paretosearch.objectives import Objective, parse_objectives
from paretosearch.search import Progress, SearchSettings, param_key
from paretosearch.store import RunStore
from policies import REGISTRY
from simulator import ScalingTable, Workload, parametric_table, read_trace
from simulator.errors import ParetoSearchError, located
from simulator.slo import MIXES

__all__ = ["Exit", "RetuneFailed", "RetuneLocked", "RetuneOutcome", "RetuneSpec",
           "TooFewJobs", "drift", "read_window", "retune"]


class Exit(IntEnum):
    """What ``paretosearch retune`` exits with."""

    PUBLISHED = 0
    """A new run is published; the production config is not dominated (or none is set)."""
    BAD_INPUT = 2
    """The spec, trace or production config is wrong (the message says how); nothing done."""
    TOO_FEW_JOBS = 3
    """The window holds fewer jobs than ``window.min_jobs``; nothing published."""
    LOCKED = 4
    """Another retune holds the lock; nothing done."""
    DRIFT = 5
    """Published, and the new front dominates the production config on both samples."""
    FAILED = 6
    """Failed while running (disk full, unwritable folder, lost cluster); nothing published,
    ``current`` untouched; rerunning resumes without repeating finished evaluations."""


class TooFewJobs(ParetoSearchError):
    """The window is too thin to tune on."""


class RetuneLocked(ParetoSearchError):
    """Another retune is running on the same output folder."""


class RetuneFailed(ParetoSearchError):
    """The retune failed after it started; nothing was published."""


_KEYS = {"trace", "scaling_table", "window", "profile", "policy", "fixed", "objectives",
         "search", "warm_start", "production", "out", "workers", "slo_mix", "sharing"}
_WINDOW_KEYS = {"seconds", "min_jobs", "max_jobs"}
_SEARCH_KEYS = {"budget", "pop_size", "offspring", "seed"}
_WINDOW_S, _MIN_JOBS, _OBJECTIVES = 7 * 86400.0, 200, ("jct:avg", "pred_err:avg")


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
    profile: str = "pcs-64"
    policy: str = "wfq"
    fixed: Mapping[str, Any] = field(default_factory=dict)
    objectives: tuple[str, ...] = _OBJECTIVES
    settings: SearchSettings = field(default_factory=SearchSettings)
    warm_start: bool = True
    production: Path | None = None
    """The config in production (``chosen.json`` of ``paretosearch select``)."""
    workers: int = 2
    slo_mix: str | None = None
    sharing: bool = False

    @classmethod
    def load(cls, path: str | Path) -> RetuneSpec:
        """Read and check ``retune.yaml``; errors name the file, field and value."""
        path = Path(path)
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ParetoSearchError(f"{path}: cannot read the retune spec: {exc}") from exc
        if not isinstance(doc, dict):
            raise ParetoSearchError(f"{path}: a retune spec is a mapping of fields "
                                    "(see deploy/retune.yaml)")
        spec = _Fields(str(path), doc, path.parent)
        window, search = spec.section("window", _WINDOW_KEYS), spec.section("search", _SEARCH_KEYS)
        spec.only(_KEYS)
        objectives = tuple(spec.get("objectives", list, list(_OBJECTIVES)))
        try:
            parse_objectives(objectives)
        except ParetoSearchError as exc:
            raise spec.fail("objectives", objectives, str(exc)) from exc
        policy = spec.get("policy", str, "wfq")
        if policy not in REGISTRY:
            raise spec.fail("policy", policy, f"not a policy; known: {', '.join(sorted(REGISTRY))}")
        slo_mix = spec.get("slo_mix", str, None)
        if slo_mix is not None and slo_mix not in MIXES:
            raise spec.fail("slo_mix", slo_mix, f"known mixes: {', '.join(sorted(MIXES))}")
        max_jobs = window.get("max_jobs", int, None)
        if max_jobs is not None and max_jobs < 2:
            raise window.fail("max_jobs", max_jobs, "must be >= 2")
        return cls(
            trace=str(spec.path("trace", required=True)),
            out=spec.path("out", required=True) or Path("."),
            window_s=window.number("seconds", _WINDOW_S, low=0.0),
            min_jobs=int(window.number("min_jobs", _MIN_JOBS, low=2)),
            max_jobs=max_jobs,
            scaling_table=spec.path("scaling_table"),
            profile=spec.get("profile", str, "pcs-64"), policy=policy,
            fixed=spec.get("fixed", dict, {}), objectives=objectives,
            settings=SearchSettings(budget=int(search.number("budget", 370, low=1)),
                                    pop_size=int(search.number("pop_size", 70, low=2)),
                                    n_offsprings=int(search.number("offspring", 105, low=1)),
                                    seed=int(search.number("seed", 0, low=0))),
            warm_start=spec.get("warm_start", bool, True), production=spec.path("production"),
            workers=int(spec.number("workers", 2, low=0)), slo_mix=slo_mix,
            sharing=spec.get("sharing", bool, False))


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
        if (value is not None and not isinstance(value, kind)) or (
                kind is not bool and isinstance(value, bool)):
            raise self.fail(key, value, f"must be a {kind.__name__}")
        return value

    def number(self, key: str, default: float, *, low: float) -> float:
        value = self.doc.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value >= low):
            raise self.fail(key, value, f"must be a number >= {low:g}")
        return float(value)

    def path(self, key: str, *, required: bool = False) -> Path | None:
        value = self.get(key, str, None)
        if value is None:
            if required:
                raise self.fail(key, None, "is required")
            return None
        return self.base / Path(value).expanduser()

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
               ScalingTable.from_csv(spec.scaling_table).merged(parametric_table(64)))
    frames = [read_trace(f, scaling=scaling).to_frame() for f in files]
    frame = pd.concat(frames, ignore_index=True)
    if len(files) > 1:  # a file re-exporting jobs of another keeps one copy (the newest)
        frame = frame.drop_duplicates("job_id", keep="last")
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


# --- drift ----------------------------------------------------------------------------------

def drift(front: Sequence[Mapping[str, Any]], production: Mapping[str, float],
          objectives: Sequence[Objective], *, sample: str = "metrics") -> dict[str, Any]:
    """How the new front compares with the production config on one sample.

    Returns ``dominated`` (some front member is at least as good on every objective and
    better on one), ``dominated_by`` (their indices), ``best`` (the dominating member whose
    smallest relative gain is largest: the safest switch) and per objective the production
    value, that member's value and the relative gain (positive = better than production).
    """
    def losses(rec: Mapping[str, float]) -> list[float]:
        return [o.loss(rec[o.label]) for o in objectives]

    prod = losses(production)
    rows = [(i, losses(e[sample])) for i, e in enumerate(front) if e.get(sample)]
    dominating = [(i, f) for i, f in rows
                  if all(a <= b for a, b in zip(f, prod, strict=True))
                  and any(a < b for a, b in zip(f, prod, strict=True))]

    def gains(f: list[float]) -> list[float]:
        return [(b - a) / abs(b) if b else math.inf * (b - a)
                for a, b in zip(f, prod, strict=True)]

    out: dict[str, Any] = {"dominated": bool(dominating),
                           "dominated_by": [i for i, _ in dominating], "best": None,
                           "objectives": {o.label: {"production": production[o.label]}
                                          for o in objectives}}
    if dominating:
        best, f = max(dominating, key=lambda r: min(gains(r[1])))
        out["best"] = best
        for o, gain in zip(objectives, gains(f), strict=True):
            out["objectives"][o.label].update(front=front[best][sample][o.label], gain=gain)
    return out


# --- one retune -----------------------------------------------------------------------------

@dataclass
class RetuneOutcome:
    """What a retune did."""

    exit: Exit
    run: Path
    summary: dict[str, Any]


def retune(spec: RetuneSpec, *, client: Any = None,
           on_generation: Callable[[Progress], None] | None = None,
           on_start: Callable[[dict[str, Any]], None] | None = None) -> RetuneOutcome:
    """Run one retune (see the module's documentation). ``client``: a Dask client or
    address (else a local cluster of ``spec.workers``); ``on_start`` hears what the run is
    about to do (window, resumed or new, warm start)."""
    with _locked(spec.out / "retune.lock"):
        window = read_window(spec)
        production = _read_production(spec.production)
        previous = _current(spec.out)
        try:
            with contextlib.closing(EvaluationCache(spec.out / "cache.sqlite")) as cache:
                return _retune(spec, window, production, previous, cache, client,
                               on_generation, on_start)
        except (ParetoSearchError, KeyboardInterrupt):
            raise
        except Exception as exc:  # disk full, unwritable folder, lost cluster, ...
            where = f"'current' still points at {previous}" if previous else "no run published"
            raise RetuneFailed(f"retune failed: {type(exc).__name__}: {exc}. Nothing was "
                               f"published ({where}); fix the cause and run again: finished "
                               "evaluations are kept and not repeated") from exc


def _retune(spec: RetuneSpec, window: Window, production: dict[str, Any] | None,
            previous: Path | None, cache: EvaluationCache, client: Any,
            on_generation: Callable[[Progress], None] | None,
            on_start: Callable[[dict[str, Any]], None] | None) -> RetuneOutcome:
    t0 = time.time()
    search = PolicySearch(window.workload, profile=spec.profile, policy=spec.policy,
                          fixed=spec.fixed, settings=spec.settings, client=client,
                          workers=spec.workers, slo_mix=spec.slo_mix, sharing=spec.sharing,
                          cache=cache)
    search.SetPreference(*spec.objectives)
    run, resume = _run_dir(spec.out, search, previous)
    search.store = RunStore(run)
    if resume:  # the warm start it began with (its first generation is in the checkpoint)
        about = {**json.loads((run / "retune-start.json").read_text()), "resumed": True}
        seeds: list[dict[str, Any]] = []
    else:
        seeds = _warm_seeds(previous, spec) if spec.warm_start else []
        about = {"run": str(run), "resumed": False, "window": _window_doc(window),
                 "warm_start": {"from": str(previous) if seeds else None,
                                "configs": len(seeds)}}
        write_json(about, run / "retune-start.json")
    if on_start is not None:
        on_start(about)
    with search:
        front = search.run(on_generation, resume=resume, initial=seeds)
        prod_eval = (search.evaluate(production["policy"], production["config"])
                     if production else None)
    objectives = search.objectives
    summary: dict[str, Any] = {
        **about, "published_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "previous": str(previous) if previous else None,
        "policy": spec.policy, "objectives": [o.label for o in objectives],
        "evaluations": {"run": cache.misses, "from_cache": cache.hits},
        "front_size": len(front), "wall_s": time.time() - t0, "production": None}
    code = Exit.PUBLISHED
    if production is not None and prod_eval is not None:
        train, test = prod_eval
        summary["production"] = {
            "source": str(spec.production), "policy": production["policy"],
            "config": production["config"],
            "train": {o.label: train[o.label] for o in objectives},
            "test": {o.label: test[o.label] for o in objectives},
            "drift_train": drift(front, train, objectives),
            "drift_test": drift(front, test, objectives, sample="test_metrics"),
            "since_previous": _since_previous(previous, production, train, objectives)}
        if summary["production"]["drift_train"]["dominated"] and \
                summary["production"]["drift_test"]["dominated"]:
            code = Exit.DRIFT
    summary["exit"] = int(code)
    _report(run, search.store, summary)
    write_json(summary, run / "retune.json")
    _point(spec.out / "current", run)
    return RetuneOutcome(code, run, summary)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (released by the OS if this process dies)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RetuneFailed(f"{path.parent}: cannot write here ({exc.strerror}); give 'out' a "
                           "writable folder. Nothing was published") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise RetuneLocked(f"{path}: another retune (pid {holder}) is running on this "
                               "folder; this one did nothing. Wait for it, or stagger the "
                               "schedules") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _current(out: Path) -> Path | None:
    """The run ``OUT/current`` points at, if any."""
    link = out / "current"
    return link.resolve() if link.is_symlink() and link.resolve().is_dir() else None


def _point(link: Path, run: Path) -> None:
    """Move the symlink ``link`` to ``run`` atomically (a new link renamed over it)."""
    tmp = link.with_name(f".{link.name}-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run.relative_to(link.parent))
    os.replace(tmp, link)
    fd = os.open(link.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself reaches the disk
    finally:
        os.close(fd)


def _run_dir(out: Path, search: PolicySearch, previous: Path | None) -> tuple[Path, bool]:
    """The newest run if it was interrupted on this same window (resume it), else a new one."""
    runs = sorted((out / "runs").glob("*")) if (out / "runs").is_dir() else []
    spec = json.loads(json.dumps(search.spec()))
    if runs and runs[-1] != previous and (runs[-1] / "run.json").exists():
        with contextlib.suppress(ParetoSearchError):
            if RunStore(runs[-1]).read_spec() == spec:
                return runs[-1], True
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run = out / "runs" / stamp
    n = 1
    while run.exists():
        n += 1
        run = out / "runs" / f"{stamp}-{n}"
    return run, False


def _warm_seeds(previous: Path | None, spec: RetuneSpec) -> list[dict[str, Any]]:
    """Where a warm start begins: the previous run's front, then its other evaluations by
    non-dominated rank on this spec's objectives (the most spread out first within a rank),
    up to the population size. None if it tuned another policy or cannot be read."""
    if previous is None:
        return []
    try:
        store = RunStore(previous)
        if store.read_spec()["policy"] != spec.policy:
            return []
        seeds = [dict(e["params"]) for e in store.read_front()["front"]]
        records = pd.read_parquet(previous / "records.parquet")
    except (ParetoSearchError, OSError, ValueError):  # nothing usable: a cold start
        return []
    labels = [o.label for o in parse_objectives(spec.objectives)]
    if not set(labels) <= set(records.columns):
        return seeds
    losses = np.array([[o.loss(v) for o, v in zip(parse_objectives(spec.objectives), row,
                                                   strict=True)]
                       for row in records[labels].to_numpy(dtype=float)])
    finite = np.flatnonzero(np.isfinite(losses).all(axis=1))
    names = [c for c in records.columns if c.startswith("param.")]
    rows = records[names].to_dict("records")
    seen = {param_key(p) for p in seeds}
    for front in NonDominatedSorting().do(losses[finite]):
        members = finite[front]
        spread = calc_crowding_distance(losses[members]) if len(members) > 2 else np.ones(len(
            members))
        for i in members[np.argsort(-spread, kind="stable")]:
            params = {n.removeprefix("param."): v for n, v in rows[i].items()
                      if not (isinstance(v, float) and math.isnan(v))}  # not in that run
            if len(seeds) < spec.settings.pop_size and param_key(params) not in seen:
                seen.add(param_key(params))
                seeds.append(params)
    return seeds


def _read_production(path: Path | None) -> dict[str, Any] | None:
    """The production config: policy and every field as deployed (``fitted`` if present:
    WFQ's class thresholds are fixed numbers in production, not re-derived nightly)."""
    if path is None:
        return None
    try:
        text = path.read_text()
    except OSError as exc:
        raise ParetoSearchError(f"{path}: cannot read the production config ({exc.strerror}); "
                                "fix the spec's 'production' field") from exc
    try:
        doc = json.loads(text)
        policy = doc["policy"]
        config = doc.get("fitted") or doc["params"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ParetoSearchError(f"{path}: not a chosen config ({exc!r}); write it with "
                                "'paretosearch select RUN --out FILE'") from exc
    if policy not in REGISTRY:
        raise ParetoSearchError(located(str(path), column="policy", value=policy,
                                        problem="not a known policy"))
    REGISTRY[policy].from_params(config)  # bad values fail here, naming the parameter
    return {"policy": policy, "config": config}


def _since_previous(previous: Path | None, production: Mapping[str, Any],
                    train: Mapping[str, float], objectives: Sequence[Objective]
                    ) -> dict[str, Any] | None:
    """How the production config's objective values moved since the previous run (same
    config only): relative change per objective (positive = worse)."""
    if previous is None or not (previous / "retune.json").exists():
        return None
    before = json.loads((previous / "retune.json").read_text()).get("production") or {}
    same = (before.get("policy"), before.get("config")) == (production["policy"],
                                                             production["config"])
    if not same or not before.get("train"):
        return None
    out = {}
    for o in objectives:
        old = before["train"].get(o.label)
        if old is not None:
            new = train[o.label]
            out[o.label] = {"before": old, "now": new,
                            "change": (o.loss(new) - o.loss(old)) / abs(old) if old else None}
    return {"run": str(previous), "objectives": out}


def _window_doc(window: Window) -> dict[str, Any]:
    return {"files": window.files, "jobs": len(window.workload),
            "jobs_in_trace": window.jobs_in_trace, "start_s": window.start_s,
            "end_s": window.end_s, "digest": window.workload.digest()}


# --- the report -----------------------------------------------------------------------------

def _report(run: Path, store: RunStore, summary: dict[str, Any]) -> None:
    """``report.md`` and ``report.png`` (the front, baselines and the production config)."""
    from paretosearch.cli_runs import fmt
    from paretosearch.plots import plot_front

    doc = store.read_front()
    prod = summary["production"]
    extra = {"production": prod["train"]} if prod else {}
    plot_front({**doc, "baselines": {**(doc.get("baselines") or {}), **extra}},
               run / "report.png", title=f"retune {run.name}")
    labels = summary["objectives"]
    w = summary["window"]
    lines = [f"# Retune {run.name}", "",
             f"- window: {w['jobs']:,} jobs of {w['jobs_in_trace']:,}, arrivals "
             f"{w['start_s']:,.0f} s .. {w['end_s']:,.0f} s "
             f"({(w['end_s'] - w['start_s']) / 3600:,.1f} h), digest `{w['digest']}`",
             f"- search: {summary['policy']}, objectives {', '.join(labels)}; "
             f"{summary['evaluations']['run']} evaluations run, "
             f"{summary['evaluations']['from_cache']} from the cache"
             + (" (resumed)" if summary["resumed"] else ""),
             f"- warm start: {summary['warm_start']['configs']} configurations from "
             f"{summary['warm_start']['from']}" if summary["warm_start"]["from"]
             else "- warm start: none (cold start)",
             f"- wall time: {summary['wall_s']:,.0f} s", "", "![front](report.png)", "",
             "## Front", "",
             "| # | " + " | ".join(f"{lab} | test" for lab in labels) + " | parameters |",
             "|---" * (2 + 2 * len(labels)) + "|"]
    for i, e in enumerate(doc["front"]):
        test = e.get("test_metrics") or {}
        cells = " | ".join(f"{fmt(e['objectives'][lab])} | {fmt(test.get(lab))}"
                           for lab in labels)
        params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in e["params"].items())
        lines.append(f"| {i} | {cells} | {params} |")
    for name, rec in (doc.get("baselines") or {}).items():
        cells = " | ".join(f"{fmt(rec.get(lab))} | " for lab in labels)
        lines.append(f"| {name} | {cells} | baseline |")
    lines += ["", "## Production config", ""]
    if prod is None:
        lines.append("No production config given (the spec's `production` field).")
    else:
        lines += _drift_lines(prod, labels)
    write_text(run / "report.md", "\n".join(lines) + "\n")


def _drift_lines(prod: dict[str, Any], labels: Sequence[str]) -> list[str]:
    from paretosearch.cli_runs import fmt

    lines = [f"`{prod['source']}` ({prod['policy']}), re-evaluated on this window.", ""]
    for sample in ("train", "test"):
        d = prod[f"drift_{sample}"]
        verdict = (f"**dominated** by {len(d['dominated_by'])} front configurations; the "
                   f"safest switch is #{d['best']}" if d["dominated"]
                   else "not dominated by the new front")
        lines += [f"On the {sample} sample: {verdict}.", "",
                  "| objective | production | front #best | gain |", "|---|---|---|---|"]
        for lab in labels:
            row = d["objectives"][lab]
            gain = row.get("gain")
            lines.append(f"| {lab} | {fmt(row['production'])} | {fmt(row.get('front'))} | "
                         + (f"{100 * gain:+.1f} %" if gain is not None else "—") + " |")
        lines.append("")
    since = prod.get("since_previous")
    if since:
        lines += [f"Since {since['run']}:", ""]
        for lab, row in since["objectives"].items():
            change = row["change"]
            lines.append(f"- {lab}: {fmt(row['before'])} → {fmt(row['now'])}"
                         + (f" ({100 * change:+.1f} %, positive = worse)"
                            if change is not None else ""))
    return lines
