"""Run directories and what is in them (journals, fronts), retune specs and growing traces,
small search settings, a progress callback that kills a Dask worker, and a Ctrl-C that lands
in a finaliser."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import yaml

from paretosearch.runs.records import FrontEntry
from paretosearch.service.api import SearchSettings
from tests.helpers.data import PCS

TRACE = PCS / "traces" / "trace_6c71a0.csv"
LINES = TRACE.read_text().splitlines()


def write_trace(path: Path, rows: int, first: int = 0) -> Path:
    """The header and rows [first, rows) of trace 6c71a0: a trace that grows by rewriting."""
    path.write_text("\n".join([LINES[0], *LINES[1 + first:1 + rows]]) + "\n")
    return path


def write_spec(folder: Path, **fields: Any) -> Path:
    """A small retune spec in ``folder`` (trace.csv, out/), fields overridden by keyword."""
    doc: dict[str, Any] = {
        "trace": "trace.csv", "scaling_table": str(PCS / "scaling_tables.csv"),
        "window": {"seconds": 1e7, "min_jobs": 50, "max_jobs": 300},
        "profile": "pcs-64", "policy": "wfq", "objectives": ["jct:avg", "pred_err:avg"],
        "search": {"budget": 24, "pop_size": 6, "offspring": 6, "seed": 3},
        "out": "out", "workers": 0, **fields}
    path = folder / "retune.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def front_of(run: Path) -> list[tuple[dict[str, Any], dict[str, float]]]:
    doc = json.loads((run / "front.json").read_text())
    return [(e["params"], e["objectives"]) for e in doc["front"]]


def journal(run: Path) -> list[dict[str, Any]]:
    """The finished evaluations (a line cut short by a kill is not one)."""
    rows = []
    for line in (run / "evaluations.jsonl").read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


# --- the spec and the window -----------------------------------------------------------------


SMALL = SearchSettings(budget=32, pop_size=12, n_offsprings=10, seed=2)


def journal_keys(run: Path) -> list[str]:
    """Keys of the complete journal lines (a line cut by a kill is not an evaluation)."""
    keys = []  # a line damaged on disk (not even UTF-8) is not one either
    for line in (run / "evaluations.jsonl").read_bytes().splitlines():
        with contextlib.suppress(UnicodeDecodeError, json.JSONDecodeError):
            keys.append(json.loads(line.decode())["key"])
    return keys


def front_key(front: list[FrontEntry]) -> list[tuple[Any, ...]]:
    return [(tuple(e.params.values()), tuple(e.objectives.values())) for e in front]


class WorkerKiller:
    """A progress callback that SIGKILLs one worker process of a Dask ``client``, once, at
    the first progress it hears; ``killed`` holds the pid."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.killed: list[int] = []

    def __call__(self, progress: Any) -> None:
        if not self.killed:
            pid = next(iter(self.client.run(os.getpid).values()))
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)


class CtrlCInFinaliser:
    """Ctrl-C arriving while the garbage collector finalises this object (Python only prints
    an exception raised there)."""

    def __del__(self) -> None:
        raise KeyboardInterrupt
