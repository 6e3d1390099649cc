"""A run directory per search, written so that nothing finished is ever lost.

* ``run.json``: what was searched (spec, seeds, versions);
* ``evaluations.jsonl``: the journal, one finished evaluation per line, appended and flushed
  the moment it exists (a line cut short by a crash is ignored on reading);
* ``records.parquet``: every evaluation as a table (parameters, all metrics, wall time);
* ``front.json``: the current front and the hypervolume history;
* ``checkpoints/gen-NNNNN.pkl`` + ``.sha256``: the optimiser's state after each of the last
  complete generations, and its SHA-256 (checked before the pickle is loaded; the only
  pickle read, and only from the run's own directory);
* ``optuna.db``: every evaluation mirrored as an Optuna trial (for ``optuna-dashboard``).

Tables and JSON are replaced atomically (temp file + rename), so a reader polling
``front.json`` sees the previous front or the new one, never a partial file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from paretosearch.io import atomic_write, write_json, write_table, write_text
from paretosearch.objectives import Objective
from simulator.errors import ParetoSearchError

__all__ = ["KEEP_CHECKPOINTS", "Evaluation", "RunStore", "choice_entry", "front_entry"]

log = logging.getLogger(__name__)

KEEP_CHECKPOINTS = 3
"""Checkpoints kept per run: a corrupted newest one falls back to the one before."""

Evaluation = tuple[dict[str, Any], dict[str, float]]
"""(parameters, record) of one finished evaluation."""


def front_entry(params: dict[str, Any], record: dict[str, float],
                objectives: Sequence[Objective], test: dict[str, float] | None = None,
                fitted: dict[str, Any] | None = None) -> dict[str, Any]:
    """One front member as JSON: parameters, objective values, all metrics, test metrics,
    and every field of the policy as fitted to the training workload (WFQ's classes)."""
    return {"params": params,
            "objectives": {o.label: record[o.label] for o in objectives},
            "metrics": record,
            "test_metrics": test,
            "fitted": fitted}


def choice_entry(spec: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """A chosen front member of the run with ``spec`` as a ready config: policy, all
    parameters, the fitted policy, its objective values, the cluster it was tuned for."""
    return {"policy": spec["policy"], "params": {**spec["fixed"], **entry["params"]},
            "fitted": entry.get("fitted"),
            "objectives": dict(entry.get("objectives") or {}),
            "cluster": spec.get("cluster")}


class RunStore:
    """Reads and writes one search's directory."""

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
        """The spec a run was started with (without the versions)."""
        doc = self._read_json("run.json")
        doc.pop("versions", None)
        return doc

    # --- journal --------------------------------------------------------------------------

    def read_journal(self) -> dict[str, Evaluation]:
        """Finished evaluations by key, in the order they finished."""
        path = self.path / "evaluations.jsonl"
        out: dict[str, Evaluation] = {}
        if not path.exists():
            return out
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
                out[row["key"]] = (row["params"], row["record"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line cut short by a crash: that evaluation runs again
        return out

    def append(self, key: str, params: dict[str, Any], record: dict[str, float]) -> None:
        """Journal one finished evaluation (flushed at once; survives a kill of this process)."""
        self._append("evaluations.jsonl", {"key": key, "params": params, "record": record})

    def read_started(self) -> list[tuple[int, dict[str, Any]]]:
        """The asynchronous search's candidates in the order it started them: how many
        evaluations had finished when each was bred, and its parameters."""
        path = self.path / "started.jsonl"
        out = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                row = json.loads(line)
                out.append((int(row["after"]), dict(row["params"])))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # cut short by a crash: never started, it is bred again
        return out

    def append_started(self, after: int, params: dict[str, Any]) -> None:
        """Record a candidate the asynchronous search starts, before it starts (flushed)."""
        self._append("started.jsonl", {"after": after, "params": params})

    def _append(self, name: str, doc: dict[str, Any]) -> None:
        line = json.dumps(doc, allow_nan=True)
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / name, "a+b") as f:
            end = f.seek(0, os.SEEK_END)
            if end and (f.seek(end - 1), f.read(1))[1] != b"\n":
                line = "\n" + line  # end a line cut short by a crash or a full disk
            f.write(line.encode() + b"\n")
            f.flush()

    # --- checkpoint -----------------------------------------------------------------------

    def save_checkpoint(self, state: Any, generation: int) -> None:
        """Pickle the optimiser state after ``generation``, then publish its checksum.

        Both files are written atomically, the checksum last: a checkpoint without one was
        cut short and is never loaded. The newest :data:`KEEP_CHECKPOINTS` are kept.
        """
        blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        stem = self.path / "checkpoints" / f"gen-{generation:05d}"

        def write(tmp: Path) -> None:
            tmp.write_bytes(blob)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())

        atomic_write(stem.with_suffix(".pkl"), write)
        write_text(stem.with_suffix(".sha256"), hashlib.sha256(blob).hexdigest() + "\n")
        for old in self._checkpoints()[KEEP_CHECKPOINTS:]:
            old.unlink()
            old.with_suffix(".sha256").unlink(missing_ok=True)

    def load_checkpoint(self) -> Any:
        """The newest checkpoint whose checksum holds, or None if there is none.

        One that fails its checksum (altered, or damaged on disk) is renamed ``*.corrupt``,
        reported in the log, and the one before it is used: the search goes on from the last
        good generation (the journal keeps every evaluation since, so none runs twice).
        """
        for pkl in self._checkpoints():
            sha = pkl.with_suffix(".sha256")
            if not sha.exists():
                continue  # cut short before its checksum was published
            blob = pkl.read_bytes()
            if hashlib.sha256(blob).hexdigest() == sha.read_text().strip():
                return pickle.loads(blob)  # our own file, checksum verified
            log.warning("%s: checksum does not match %s; not loaded (kept as %s.corrupt), "
                        "going back to the generation before", pkl, sha.name, pkl.name)
            os.replace(pkl, pkl.with_name(pkl.name + ".corrupt"))
        return None

    def _checkpoints(self) -> list[Path]:
        """The run's checkpoint files, newest first."""
        return sorted((self.path / "checkpoints").glob("gen-*.pkl"), reverse=True)

    # --- published results ----------------------------------------------------------------

    def write_progress(self, evaluations: Sequence[Evaluation], front: Sequence[dict[str, Any]],
                       hypervolume: Sequence[tuple[int, float]], *, seed: int,
                       **extra: Any) -> None:
        """Every evaluation so far (with the search seed), the front, the hypervolume history."""
        rows = [{"seed": seed, **{f"param.{k}": v for k, v in p.items()}, **r}
                for p, r in evaluations]
        write_table(pd.DataFrame(rows), self.path / "records.parquet")
        write_json({"front": list(front),
                    "hypervolume": [{"evaluations": n, "hypervolume": h} for n, h in hypervolume],
                    **extra},
                   self.path / "front.json")

    def read_front(self) -> dict[str, Any]:
        """The published front (``front.json``)."""
        return self._read_json("front.json")

    def write_choice(self, choice: dict[str, Any]) -> Path:
        """``chosen.json``: the operator's selected configuration."""
        return write_json(choice, self.path / "chosen.json")

    def chosen_index(self, front: Sequence[dict[str, Any]]) -> int | None:
        """The index in ``front`` of the entry ``chosen.json`` records, or None (no choice
        made, or one that is not on this front)."""
        if not (self.path / "chosen.json").exists():
            return None
        picked = self._read_json("chosen.json").get("params") or {}
        return next((i for i, e in enumerate(front)
                     if all(picked.get(k) == v for k, v in e["params"].items())), None)

    def _read_json(self, name: str) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads((self.path / name).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ParetoSearchError(f"{self.path}: no readable {name} ({exc}); is this a run "
                                    "directory of 'paretosearch search'?") from exc
        return doc
