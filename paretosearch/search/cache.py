"""Finished evaluations shared across runs, keyed by what they depend on (SQLite).

A nightly retune on an unchanged window, or the production config re-evaluated on the same
data, should cost nothing. An evaluation's key is a SHA-256 over everything its record
depends on: the policy family, fixed and searched parameters, the cluster profile, whether
jobs are predicted, the content digests of the workloads simulated and of the training
workload, and a digest of the code that makes a record (the simulator's and policies' source
and :mod:`paretosearch.search.evaluation`): a code change starts a fresh cache. The cache is an
SQLite file (WAL, so a reader and a writer may overlap).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paretosearch.io import check_plain
from paretosearch.search.evaluation import Task
from paretosearch.search.journal import plain_record
from paretosearch.search.runners import Next, OnResult, Params, Runner
from simulator import Workload
from simulator.errors import ParetoSearchError
from simulator.jit import source_digest

log = logging.getLogger(__name__)

MAX_ROW = 2**20
"""The most characters a cached record may have."""

__all__ = ["CachedRunner", "EvaluationCache"]


@functools.cache
def _code_digest() -> str:
    from paretosearch.search import evaluation

    text = source_digest() + Path(evaluation.__file__).read_text()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class EvaluationCache:
    """``key -> record`` in an SQLite file; counts its ``hits`` and ``misses``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(check_plain(self.path), timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS evaluations "
                             "(key TEXT PRIMARY KEY, record TEXT NOT NULL)")
        except sqlite3.Error as exc:
            raise ParetoSearchError(f"{self.path}: cannot open the evaluation cache ({exc}); "
                                    "delete it to start a fresh one") from exc
        self.hits = self.misses = 0

    def get(self, key: str) -> dict[str, float] | None:
        """The cached record, or None (a damaged row too: logged, and evaluated again)."""
        try:
            row = self._db.execute("SELECT record FROM evaluations WHERE key = ?",
                                   (key,)).fetchone()
        except sqlite3.Error as exc:
            raise ParetoSearchError(f"{self.path}: cannot read the evaluation cache ({exc}); "
                                    "delete it to start a fresh one") from exc
        record = None if row is None else _record(row[0])
        if record is None:
            if row is not None:
                log.warning("%s: the cached record of %s is damaged; evaluated again",
                            self.path, key[:12])
            self.misses += 1
            return None
        self.hits += 1
        return record

    def put(self, key: str, record: Mapping[str, float]) -> None:
        """Store a finished record (committed at once)."""
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO evaluations VALUES (?, ?)",
                             (key, json.dumps(dict(record))))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def _record(text: object) -> dict[str, float] | None:
    """A cached row's record: a JSON mapping of text to numbers (finite or NaN), else None."""
    if not isinstance(text, str) or len(text) > MAX_ROW:
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return plain_record(doc)


class CachedRunner:
    """A runner that answers from the cache where it can and stores what ``inner`` runs."""

    def __init__(self, inner: Runner, cache: EvaluationCache, workloads: Sequence[Workload],
                 train: Workload) -> None:
        self.inner, self.cache = inner, cache
        # what every key shares, hashed once: the workloads' contents and the code
        self._inputs = {"workloads": [w.digest() for w in workloads], "train": train.digest(),
                        "code": _code_digest()}

    def key(self, task: Task, params: Mapping[str, Any]) -> str:
        """The content key of one evaluation of ``task`` with ``params`` on these workloads."""
        doc = {"policy": task.policy, "fixed": dict(task.fixed), "params": dict(params),
               "profile": repr(task.profile), "predict": task.predict, **self._inputs}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()

    def map(self, task: Task, batch: Sequence[Params],
            on_result: OnResult | None = None) -> list[dict[str, float]]:
        keys = [self.key(task, p) for p in batch]
        out: list[dict[str, float] | None] = [self.cache.get(k) for k in keys]
        todo = [i for i, r in enumerate(out) if r is None]
        for i, record in enumerate(out):
            if record is not None and on_result is not None:
                on_result(i, record)

        def keep(j: int, record: dict[str, float]) -> None:
            self.cache.put(keys[todo[j]], record)
            out[todo[j]] = record
            if on_result is not None:
                on_result(todo[j], record)

        if todo:
            self.inner.map(task, [batch[i] for i in todo], keep)
        return [r for r in out if r is not None]

    @property
    def slots(self) -> int:
        return self.inner.slots

    def stream(self, task: Task, first: Sequence[Params], on_result: Next) -> None:
        """The inner runner's stream; candidates the cache holds finish at once (and what
        they return is looked up in turn)."""
        def to_run(batch: Sequence[Params]) -> list[Params]:
            run, waiting = [], collections.deque(batch)
            while waiting:
                params = waiting.popleft()
                record = self.cache.get(self.key(task, params))
                if record is None:
                    run.append(params)
                else:
                    waiting.extend(on_result(params, record))
            return run

        def keep(params: Params, record: dict[str, float]) -> list[Params]:
            self.cache.put(self.key(task, params), record)
            return to_run(on_result(params, record))

        self.inner.stream(task, to_run(first), keep)
