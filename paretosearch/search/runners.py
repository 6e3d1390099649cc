"""Injected parallelism: evaluate candidates serially or on Dask.

A runner owns the workloads (shipped to Dask workers once, by ``scatter``) and evaluates
parameter sets with :func:`~paretosearch.search.evaluation.evaluate`, two ways:

- ``map``: a batch (a generation). Each record is handed to ``on_result`` as soon as it
  exists (so a search can journal it before anything else can go wrong) and the batch's
  records come back in the batch's order.
- ``stream``: candidates keep coming (the asynchronous search). Each finished evaluation is
  handed to ``on_result``, which returns the candidates to start next, at once, so that a
  worker that frees up gets work without waiting for the others. ``slots`` says how many
  evaluations can run at once.

Results do not depend on which worker ran what: evaluation is pure.
"""

from __future__ import annotations

import collections
import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from paretosearch.search.evaluation import Task, evaluate
from paretosearch.search.trust import UntrustedResult, plain_records, plain_work
from simulator import Workload
from simulator.errors import ParetoSearchError

__all__ = ["SLOTS_S", "DaskRunner", "Next", "OnResult", "Runner", "SerialRunner", "evaluate_many",
           "interrupts_kept", "raise_kept"]

SLOTS_S = 2.0
"""How long a Dask runner trusts the worker count it last heard."""

Params = Mapping[str, Any]
OnResult = Callable[[int, dict[str, float]], None]
Next = Callable[[Params, dict[str, float]], Sequence[Params]]
"""Hears one finished evaluation (its parameters and record); returns what to start next."""


class Runner(Protocol):
    """Evaluates batches of candidates, or a stream of them."""

    @property
    def slots(self) -> int:
        """How many evaluations run at once."""
        ...

    def map(self, task: Task, batch: Sequence[Params],
            on_result: OnResult | None = None) -> list[dict[str, float]]: ...

    def stream(self, task: Task, first: Sequence[Params], on_result: Next) -> None:
        """Evaluate ``first`` and whatever ``on_result`` returns, until nothing is left."""
        ...


