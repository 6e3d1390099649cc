"""Mirror every evaluation into an Optuna study, for ``optuna-dashboard`` and Optuna's CLI.

The study lives in Optuna's journal file (``optuna.log``): a trial is one appended line,
about a millisecond each, where Optuna's SQLite storage spends 35 to 130 ms a trial on its
per-attribute rows (so copying a 385-evaluation search cost more than the search).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from paretosearch.io import MAX_TABLE, check_plain, open_plain
from paretosearch.objectives import Objective
from paretosearch.runs.records import FrontEntry
from paretosearch.search.journal import Evaluation, param_key
from policies import Domain
from simulator.errors import ParetoSearchError

__all__ = ["OptunaCopy", "load_study"]


class Space(Protocol):
    """The searched parameters and their domains (a search's
    :class:`~paretosearch.search.evaluation.SearchSpace`), in declaration order."""

    @property
    def names(self) -> Sequence[str]: ...
    @property
    def domains(self) -> Sequence[Domain]: ...


class OptunaCopy:
    """A run's Optuna study, held open while the run goes on (so each generation's copy
    appends its trials and no more). Each trial carries the evaluation's parameters,
    objective values, every finite metric as a user attribute, and its duration (the
    evaluation's ``wall_s``, ending when copied).

    ``optuna best-trials --storage PATH --storage-class JournalFileBackend --study-name
    paretosearch`` lists the non-dominated trials; ``optuna-dashboard PATH`` shows the study.
    """

    def __init__(self, path: Path, objectives: Sequence[Objective], space: Space,
                 study_name: str = "paretosearch") -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        _repair(path)
        self.path, self.objectives, self.dists = path, objectives, _distributions(space)
        with warnings.catch_warnings():  # metric names are "experimental" in Optuna, and stable
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            try:
                self.study = optuna.create_study(
                    storage=_storage(path), study_name=study_name, load_if_exists=True,
                    directions=["maximize" if o.maximize else "minimize" for o in objectives])
            # each line is a JSON object (checked), but one Optuna cannot replay: Optuna
            # asserts on an unknown operation and indexes the fields of the others
            except (AssertionError, KeyError, TypeError, ValueError, IndexError) as exc:
                raise _damaged(path, f"Optuna cannot replay it: {type(exc).__name__}: "
                                     f"{exc}") from exc
            except OSError as exc:
                raise self._unwritable(exc) from exc
            if self.study.metric_names is None:
                self.study.set_metric_names([o.label for o in objectives])

    def add(self, evaluations: Sequence[Evaluation], about: Mapping[str, Any],
            front: Sequence[FrontEntry] = ()) -> int:
        """Add the evaluations the study does not hold yet (in order); return the trial
        count. ``about``: the study's user attributes (what was searched; at the end, the
        baselines). ``front``: the published front entries (``params``, ``test_metrics``),
        recorded as the study's ``front`` attribute: each member's trial number and
        test-sample metrics."""
        done = len(self.study.get_trials(deepcopy=False))
        try:
            self.study.add_trials([self._trial(params, record)
                                   for params, record in evaluations[done:]])
            for key, value in about.items():
                if self.study.user_attrs.get(key) != value:
                    self.study.set_user_attr(key, value)
            if front:
                number = {param_key(p): n for n, (p, _) in enumerate(evaluations)}
                self.study.set_user_attr("front", [
                    {"trial": number[param_key(dict(e.params))],
                     "test_metrics": _finite(e.test_metrics or {})} for e in front])
        except OSError as exc:
            raise self._unwritable(exc) from exc
        return len(evaluations)

    def _unwritable(self, exc: OSError) -> ParetoSearchError:
        """A full disk or a quota: the journal holds every evaluation, a resume copies them."""
        return ParetoSearchError(f"{self.path}: cannot write: {exc.strerror}; free some space "
                                 "and resume the run (--resume)")

    def _trial(self, params: Mapping[str, Any], record: Mapping[str, float]) -> Any:
        import optuna

        values = [record[o.label] for o in self.objectives]
        ok = all(math.isfinite(v) for v in values)
        end = datetime.now()
        return optuna.trial.FrozenTrial(
            number=-1, trial_id=-1, value=None, values=values if ok else None,
            state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
            datetime_start=end - timedelta(seconds=record.get("wall_s", 0.0)),
            datetime_complete=end, params={n: params[n] for n in self.dists},
            distributions=self.dists, user_attrs=_finite(record), system_attrs={},
            intermediate_values={})


def load_study(path: Path, study_name: str = "paretosearch") -> Any:
    """The Optuna study a run copied into ``path`` (its ``optuna.log``)."""
    import optuna

    return optuna.load_study(study_name=study_name, storage=_storage(path))


def _repair(path: Path) -> None:
    """Undo what a run killed while copying left: a last line cut short (the next append
    would join it and make the file unreadable) and the writer's lock (each run directory
    has one writer). A link or anything but a plain file there is refused: Optuna would
    write through it. So is a file of more than :data:`MAX_TABLE` bytes, or with a line
    before the last that is not a JSON object with an integer ``op_code`` (Optuna's
    operations): the copy was altered."""
    path.with_name(path.name + ".lock").unlink(missing_ok=True)
    check_plain(path)
    if path.exists() and path.stat().st_size:
        with os.fdopen(open_plain(path, os.O_RDWR), "rb+") as f:
            if os.fstat(f.fileno()).st_size > MAX_TABLE:
                raise _damaged(path, f"larger than {MAX_TABLE:,} bytes")
            data = f.read()
            end = data.rfind(b"\n") + 1
            for n, line in enumerate(data[:end].splitlines(), 1):
                _check_operation(path, n, line)
            if end < len(data):
                f.truncate(end)


def _check_operation(path: Path, n: int, line: bytes) -> None:
    try:
        op = json.loads(line)
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep
        raise _damaged(path, f"line {n} is not JSON ({type(exc).__name__})") from exc
    if not isinstance(op, dict) or type(op.get("op_code")) is not int:
        raise _damaged(path, f"line {n} is not an Optuna operation (a JSON object with an "
                             "integer op_code)")


def _damaged(path: Path, why: str) -> ParetoSearchError:
    return ParetoSearchError(f"{path}: the run's Optuna copy is damaged ({why}); move it "
                             "aside or delete it, and the resume copies every evaluation into "
                             "a new one")


def _storage(path: Path) -> Any:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str(check_plain(path))))


def _distributions(space: Space) -> dict[str, Any]:
    from optuna.distributions import (
        BaseDistribution,
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    dists: dict[str, BaseDistribution] = {}
    for n, d in zip(space.names, space.domains, strict=True):
        if d.kind == "choice":
            dists[n] = CategoricalDistribution(d.choices)
        elif d.kind == "int":
            dists[n] = IntDistribution(int(d.low), int(d.high), log=d.log)
        else:
            dists[n] = FloatDistribution(d.low, d.high, log=d.log)
    return dists


def _finite(record: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in record.items() if math.isfinite(v)}
