"""A run directory per search, written so that nothing finished is ever lost.

* ``run.json``: what was searched (spec, seeds, versions);
* ``evaluations.jsonl``: the journal, one finished evaluation per line, appended and flushed
  the moment it exists (a line cut short by a crash is ignored on reading);
* ``records.parquet``: every evaluation as a table (parameters, all metrics, wall time);
* ``front.json``: the current front and the hypervolume history;
* ``started.jsonl``: the asynchronous mode's candidates, each as it was started;
* ``optuna.log``: every evaluation copied as an Optuna trial (Optuna's journal file, for
  ``optuna-dashboard``).

Tables and JSON are replaced atomically (temp file + rename), so a reader polling
``front.json`` sees the previous front or the new one, never a partial file. Nothing here is
executable: the optimiser's state is not saved at all, since evaluation is pure and seeded, a
resumed search replays its journal through the optimiser and so rebuilds that state exactly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from paretosearch.io import (
    MAX_DOCUMENT,
    MAX_TABLE,
    Busy,
    exclusive,
    load_json,
    open_plain,
    read_bounded,
    write_json,
    write_table,
)
from paretosearch.runs.records import ChosenConfig, FrontEntry, mark_dominated
from paretosearch.runs.retune_summary import RetuneStart, RetuneSummary
from paretosearch.search.config import policy_of
from paretosearch.search.journal import Evaluation, param_key
from paretosearch.search.objectives import parse_objectives
from paretosearch.search.trust import plain_record
from simulator.errors import ParetoSearchError, located

__all__ = ["RunStore"]

log = logging.getLogger(__name__)

def _any(*_: Any) -> bool:
    return True


class RunStore:
    """Reads and writes one search's directory (and keeps a search's
    :class:`~paretosearch.search.journal.Journal` there)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # --- spec -----------------------------------------------------------------------------

    def write_spec(self, spec: dict[str, Any]) -> None:
        """``run.json``: what was searched, with versions for provenance."""
        from paretosearch import __version__

        write_json({**spec, "versions": {"paretosearch": __version__,
                                         "python": platform.python_version()}},
                   self.path / "run.json")

    def read_spec(self) -> dict[str, Any]:
        """The spec a run was started with (without the versions), its shape checked."""
        doc = self.read_json("run.json", _SPEC)
        where = str(self.path / "run.json")
        for field, check in (("objectives", lambda: parse_objectives(doc["objectives"])),
                             ("fixed", lambda: policy_of(doc["policy"], doc["fixed"]))):
            try:
                check()
            except ParetoSearchError as exc:
                raise ParetoSearchError(located(where, column=field, problem=str(exc))) from exc
        doc.pop("versions", None)
        return doc

    # --- journal --------------------------------------------------------------------------

    def read_journal(self, fits: Callable[[dict[str, Any], dict[str, float]], bool] = _any
                     ) -> dict[str, Evaluation]:
        """Finished evaluations by key, in the order they finished. A line that is not one (cut
        short by a crash, or damaged: its key not its parameters', its record not names with
        numbers, or not what ``fits`` takes) is skipped with a warning naming it: that
        evaluation runs again, it is never trusted."""
        out: dict[str, Evaluation] = {}
        for where, row in self._rows("evaluations.jsonl"):
            params, record = row.get("params"), plain_record(row.get("record"))
            if (isinstance(params, dict) and record is not None
                    and row.get("key") == param_key(params) and fits(params, record)):
                out[row["key"]] = (params, record)
            else:
                _skip(where, "not an evaluation of this search (its key, its parameters, "
                             "a record of numbers); it is evaluated again")
        return out

    def append(self, key: str, params: dict[str, Any], record: dict[str, float]) -> None:
        """Journal one finished evaluation (flushed at once; survives a kill of this process)."""
        self._append("evaluations.jsonl", {"key": key, "params": params, "record": record})

    def read_started(self, fits: Callable[[dict[str, Any]], bool] = _any
                     ) -> list[tuple[int, dict[str, Any]]]:
        """The asynchronous search's candidates in the order it started them: how many
        evaluations had finished when each was bred, and its parameters. A damaged line (or
        one whose parameters ``fits`` refuses) is skipped with a warning naming it: that
        candidate was never started, and is bred again."""
        out = []
        for where, row in self._rows("started.jsonl"):
            after, params = row.get("after"), row.get("params")
            if type(after) is int and after >= 0 and isinstance(params, dict) and fits(params):
                out.append((after, params))
            else:
                _skip(where, "not a candidate of this search; it is bred again")
        return out

    def append_started(self, after: int, params: dict[str, Any]) -> None:
        """Record a candidate the asynchronous search starts, before it starts (flushed)."""
        self._append("started.jsonl", {"after": after, "params": params})

    def _append(self, name: str, doc: dict[str, Any]) -> None:
        line = json.dumps(doc, allow_nan=True)
        self.path.mkdir(parents=True, exist_ok=True)
        fd = open_plain(self.path / name, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            with os.fdopen(fd, "a+b") as f:
                end = f.seek(0, os.SEEK_END)
                if end and (f.seek(end - 1), f.read(1))[1] != b"\n":
                    line = "\n" + line  # end a line cut short by a crash or a full disk
                f.write(line.encode() + b"\n")
                f.flush()
        except OSError as exc:  # a full disk, a quota, a file-size limit: what came before stays
            raise ParetoSearchError(f"{self.path / name}: cannot write: {exc.strerror}; free "
                                    "some space and resume the run (--resume)") from exc

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the run's lock (``run.lock``) while a search or a resume writes it: a second
        one at once would evaluate the same candidates twice into one journal.

        Raises:
            ParetoSearchError: another process holds it (its pid named), or the run folder
                cannot hold a lock (unwritable, or a link or FIFO planted as ``run.lock``).
        """
        try:
            with exclusive(self.path / "run.lock"):
                yield
        except Busy as exc:
            raise ParetoSearchError(
                f"{self.path}: a search (pid {exc.holder}) is writing this run now; wait for it "
                "to finish, or stop it, before resuming it") from exc

    def warn_of_pickles(self) -> None:
        """Say so if an earlier paretosearch left pickled optimiser states in
        ``checkpoints/``: they are never opened (a pickle can run code), the journal is replayed
        instead."""
        pickles = sorted((self.path / "checkpoints").glob("*.pkl"))
        if pickles:
            log.warning("%s: %d pickled optimiser states of an earlier paretosearch are never "
                        "read (a pickle can run code); the run resumes by replaying its "
                        "journal, evaluations.jsonl, which reaches the same front. Delete %s "
                        "to silence this", self.path, len(pickles), pickles[0].parent)

    # --- published results ----------------------------------------------------------------

    def write_progress(self, evaluations: Sequence[Evaluation], front: Sequence[FrontEntry],
                       hypervolume: Sequence[tuple[int, float]], *, seed: int,
                       **extra: Any) -> None:
        """Every evaluation so far (with the search seed), the front, the hypervolume history."""
        rows = [{"seed": seed, **{f"param.{k}": v for k, v in p.items()}, **r}
                for p, r in evaluations]
        write_table(pd.DataFrame(rows), self.path / "records.parquet")
        write_json({"front": [e.to_dict() for e in front],
                    "hypervolume": [{"evaluations": n, "hypervolume": h} for n, h in hypervolume],
                    **extra},
                   self.path / "front.json")

    def read_front(self) -> dict[str, Any]:
        """The published front (``front.json``), its shape checked: what readers index into
        is there and of the right type, and every entry scores the same objectives. Its
        ``front`` is a list of :class:`FrontEntry`, each with the baselines that dominate it
        on the test sample (worked out here for a front written before entries recorded
        them)."""
        doc = self.read_json("front.json", _FRONT)
        where = str(self.path / "front.json")
        entries = doc["front"]
        labels = set(entries[0]["objectives"]) if entries else set()
        # each entry scores exactly these objectives; its metrics and the baselines hold them
        scored = [(f"front[{i}].objectives", e["objectives"], True) for i, e in
                  enumerate(entries)] + [(f"front[{i}].metrics", e["metrics"], False)
                                         for i, e in enumerate(entries)] + [
            (f"{part}.{name}", r, False) for part in ("baselines", "baselines_test")
            for name, r in (doc.get(part) or {}).items()]
        for field, record, exactly in scored:
            if set(record) != labels if exactly else not labels <= set(record):
                raise ParetoSearchError(located(where, column=field, value=sorted(record),
                                                problem="expected the objectives "
                                                        f"{sorted(labels)}"))
        front = [FrontEntry.from_dict(e) for e in entries]
        if any(e.dominated_by is None for e in front):
            front = mark_dominated(front, doc.get("baselines_test") or {})
        return {**doc, "front": front}

    def write_choice(self, choice: ChosenConfig) -> Path:
        """``chosen.json``: the operator's selected configuration."""
        return write_json(choice.to_dict(), self.path / "chosen.json")

    def front_choice(self, index: int) -> ChosenConfig:
        """Front entry ``index`` as a ready config, with where it came from: this run's
        resolved directory (not a link such as ``runs/latest``, which moves) and the index."""
        front = self.read_front()["front"]
        return ChosenConfig.of(self.read_spec(), front[index], front_index=index,
                               run=str(self.path.resolve()))

    def chosen_index(self, front: Sequence[FrontEntry]) -> int | None:
        """The index in ``front`` of the entry ``chosen.json`` records, or None (no choice
        made, or one that is not on this front)."""
        if not (self.path / "chosen.json").exists():
            return None
        picked = self.read_json("chosen.json", {"params": _PARAMS})["params"]
        return next((i for i, e in enumerate(front)
                     if all(picked.get(k) == v for k, v in e.params.items())), None)

    def read_retune(self) -> RetuneSummary:
        """The retune summary of a run that a retune published (``retune.json``), its shape
        checked."""
        return RetuneSummary.from_dict(self.read_json("retune.json", _RETUNE))

    def read_retune_start(self) -> RetuneStart:
        """What a retune run set out to do (``retune-start.json``), its shape checked."""
        return RetuneStart.from_dict(self.read_json("retune-start.json", _RETUNE_START))

    def read(self, name: str, limit: int = MAX_DOCUMENT) -> bytes:
        """A file of the run, read as untrusted data: from inside the run directory only,
        at most ``limit`` bytes (see :func:`read_bounded`)."""
        return read_bounded(self.path / name, limit, inside=self.path)

    def read_json(self, name: str, shape: Any = dict) -> dict[str, Any]:
        """A JSON document of the run (an object), read as untrusted data; ``shape``: what
        it must hold (:func:`_check_shape`)."""
        if not (self.path / name).exists():
            raise ParetoSearchError(f"{self.path}: no {name}; is this a run directory of "
                                    "'paretosearch search'?")
        try:
            doc = load_json(self.read(name))
        except (ValueError, RecursionError) as exc:
            raise ParetoSearchError(f"{self.path / name}: not valid JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise ParetoSearchError(f"{self.path / name}: a JSON object expected, found "
                                    f"{type(doc).__name__}")
        _check_shape(doc, shape, str(self.path / name), "")
        return doc

    def _rows(self, name: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The JSON objects of a journal's lines, each with where it is (``FILE, line N``);
        none if the journal does not exist yet. A line that is not one is skipped with a
        warning naming it."""
        if not (self.path / name).exists():
            return
        for n, raw in enumerate(self.read(name, MAX_TABLE).splitlines(), 1):
            where = f"{self.path / name}, line {n}"
            try:
                row = load_json(raw, finite=False)  # a metric may be NaN
            except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep
                row = None
            if isinstance(row, dict):
                yield where, row
            else:
                _skip(where, "damaged (cut short by a crash, or altered); skipped")


def _skip(where: str, why: str) -> None:
    log.warning("%s: %s", where, why)


class _Or:
    """A shape that is any one of ``shapes``."""

    def __init__(self, *shapes: Any) -> None:
        self.shapes = shapes


_NUMBER = _Or(int, float, None)  # null: NaN, as JSON stores it
_RECORD = {str: _NUMBER}
_PARAMS = {str: _Or(int, float, str, bool, None)}
_FRONT = {"front": [{"params": _PARAMS, "objectives": _RECORD,
                     "metrics": _RECORD, "test_metrics": _Or(_RECORD, None),
                     "fitted": _Or(dict, None), "dominated_by?": _Or([str], None)}],
          "hypervolume?": [{"evaluations": int, "hypervolume": _NUMBER}],
          "baselines?": {str: _RECORD}, "baselines_test?": {str: _RECORD},
          "dropped?": {str: str}, "done?": bool}
_WINDOW = {"files": [str], "jobs": int, "jobs_in_trace": int, "start_s": _NUMBER,
           "end_s": _NUMBER, "digest": str}
_RETUNE_START = {"run": str, "resumed": bool, "window": _WINDOW,
                 "warm_start": {"from": _Or(str, None), "configs": int, "seeds?": [dict]},
                 "not_resumed?": _Or({"run": str, "why": str}, None)}
_DRIFT = {"dominated": bool, "dominated_by": [int], "best": _Or(int, None),
          "objectives": {str: {"production": _NUMBER, "front?": _NUMBER, "gain?": _NUMBER}}}
_PRODUCTION = {"source": str, "config_sha256": str, "policy": str, "config": dict,
               "train": _RECORD, "test": _RECORD, "drift_train": _DRIFT, "drift_test": _DRIFT,
               "since_previous?": _Or({"run": str, "objectives": {str: {
                   "before": _NUMBER, "now": _NUMBER, "change": _NUMBER}}}, None)}
_RETUNE = {**_RETUNE_START, "published_at": str, "previous": _Or(str, None), "policy": str,
           "objectives": [str], "evaluations": {"run": int, "from_cache": int},
           "front_size": int, "wall_s": _NUMBER, "production": _Or(_PRODUCTION, None),
           "exit": int}
_SPEC = {"policy": str, "profile": str, "objectives": [str], "fixed": dict, "space?": [str],
         "settings?": dict, "cluster?": dict}


def _check_shape(value: Any, shape: Any, path: str, field: str) -> None:
    """Raise naming ``path``, the field and the value unless ``value`` has ``shape``: a type,
    None, :class:`_Or`, ``[item]``, ``{str: value}`` (any keys) or ``{name: shape}`` (a name
    ending in ``?`` may be missing)."""
    if isinstance(shape, _Or):
        nested = [s for s in shape.shapes if (isinstance(s, dict) and isinstance(value, dict))
                  or (isinstance(s, list) and isinstance(value, list))]
        if len(nested) == 1:  # an object or a list where one is allowed: name what is inside
            _check_shape(value, nested[0], path, field)
            return
        for option in shape.shapes:
            try:
                _check_shape(value, option, path, field)
                return
            except ParetoSearchError:
                continue
        ok = False
    elif shape is None:
        ok = value is None
    elif isinstance(shape, list):
        ok = isinstance(value, list)
        for i, item in enumerate(value if ok else []):
            _check_shape(item, shape[0], path, f"{field}[{i}]")
    elif isinstance(shape, dict):
        ok = isinstance(value, dict)
        for name, sub in shape.items() if ok else ():
            if name is str:
                for key, item in value.items():
                    _check_shape(item, sub, path, f"{field}.{key}".lstrip("."))
            elif name.rstrip("?") in value:
                _check_shape(value[name.rstrip("?")], sub, path,
                             f"{field}.{name.rstrip('?')}".lstrip("."))
            elif not name.endswith("?"):
                raise ParetoSearchError(located(path, column=f"{field}.{name}".lstrip("."),
                                                problem="missing"))
    else:
        ok = isinstance(value, shape) and (shape is bool or not isinstance(value, bool))
    if not ok:
        shown = value if isinstance(value, int | float | str | None) else type(value).__name__
        raise ParetoSearchError(located(path, column=field or None, value=shown,
                                        problem=f"expected {_describe(shape)}"))


def _describe(shape: Any) -> str:
    if isinstance(shape, _Or):
        return " or ".join(_describe(s) for s in shape.shapes)
    if shape is None:
        return "null"
    if isinstance(shape, list):
        return "a list"
    if isinstance(shape, dict):
        return "an object"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            dict: "an object"}[shape]

