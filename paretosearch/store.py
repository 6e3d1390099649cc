"""A run directory per search: ``run.json``, ``records.parquet``, ``front.json``.

Every file is replaced atomically (temp file + rename), after every generation, so a reader
polling ``front.json`` sees either the previous front or the new one, never a partial file.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from paretosearch.io import write_json, write_table
from paretosearch.objectives import Objective
from paretosearch.search import Candidate
from simulator.errors import ParetoSearchError

__all__ = ["RunStore", "front_entry"]


class RunStore:
    """Reads and writes one search's directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def write_spec(self, spec: dict[str, Any]) -> None:
        """``run.json``: what was searched, with versions for provenance."""
        from paretosearch import __version__

        write_json({**spec, "versions": {"paretosearch": __version__,
                                         "python": platform.python_version()}},
                   self.path / "run.json")

    def write_progress(self, evaluated: Sequence[Candidate], front: Sequence[dict[str, Any]],
                       hypervolume: Sequence[tuple[int, float]]) -> None:
        """Every evaluation so far, the current front and the hypervolume history."""
        rows = [{**{f"param.{k}": v for k, v in c.params.items()}, **c.record}
                for c in evaluated]
        write_table(pd.DataFrame(rows), self.path / "records.parquet")
        write_json({"front": list(front),
                    "hypervolume": [{"evaluations": n, "hypervolume": h} for n, h in hypervolume]},
                   self.path / "front.json")

    def read_front(self) -> dict[str, Any]:
        """The published front (``front.json``)."""
        try:
            doc: dict[str, Any] = json.loads((self.path / "front.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ParetoSearchError(f"{self.path}: no readable front.json ({exc}); is this a "
                                    "run directory of 'paretosearch search'?") from exc
        return doc

    def write_choice(self, choice: dict[str, Any]) -> Path:
        """``chosen.json``: the operator's selected configuration."""
        return write_json(choice, self.path / "chosen.json")


def front_entry(c: Candidate, objectives: Sequence[Objective],
                test: dict[str, float] | None = None) -> dict[str, Any]:
    """One front member as JSON: parameters, objective values, all metrics, test metrics."""
    return {"params": c.params,
            "objectives": {o.label: c.record[o.label] for o in objectives},
            "metrics": c.record,
            "test_metrics": test}
