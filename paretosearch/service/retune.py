"""The nightly retune: search again on the newest window of a growing trace, publish.

One run of :func:`retune`:

1. reads the trace (a file or a glob of files on one clock), keeps the newest window, and
   reads the production config (bad input stops here, with nothing written);
2. takes the lock (``OUT/retune.lock``; a second overlapping retune stops at once);
3. resumes the newest unpublished run on the same window if one was interrupted, else starts
   a new versioned run in ``OUT/runs/<id>``, warm-started from the front ``OUT/current``
   points at; every evaluation also lands in the shared content-keyed cache
   (``OUT/cache.sqlite``), so nothing already simulated on this window runs again;
4. re-evaluates the configuration in production on the new window and reports drift:
   whether the new front dominates it, by how much on each objective, and how it moved
   since the last run;
5. writes ``retune.json`` and a report (``report.md`` + ``report.png``, and the interactive
   ``report.html``), and only then moves ``OUT/current`` to the new run (an atomic rename of
   a symlink): ``current`` never points at a partial run, and a failure anywhere leaves it
   where it was.

Exit codes (:class:`Exit`) tell cron / a CronJob / systemd what happened.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from paretosearch.definition import SearchDefinition
from paretosearch.io import (
    MAX_DOCUMENT,
    MAX_TABLE,
    Busy,
    exclusive,
    load_json,
    read_bounded,
    write_json,
)
from paretosearch.objectives import Objective, dominates, parse_objectives
from paretosearch.runs.records import ChosenConfig, FrontEntry
from paretosearch.runs.report import write_retune_report
from paretosearch.runs.report_html import write_html_report
from paretosearch.runs.retune_summary import (
    Change,
    Drift,
    ObjectiveDrift,
    PassedOver,
    ProductionCheck,
    RetuneStart,
    RetuneSummary,
    RetuneWindow,
    SincePrevious,
    WarmStart,
)
from paretosearch.runs.store import RunStore
from paretosearch.search.cache import EvaluationCache
from paretosearch.search.cluster import ctrl_c
from paretosearch.search.journal import param_key
from paretosearch.search.spea2 import Progress
from paretosearch.service.api import PolicySearch, resolved
from paretosearch.service.retune_spec import RetuneSpec, TooFewJobs, Window, read_window
from policies import REGISTRY, make_policy
from simulator.errors import ParetoSearchError, located

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


class RetuneLocked(ParetoSearchError, RuntimeError):
    """Another retune is running on the same output folder."""


class RetuneFailed(ParetoSearchError, RuntimeError):
    """The retune failed after it started; nothing was published."""


# --- drift ----------------------------------------------------------------------------------

def drift(front: Sequence[FrontEntry], production: Mapping[str, float],
          objectives: Sequence[Objective], *, sample: str = "metrics") -> Drift:
    """How the new front compares with the production config on one sample: which members
    dominate it, the safest switch among them (the one whose smallest relative gain is
    largest) and its gain on each objective."""
    def losses(rec: Mapping[str, float]) -> list[float]:
        return [o.loss(rec[o.label]) for o in objectives]

    prod = losses(production)
    records = [getattr(e, sample) for e in front]
    dominating = [(i, losses(r)) for i, r in enumerate(records)
                  if r and dominates(r, production, objectives)]

    def gains(f: list[float]) -> list[float]:
        return [0.0 if a == b else (b - a) / abs(b) if b else math.inf
                for a, b in zip(f, prod, strict=True)]

    if not dominating:
        return Drift(False, (), None, {o.label: ObjectiveDrift(production[o.label])
                                       for o in objectives})
    best, f = max(dominating, key=lambda r: min(gains(r[1])))
    return Drift(True, tuple(i for i, _ in dominating), best,
                 {o.label: ObjectiveDrift(production[o.label], records[best][o.label], gain)
                  for o, gain in zip(objectives, gains(f), strict=True)})


# --- one retune -----------------------------------------------------------------------------

@dataclass
class RetuneOutcome:
    """What a retune did."""

    exit: Exit
    run: Path
    summary: RetuneSummary


def retune(spec: RetuneSpec, *,
           connect: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
           on_generation: Callable[[Progress], None] | None = None,
           on_start: Callable[[RetuneStart], None] | None = None) -> RetuneOutcome:
    """Run one retune (see the module's documentation).

    Args:
        spec: what to do.
        connect: opens the Dask cluster (a context manager yielding a client, or None for a
            local cluster of ``spec.workers``); called only once the lock is held and the
            window is worth searching.
        on_generation: hears each generation's progress.
        on_start: hears what the run is about to do (window, resumed or new, warm start).

    Raises:
        RetuneLocked, TooFewJobs, ParetoSearchError (bad input: nothing started), or
        RetuneFailed (anything that went wrong after: nothing published).
    """
    t0 = time.time()  # the wall time reported: from reading the window to publishing
    window = read_window(spec)
    production = _read_production(spec.production)
    with _locked(spec.out / "retune.lock"):
        previous = _current(spec.out)
        # which run folder (a new one, or the interrupted one to resume) follows from what
        # the search is (bad input fails here)
        train, test, space = resolved(spec.config, window.workload)
        definition = SearchDefinition.of(spec.config, space.names, space.dropped, train, test)
        try:
            run, resume, passed_over = _run_dir(spec.out, definition, previous)
            with contextlib.ExitStack() as stack:
                search = PolicySearch(
                    window.workload, spec.config, store=run, workers=spec.workers,
                    client=stack.enter_context(connect()) if connect else None,
                    cache=stack.enter_context(
                        contextlib.closing(EvaluationCache(spec.out / "cache.sqlite"))))
                return _publish(spec, search, window, production, previous, resume,
                                passed_over, on_generation, on_start, t0)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # disk full, unwritable folder, lost cluster, ...
            if ctrl_c(exc):
                raise KeyboardInterrupt from exc
            where = f"'current' still points at {previous}" if previous else "no run published"
            what = str(exc) if isinstance(exc, ParetoSearchError) else \
                f"{type(exc).__name__}: {exc}"
            raise RetuneFailed(f"retune failed: {what.rstrip('.')}. Nothing was published "
                               f"({where}); fix the cause and run again: finished "
                               "evaluations are kept and not repeated") from exc


def _publish(spec: RetuneSpec, search: PolicySearch, window: Window,
             production: dict[str, Any] | None, previous: Path | None, resume: bool,
             passed_over: PassedOver | None,
             on_generation: Callable[[Progress], None] | None,
             on_start: Callable[[RetuneStart], None] | None, t0: float) -> RetuneOutcome:
    """Search (or resume) in the search's store, evaluate production, report, then move
    ``current`` (``t0``: when the retune began, for its wall time)."""
    assert search.cache is not None and search.store is not None
    run = search.store.path
    if resume:  # as it began: the same warm start, so the journal replays to the same state
        start = replace(RunStore(run).read_retune_start(), resumed=True)
    else:
        seeds = _warm_seeds(previous, spec) if spec.warm_start else []
        start = RetuneStart(str(run), False, _window_record(window),
                            WarmStart(str(previous) if seeds else None, len(seeds),
                                      tuple(seeds)), passed_over)
        write_json(start.to_dict(), run / "retune-start.json")
    if on_start is not None:
        on_start(start)
    with search:
        front = search.run(on_generation, resume=resume,
                           initial=list(start.warm_start.seeds or ()))
        prod_eval = (search.evaluate(production["policy"], production["config"])
                     if production else None)
    objectives = search.objectives
    check = None
    if production is not None and prod_eval is not None:
        train, test = prod_eval
        check = ProductionCheck(
            production["source"], production["config_sha256"], production["policy"],
            production["config"], {o.label: train[o.label] for o in objectives},
            {o.label: test[o.label] for o in objectives}, drift(front, train, objectives),
            drift(front, test, objectives, sample="test_metrics"),
            _since_previous(previous, production, train, objectives))
    code = Exit.DRIFT if check is not None and check.drifted else Exit.PUBLISHED
    published = replace(start, warm_start=replace(start.warm_start, seeds=None))
    summary = RetuneSummary(
        published, time.strftime("%Y-%m-%dT%H:%M:%S%z"), str(previous) if previous else None,
        spec.config.policy, tuple(o.label for o in objectives), search.cache.misses,
        search.cache.hits, len(front), time.time() - t0, check, int(code))
    write_retune_report(run, search.store.read_front(), summary)
    write_html_report(run, retune=summary)
    write_json(summary.to_dict(), run / "retune.json")
    _point(spec.out / "current", run)
    return RetuneOutcome(code, run, summary)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (released by the OS if this process dies; a link or
    a FIFO there is refused, never written through or waited on)."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(exclusive(path))
        except Busy as exc:
            raise RetuneLocked(f"{path}: another retune (pid {exc.holder}) is running on this "
                               "folder; this one did nothing. Wait for it, or stagger the "
                               "schedules") from exc
        except ParetoSearchError as exc:  # unwritable, full, or a link or FIFO planted there
            raise RetuneFailed(f"{exc}; give 'out' a writable folder of plain files. Nothing "
                               "was published") from exc
        yield


def _current(out: Path) -> Path | None:
    """The run ``OUT/current`` points at, if any: a run directory in ``OUT/runs/``, where
    retunes put them (a link elsewhere is refused, not followed)."""
    link = out / "current"
    if not link.is_symlink():
        return None
    run = link.resolve()
    if run.parent != (out / "runs").resolve():
        raise ParetoSearchError(f"{link} points at {run}, not at a run in {out / 'runs'}; "
                                "refused. Point it at the run in production (ln -sfn "
                                "runs/RUN_ID current, in that folder) or remove it")
    return run if run.is_dir() else None  # a run deleted since: none to start from


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


def _run_dir(out: Path, definition: SearchDefinition,
             previous: Path | None) -> tuple[Path, bool, PassedOver | None]:
    """The newest run if it was interrupted on this same window (resume it), else a new one;
    and, when the newest run is not the published one and is not resumed, which and why (it is
    left as it is)."""
    runs = sorted(r for r in (out / "runs").glob("*")  # real folders, links not followed
                  if r.is_dir() and not r.is_symlink()) if (out / "runs").is_dir() else []
    passed_over = None
    if runs and runs[-1].resolve() != previous:
        newest = runs[-1]
        if not (newest / "run.json").exists():
            why = "it stopped before its search began: nothing to resume"
        else:
            with contextlib.suppress(ParetoSearchError):
                if RunStore(newest).read_spec() == definition:
                    return newest, True, None
            why = ("it finished on another window or spec, and 'current' does not point at it"
                   if (newest / "retune.json").exists()
                   else "it was interrupted on another window or spec")
        passed_over = PassedOver(str(newest), why)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run = out / "runs" / stamp
    n = 1
    while run.exists():
        n += 1
        run = out / "runs" / f"{stamp}-{n}"
    return run, False, passed_over


def _warm_seeds(previous: Path | None, spec: RetuneSpec) -> list[dict[str, Any]]:
    """Where a warm start begins: the previous run's front, then its other evaluations by
    non-dominated rank on this spec's objectives (the most spread out first within a rank),
    one per objective vector, up to the population size. Empty if it tuned another policy or
    cannot be read."""
    if previous is None:
        return []
    try:
        return _ranked_seeds(previous, spec)
    except Exception as exc:  # a damaged run: whatever is wrong with it, a cold start
        warnings.warn(f"{previous}: cannot warm-start from this run ({type(exc).__name__}: "
                      f"{exc}); a cold start", UserWarning, stacklevel=2)
        return []


def _ranked_seeds(previous: Path, spec: RetuneSpec) -> list[dict[str, Any]]:
    store = RunStore(previous)
    if store.read_spec().policy != spec.config.policy:
        return []
    front = [dict(e.params) for e in store.read_front().front]
    records = pd.read_parquet(io.BytesIO(store.read("records.parquet", MAX_TABLE)))
    objectives = parse_objectives(spec.config.objectives)
    labels = [o.label for o in objectives]
    if not set(labels) <= set(records.columns):
        return front
    losses = np.array([[o.loss(v) for o, v in zip(objectives, row, strict=True)]
                       for row in records[labels].to_numpy(dtype=float)])
    names = [c for c in records.columns if c.startswith("param.")]
    params = [{str(n).removeprefix("param."): v for n, v in row.items()
               if not (isinstance(v, float) and math.isnan(v))}  # not in that run
              for row in records[names].to_dict("records")]
    vector: dict[str, tuple[float, ...]] = {  # what each scored
        param_key(p): tuple(f) for p, f in zip(params, losses, strict=True)}
    finite = np.flatnonzero(np.isfinite(losses).all(axis=1))
    ranked: list[dict[str, Any]] = []
    for members in (finite[f] for f in NonDominatedSorting().do(losses[finite])):
        spread = calc_crowding_distance(losses[members]) if len(members) > 2 else np.ones(len(
            members))
        ranked += [params[i] for i in members[np.argsort(-spread, kind="stable")]]
    seeds: list[dict[str, Any]] = []
    seen: set[tuple[float, ...] | str] = set()
    for p in front + ranked:
        scored = vector.get(param_key(p), param_key(p))
        if scored not in seen:
            seen.add(scored)
            seeds.append(p)
        if len(seeds) == spec.config.settings.archive:
            break
    return seeds


def _read_production(path: Path | None) -> dict[str, Any] | None:
    """The production config: policy and every field as deployed (``fitted`` if present:
    WFQ's class thresholds are fixed numbers in production, not re-derived nightly)."""
    if path is None:
        return None
    try:
        doc = load_json(read_bounded(path, MAX_DOCUMENT))
    except ParetoSearchError as exc:
        raise ParetoSearchError(f"cannot read the production config: {exc}; fix the spec's "
                                "'production' field") from exc
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep
        raise ParetoSearchError(f"{path}: not a chosen config (not JSON: "
                                f"{type(exc).__name__}: {str(exc)[:120]}); write it with "
                                "'paretosearch select RUN --out FILE'") from exc
    chosen = ChosenConfig.from_dict(doc, str(path))
    if chosen.policy not in REGISTRY:
        raise ParetoSearchError(located(str(path), column="policy", value=chosen.policy,
                                        problem="not a known policy"))
    try:
        make_policy(chosen.policy, chosen.deployed)
    except (ParetoSearchError, TypeError, ValueError) as exc:  # mixed-type values included
        raise ParetoSearchError(f"{path}: {exc}") from exc
    return {"policy": chosen.policy, "config": chosen.deployed, "source": str(path.resolve()),
            "config_sha256": chosen.config_sha256}


def _since_previous(previous: Path | None, production: Mapping[str, Any],
                    train: Mapping[str, float], objectives: Sequence[Objective]
                    ) -> SincePrevious | None:
    """How the production config's objective values moved since the previous run (same
    config only): relative change per objective (positive = worse)."""
    if previous is None:
        return None
    try:
        before = RunStore(previous).read_retune().production
    except ParetoSearchError:  # none, or unreadable
        return None
    if before is None or not before.train or (
            (before.policy, before.config) != (production["policy"], production["config"])):
        return None
    out = {}
    for o in objectives:
        old = before.train.get(o.label)
        if old is not None:
            new = train[o.label]
            out[o.label] = Change(old, new, (o.loss(new) - o.loss(old)) / abs(old)
                                  if old else None)
    return SincePrevious(str(previous), out)


def _window_record(window: Window) -> RetuneWindow:
    return RetuneWindow(tuple(window.files), len(window.workload), window.jobs_in_trace,
                        window.start_s, window.end_s, window.workload.digest())
