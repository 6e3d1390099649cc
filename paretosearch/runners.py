"""Injected parallelism: evaluate a batch of candidates serially or on Dask.

A runner owns the workloads (shipped to Dask workers once, by ``scatter``) and maps
:func:`~paretosearch.evaluation.evaluate` over a batch of parameter sets, returning records
in the batch's order. Results do not depend on which worker ran what: evaluation is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from paretosearch.evaluation import Task, evaluate
from simulator import Workload

__all__ = ["DaskRunner", "Runner", "SerialRunner"]


class Runner(Protocol):
    """Evaluates batches of candidates."""

    def map(self, task: Task, batch: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]: ...


class SerialRunner:
    """Everything in this process, one after another: for debugging and tiny searches."""

    def __init__(self, workloads: Sequence[Workload], train: Workload) -> None:
        self.workloads, self.train = list(workloads), train

    def map(self, task: Task, batch: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
        return [evaluate(task, params, self.workloads, self.train) for params in batch]


class DaskRunner:
    """Evaluations as Dask tasks on a given client (a ``LocalCluster``'s or a remote one).

    The workloads are scattered to every worker once; tasks are submitted with
    ``pure=False`` (never deduplicated) and retried if their worker dies.
    """

    def __init__(self, client: Any, workloads: Sequence[Workload], train: Workload, *,
                 retries: int = 3) -> None:
        self.client = client
        self.retries = retries
        self._workloads = client.scatter(list(workloads), broadcast=True)
        self._train = client.scatter(train, broadcast=True)

    def map(self, task: Task, batch: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
        futures = [self.client.submit(evaluate, task, dict(params), self._workloads, self._train,
                                      pure=False, retries=self.retries) for params in batch]
        results: list[dict[str, float]] = self.client.gather(futures)
        return results
