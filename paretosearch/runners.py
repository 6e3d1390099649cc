"""Injected parallelism: evaluate a batch of candidates serially or on Dask.

A runner owns the workloads (shipped to Dask workers once, by ``scatter``) and maps
:func:`~paretosearch.evaluation.evaluate` over a batch of parameter sets. Each record is
handed to ``on_result`` as soon as it exists (so a search can journal it before anything
else can go wrong) and the batch's records come back in the batch's order. Results do not
depend on which worker ran what: evaluation is pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from paretosearch.evaluation import Task, evaluate
from simulator import Workload
from simulator.errors import ParetoSearchError

__all__ = ["DaskRunner", "OnResult", "Runner", "SerialRunner", "evaluate_many"]

Params = Mapping[str, Any]
OnResult = Callable[[int, dict[str, float]], None]


class Runner(Protocol):
    """Evaluates batches of candidates."""

    def map(self, task: Task, batch: Sequence[Params],
            on_result: OnResult | None = None) -> list[dict[str, float]]: ...


class SerialRunner:
    """Everything in this process, one after another: for debugging and tiny searches."""

    def __init__(self, workloads: Sequence[Workload], train: Workload) -> None:
        self.workloads, self.train = list(workloads), train

    def map(self, task: Task, batch: Sequence[Params],
            on_result: OnResult | None = None) -> list[dict[str, float]]:
        out = []
        for i, params in enumerate(batch):
            out.append(evaluate(task, params, self.workloads, self.train))
            if on_result is not None:
                on_result(i, out[-1])
        return out


def evaluate_many(task: Task, batch: Sequence[Params], workloads: Sequence[Workload],
                  train: Workload) -> list[dict[str, float]]:
    """Several evaluations in one Dask task (amortises per-task overhead for short ones)."""
    return [evaluate(task, params, workloads, train) for params in batch]


class DaskRunner:
    """Evaluations as Dask tasks on a given client (a ``LocalCluster``'s or a remote one).

    The workloads are scattered to every worker once (again only if a lost worker took the
    last copy). Short evaluations are grouped so that a
    task lasts about ``task_s`` seconds (judged from the evaluations seen so far), which keeps
    Dask's per-task cost small without unbalancing the workers. Tasks are submitted with
    ``pure=False`` (never deduplicated) and collected as they complete. A task whose worker
    dies is rescheduled (by Dask, or here if Dask cancelled it for lost data); one that raises
    is retried ``retries`` times. Each record is delivered once.
    """

    def __init__(self, client: Any, workloads: Sequence[Workload], train: Workload, *,
                 retries: int = 3, task_s: float = 0.5) -> None:
        self.client = client
        self.retries = retries
        self.task_s = task_s
        self._walls: list[float] = []
        self._data = (list(workloads), train)
        self._scattered: tuple[Any, Any] | None = None

    def _shipped(self) -> tuple[Any, Any]:
        """The scattered workloads, shipped again if a lost worker took them with it."""
        held = self._scattered
        if held is None or any(f.status != "finished" for f in [*held[0], held[1]]):
            workloads, train = self._data
            held = (self.client.scatter(workloads, broadcast=True, hash=False),
                    self.client.scatter(train, broadcast=True, hash=False))
            self._scattered = held
        return held

    def _chunk(self, n: int) -> int:
        workers = max(1, len(self.client.scheduler_info()["workers"]))
        if not self._walls:
            return 1
        per_eval = max(sum(self._walls) / len(self._walls), 1e-6)
        # as long as task_s allows, but never fewer than two tasks per worker
        return max(1, min(round(self.task_s / per_eval), math.ceil(n / (2 * workers))))

    def map(self, task: Task, batch: Sequence[Params],
            on_result: OnResult | None = None) -> list[dict[str, float]]:
        from distributed import as_completed

        size = self._chunk(len(batch))

        def submit(start: int) -> Any:
            workloads, train = self._shipped()
            return self.client.submit(evaluate_many, task,
                                      [dict(p) for p in batch[start:start + size]],
                                      workloads, train, pure=False, retries=self.retries)

        futures = {submit(s): s for s in range(0, len(batch), size)}
        lost = dict.fromkeys(futures.values(), 0)
        out: list[dict[str, float] | None] = [None] * len(batch)
        pending = as_completed(list(futures))  # type: ignore[no-untyped-call]
        for future in pending:
            start = futures.pop(future)
            if future.status in ("cancelled", "lost"):  # its data died with a worker
                lost[start] += 1
                if lost[start] > self.retries:
                    raise ParetoSearchError(f"evaluations {start}..{start + size - 1} were lost "
                                            f"{lost[start]} times with their workers; is the "
                                            "Dask cluster healthy?")
                again = submit(start)
                futures[again] = start
                pending.add(again)  # type: ignore[no-untyped-call]
                continue
            for offset, record in enumerate(future.result()):
                out[start + offset] = record
                self._walls.append(record["wall_s"])
                if on_result is not None:
                    on_result(start + offset, record)
        return [r for r in out if r is not None]
