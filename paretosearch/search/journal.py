"""What a search keeps of its finished work, and where: the journal it replays on a resume.

The search owns this contract; :class:`paretosearch.runs.store.RunStore` keeps it in a run
folder (``evaluations.jsonl``, ``started.jsonl``). The search never imports the run store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["MAX_RECORD_FIELDS", "Evaluation", "Journal", "param_key", "plain_record"]

Evaluation = tuple[dict[str, Any], dict[str, float]]
"""(parameters, record) of one finished evaluation."""
MAX_RECORD_FIELDS = 10_000
"""The most fields a record (from a worker, a journal or the cache) may have."""


def param_key(params: dict[str, Any]) -> str:
    """The content key of a candidate: its parameters, exactly (floats by repr)."""
    return json.dumps(params, sort_keys=True)


def plain_record(value: Any) -> dict[str, float] | None:
    """``value`` as a record if it is one (a mapping of at most :data:`MAX_RECORD_FIELDS`
    names to numbers, finite or NaN), else None: for records read back from a worker, a
    journal or the cache."""
    if not isinstance(value, dict) or not 0 < len(value) <= MAX_RECORD_FIELDS or not all(
            isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
            for k, v in value.items()):
        return None
    try:
        record = {k: float(v) for k, v in value.items()}
    except OverflowError:  # an integer past a float's range
        return None
    return None if any(math.isinf(v) for v in record.values()) else record


class Journal(Protocol):
    """Where a search journals each evaluation the moment it finishes, so that a run killed
    at any moment resumes without repeating finished work."""

    def read_journal(self, fits: Callable[[dict[str, Any], dict[str, float]], bool]
                     ) -> dict[str, Evaluation]:
        """Finished evaluations by key, in the order they finished; a line whose parameters
        and record do not ``fit`` the search is left out (it runs again)."""

    def append(self, key: str, params: dict[str, Any], record: dict[str, float]) -> None:
        """Journal one finished evaluation, durably before returning."""

    def read_started(self, fits: Callable[[dict[str, Any]], bool]
                     ) -> list[tuple[int, dict[str, Any]]]:
        """The asynchronous search's candidates in the order it started them: how many
        evaluations had finished when each was bred, and its parameters (those that ``fit``
        the search's space)."""

    def append_started(self, after: int, params: dict[str, Any]) -> None:
        """Record a candidate the asynchronous search starts, before it starts."""
