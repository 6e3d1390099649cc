"""A run directory per search, written so that nothing finished is ever lost.

* ``run.json``: what was searched (spec, seeds, versions);
* ``evaluations.jsonl``: the journal, one finished evaluation per line, appended and flushed
  the moment it exists (a line cut short by a crash is ignored on reading);
* ``records.parquet``: every evaluation as a table (parameters, all metrics, wall time);
* ``front.json``: the current front and the hypervolume history;
* ``checkpoint.pkl`` + ``checkpoint.json``: the optimiser's state after the last complete
  generation, and its SHA-256 (checked before the pickle is loaded);
* ``optuna.db``: every evaluation mirrored as an Optuna trial (for ``optuna-dashboard``).

Tables and JSON are replaced atomically (temp file + rename), so a reader polling
``front.json`` sees the previous front or the new one, never a partial file.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from paretosearch.io import atomic_write, write_json, write_table
from paretosearch.objectives import Objective
from simulator.errors import ParetoSearchError

__all__ = ["Evaluation", "RunStore", "choice_entry", "front_entry"]

Evaluation = tuple[dict[str, Any], dict[str, float]]
"""(parameters, record) of one finished evaluation."""


def front_entry(params: dict[str, Any], record: dict[str, float],
                objectives: Sequence[Objective],
                test: dict[str, float] | None = None) -> dict[str, Any]:
    """One front member as JSON: parameters, objective values, all metrics, test metrics."""
    return {"params": params,
            "objectives": {o.label: record[o.label] for o in objectives},
            "metrics": record,
            "test_metrics": test}


def choice_entry(policy: str, fixed: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """A chosen front member as a ready config: policy, all parameters, its values."""
    return {"policy": policy, "params": {**fixed, **entry["params"]},
            "objectives": dict(entry.get("objectives") or {})}


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
        line = json.dumps({"key": key, "params": params, "record": record}, allow_nan=True)
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / "evaluations.jsonl", "a") as f:
            f.write(line + "\n")
            f.flush()

    # --- checkpoint -----------------------------------------------------------------------

    def save_checkpoint(self, state: Any) -> None:
        """Pickle the optimiser state, then publish its checksum (both atomically)."""
        blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

        def write(tmp: Path) -> None:
            tmp.write_bytes(blob)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())

        atomic_write(self.path / "checkpoint.pkl", write)
        write_json({"sha256": hashlib.sha256(blob).hexdigest()}, self.path / "checkpoint.json")

    def load_checkpoint(self) -> Any:
        """The last checkpoint, or None if there is none; refuses one whose checksum fails."""
        pkl, meta = self.path / "checkpoint.pkl", self.path / "checkpoint.json"
        if not pkl.exists() or not meta.exists():
            return None
        blob = pkl.read_bytes()
        if hashlib.sha256(blob).hexdigest() != self._read_json("checkpoint.json").get("sha256"):
            raise ParetoSearchError(f"{pkl}: checksum does not match checkpoint.json; the "
                                    "checkpoint was altered or half-written and is not loaded "
                                    "(delete both files to restart from the journal)")
        return pickle.loads(blob)  # our own file, checksum verified

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

    def _read_json(self, name: str) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads((self.path / name).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ParetoSearchError(f"{self.path}: no readable {name} ({exc}); is this a run "
                                    "directory of 'paretosearch search'?") from exc
        return doc