class SerialRunner:
    """Everything in this process, one after another: for debugging and tiny searches.

    ``slots``: how many candidates a stream holds started at once; they finish in the order
    they started (one at a time here), as ``slots`` workers of equal speed would finish them.
    """

    def __init__(self, workloads: Sequence[Workload], train: Workload, *, slots: int = 1
                 ) -> None:
        self.workloads, self.train, self.slots = list(workloads), train, slots

    def stream(self, task: Task, first: Sequence[Params], on_result: Next) -> None:
        started = collections.deque(first)
        while started:
            params = started.popleft()
            started.extend(on_result(params, evaluate(task, params, self.workloads, self.train)))
            raise_kept()

    def map(self, task: Task, batch: Sequence[Params],
            on_result: OnResult | None = None) -> list[dict[str, float]]:
        out = []
        for i, params in enumerate(batch):
            out.append(evaluate(task, params, self.workloads, self.train))
            if on_result is not None:
                on_result(i, out[-1])
            raise_kept()
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
    dies is rescheduled (by Dask, or here if Dask cancelled it for lost data); one that fails
    stops the search with the worker's message. Each record is delivered once. ``work`` is
    what a task runs (:func:`evaluate_many`; ``benchmarks/bench_scaling.py`` replays recorded
    durations). A task returns plain data (:func:`~paretosearch.search.trust.plain_work`),
    checked before it is used (:func:`~paretosearch.search.trust.plain_records`): a worker is
    not trusted (docs/security.md).
    """

    def __init__(self, client: Any, workloads: Sequence[Workload], train: Workload, *,
                 retries: int = 3, task_s: float = 0.5,
                 work: Callable[..., list[dict[str, float]]] = evaluate_many) -> None:
        self.client, self.work = client, work
        self.retries = retries
        self.task_s = task_s
        self._walls: list[float] = []
        self._data = (list(workloads), train)
        self._scattered: tuple[Any, Any] | None = None
        self._slots = (-math.inf, 0)

    def _shipped(self) -> tuple[Any, Any]:
        """The scattered workloads, shipped again if a lost worker took them with it."""
        held = self._scattered
        if held is None or any(f.status != "finished" for f in [*held[0], held[1]]):
            workloads, train = self._data
            held = (self.client.scatter(workloads, broadcast=True, hash=False),
                    self.client.scatter(train, broadcast=True, hash=False))
            self._scattered = held
        return held

    @property
    def slots(self) -> int:
        """Twice the cluster's worker threads: each has an evaluation running and one waiting
        at the scheduler, so it never waits for this process to hear of the last one and start
        the next (a round trip of 5 to 15 ms here). Asked of the scheduler at most every
        ``SLOTS_S`` seconds (a question costs a round trip too)."""
        now = time.monotonic()
        if now - self._slots[0] > SLOTS_S:
            workers = self.client.scheduler_info()["workers"].values()
            self._slots = (now, 2 * max(1, sum(int(w.get("nthreads", 1)) for w in workers)))
        return self._slots[1]

    def _chunk(self, n: int) -> int:
        workers = max(1, len(self.client.scheduler_info()["workers"]))
        if not self._walls:
            return 1
        per_eval = max(sum(self._walls) / len(self._walls), 1e-6)
        # as long as task_s allows, but never fewer than two tasks per worker
        return max(1, min(round(self.task_s / per_eval), math.ceil(n / (2 * workers))))

    def map(self, task: Task, batch: Sequence[Params],
            on_result: OnResult | None = None) -> list[dict[str, float]]:
        size = self._chunk(len(batch))
        parts = [batch[s:s + size] for s in range(0, len(batch), size)]
        out: list[dict[str, float] | None] = [None] * len(batch)

        def done(i: int, records: list[dict[str, float]]) -> list[int]:
            for offset, record in enumerate(records):
                out[i * size + offset] = record
                if on_result is not None:
                    on_result(i * size + offset, record)
            return []

        self._run(task, parts, done)
        return [r for r in out if r is not None]

    def stream(self, task: Task, first: Sequence[Params], on_result: Next) -> None:
        parts: list[Sequence[Params]] = [[p] for p in first]

        def done(i: int, records: list[dict[str, float]]) -> list[int]:
            more = on_result(parts[i][0], records[0])
            parts.extend([p] for p in more)
            return list(range(len(parts) - len(more), len(parts)))

        self._run(task, parts, done)

    def _records(self, future: Any, n: int) -> list[dict[str, float]] | None:
        """A finished task's ``n`` records, decoded as plain data and checked; None where its
        data died with a worker before it could be fetched (run it again).

        Raises:
            UntrustedResult: the answer is not plain records, or the task failed on its own
                (a task reports an evaluation's failure as data, so a failed task is a
                worker that died or one that does not run this code).
        """
        try:
            return plain_records(future.result(), n)
        except UntrustedResult as exc:
            problem = f"returned {exc}"
        except ParetoSearchError:
            raise
        except Exception as exc:  # a pickle the client refused to decode, or a failed task
            if future.status in ("cancelled", "lost"):  # the worker holding it was killed
                return None
            problem = (f"failed ({type(exc).__name__}: {str(exc)[:300]})"
                       if future.status == "error" else
                       f"returned a result that is not plain data ({type(exc).__name__}: "
                       f"{str(exc)[:300]})")
        held = list(self.client.who_has([future]).get(future.key, ()))
        where = (f"the Dask worker {', '.join(held)}" if held else "one of the Dask workers "
                 + ", ".join(self.client.scheduler_info()["workers"]))
        raise UntrustedResult(f"a task on {where} {problem}; its answer is refused (a worker "
                              "that died, or a foreign worker on the scheduler? see "
                              "docs/security.md)")

    def _run(self, task: Task, parts: Sequence[Sequence[Params]],
             done: Callable[[int, list[dict[str, float]]], list[int]]) -> None:
        """Run each part (a list of candidates) as one task; ``done`` hears a part's records
        and names the parts (indices into ``parts``, which it may extend) to start next."""
        from distributed import as_completed

        def submit(i: int) -> Any:
            workloads, train = self._shipped()
            return self.client.submit(plain_work, self.work, task,
                                      [dict(p) for p in parts[i]], workloads, train,
                                      pure=False, retries=self.retries)

        futures = {submit(i): i for i in range(len(parts))}
        lost = dict.fromkeys(futures.values(), 0)
        # the result is fetched here, not by as_completed's with_results, which waits forever
        # on a result the client refuses to decode (a worker's pickle)
        pending = as_completed(list(futures))  # type: ignore[no-untyped-call]
        with interrupts_kept():
            for future in pending:
                i = futures.pop(future)
                records = (None if future.status in ("cancelled", "lost")
                           else self._records(future, len(parts[i])))
                if records is None:  # its data died with a worker, before or while fetched
                    lost[i] += 1
                    if lost[i] > self.retries:
                        raise ParetoSearchError(f"{len(parts[i])} evaluations were lost {lost[i]} "
                                                "times with their workers; is the Dask cluster "
                                                "healthy?")
                    nxt = [i]
                else:
                    self._walls += [r["wall_s"] for r in records]
                    nxt = done(i, records)
                for j in nxt:
                    lost.setdefault(j, 0)
                    again = submit(j)
                    futures[again] = j
                    pending.add(again)  # type: ignore[no-untyped-call]
                raise_kept()


_kept = threading.Event()


class _Keeper:
    """``sys.unraisablehook`` while interrupts are kept: keeps a KeyboardInterrupt, hands
    any other unraisable error to the hook it replaced."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _kept.set()
        else:
            self.previous(unraisable)


def raise_kept() -> None:
    """Raise the KeyboardInterrupt that :func:`interrupts_kept` kept, if one was."""
    if _kept.is_set():
        _kept.clear()
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts_kept() -> Iterator[None]:
    """Ctrl-C that lands while the garbage collector runs a finaliser or a callback (a Dask
    future's ``__del__``, distributed's GC diagnosis) is only printed by Python, and a search
    would run on to the end. For this block's life, in the main thread, such a
    ``KeyboardInterrupt`` is kept instead, unprinted: a runner raises it once its next result
    is handed on, and the block at its end if nothing raised it before. Blocks nest."""
    previous = sys.unraisablehook
    if threading.current_thread() is not threading.main_thread() or \
            isinstance(previous, _Keeper):
        yield
        return
    _kept.clear()
    sys.unraisablehook = _Keeper(previous)
    try:
        yield
    finally:
        sys.unraisablehook = previous
    raise_kept()
