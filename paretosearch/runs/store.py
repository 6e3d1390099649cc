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

from paretosearch.definition import SearchDefinition
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
from paretosearch.runs.records import ChosenConfig, FrontDocument, FrontEntry
from paretosearch.runs.retune_summary import RetuneStart, RetuneSummary
from paretosearch.runs.shapes import Or, check_shape, shape_of
from paretosearch.search.journal import Evaluation, param_key, plain_record
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

    def write_spec(self, definition: SearchDefinition) -> None:
        """``run.json``: what was searched, with versions for provenance."""
        from paretosearch import __version__

        write_json({**definition.to_dict(), "versions": {"paretosearch": __version__,
                                                          "python": platform.python_version()}},
                   self.path / "run.json")

    def read_spec(self) -> SearchDefinition:
        """What the run searched (``run.json``, as this or an earlier paretosearch wrote it),
        its shape checked."""
        return SearchDefinition.from_dict(self.read_json("run.json", _SPEC),
                                          str(self.path / "run.json"))

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

    def read_front(self) -> FrontDocument:
        """The published front (``front.json``), its shape checked: what readers index into
        is there and of the right type, and every entry scores the same objectives."""
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
        return FrontDocument.from_dict(doc)

    def write_choice(self, choice: ChosenConfig) -> Path:
        """``chosen.json``: the operator's selected configuration."""
        return write_json(choice.to_dict(), self.path / "chosen.json")

    def front_choice(self, index: int) -> ChosenConfig:
        """Front entry ``index`` as a ready config, with where it came from: this run's
        resolved directory (not a link such as ``runs/latest``, which moves) and the index."""
        front = self.read_front().front
        return ChosenConfig.of(self.read_spec(), front[index], front_index=index,
                               run=str(self.path.resolve()))

    def chosen_index(self, front: Sequence[FrontEntry]) -> int | None:
        """The index in ``front`` of the entry ``chosen.json`` records, or None (no choice
        made, or one that is not on this front)."""
        if not (self.path / "chosen.json").exists():
            return None
        picked = self.read_chosen().params
        return next((i for i, e in enumerate(front)
                     if all(picked.get(k) == v for k, v in e.params.items())), None)

    def read_chosen(self) -> ChosenConfig:
        """The operator's selected configuration (``chosen.json``), its shape checked."""
        return ChosenConfig.from_dict(self.read_json("chosen.json", {"params": PARAMS}),
                                      str(self.path / "chosen.json"))

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
        it must hold (:func:`~paretosearch.runs.shapes.check_shape`)."""
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
        check_shape(doc, shape, str(self.path / name))
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


PARAMS = {str: Or(int, float, str, bool, None)}
"""The shape of the ``params`` a chosen config names (what :meth:`RunStore.chosen_index` reads)."""
_FRONT, _SPEC = shape_of(FrontDocument), shape_of(SearchDefinition)
_RETUNE_START, _RETUNE = shape_of(RetuneStart), shape_of(RetuneSummary)
