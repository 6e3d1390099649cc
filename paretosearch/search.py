"""SPEA2 over a policy family's declared space: a thin adapter onto pymoo (SPEC §4).

The problem maps unit-cube points to parameters, evaluates a whole generation through the
injected runner, and keeps every evaluation record. A callback tracks the hypervolume of the
archive each generation against a reference point fixed after the first generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from pymoo.algorithms.moo.spea2 import SPEA2
from pymoo.core.callback import Callback
from pymoo.core.problem import Problem
from pymoo.indicators.hv import HV
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.optimize import minimize

from paretosearch.evaluation import SearchSpace, Task
from paretosearch.objectives import Objective
from paretosearch.runners import Runner

__all__ = ["Candidate", "Progress", "SearchOutcome", "run_spea2"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration: its parameters and its evaluation record."""

    params: dict[str, Any]
    record: dict[str, float]

    def values(self, objectives: Sequence[Objective]) -> list[float]:
        """The objective values, in their natural sign."""
        return [self.record[o.label] for o in objectives]


@dataclass
class SearchOutcome:
    """The front, every evaluation, and the hypervolume history."""

    front: list[Candidate]
    evaluations: list[Candidate]
    hypervolume: list[tuple[int, float]] = field(default_factory=list)
    reference_point: list[float] = field(default_factory=list)


class _Problem(Problem):  # type: ignore[misc]
    def __init__(self, task: Task, space: SearchSpace, objectives: Sequence[Objective],
                 runner: Runner) -> None:
        super().__init__(n_var=len(space), n_obj=len(objectives), xl=0.0, xu=1.0)
        self.task, self.space, self.objectives, self.runner = task, space, objectives, runner
        self.evaluated: list[Candidate] = []
        self.by_point: dict[tuple[float, ...], Candidate] = {}

    def _evaluate(self, X: FloatArray, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        batch = [self.space.decode(x) for x in X]
        records = self.runner.map(self.task, batch)
        cands = [Candidate(p, r) for p, r in zip(batch, records, strict=True)]
        self.evaluated.extend(cands)
        self.by_point.update((_key(x), c) for x, c in zip(X, cands, strict=True))
        out["F"] = np.array([[o.loss(c.record[o.label]) for o in self.objectives]
                             for c in cands])


@dataclass(frozen=True)
class Progress:
    """The state after one generation, for progress bars and checkpoints."""

    evaluations: int
    hypervolume: float
    front: list[Candidate]
    evaluated: list[Candidate]


class _Generation(Callback):  # type: ignore[misc]
    def __init__(self, problem: _Problem, on_generation: Callable[[Progress], None] | None
                 ) -> None:
        super().__init__()
        self.problem = problem
        self.history: list[tuple[int, float]] = []
        self.ref: FloatArray | None = None
        self.on_generation = on_generation

    def notify(self, algorithm: Any) -> None:
        F = algorithm.opt.get("F")
        if self.ref is None:  # fixed once: 10 % beyond the worst of the first generation
            worst = algorithm.pop.get("F").max(axis=0)
            self.ref = worst + 0.1 * np.abs(worst) + 1e-9
        hv = float(HV(ref_point=self.ref)(F))
        self.history.append((int(algorithm.evaluator.n_eval), hv))
        if self.on_generation is not None:
            front = [self.problem.by_point[_key(x)] for x in np.atleast_2d(algorithm.opt.get("X"))]
            self.on_generation(Progress(self.history[-1][0], hv, front,
                                        list(self.problem.evaluated)))


def run_spea2(task: Task, space: SearchSpace, objectives: Sequence[Objective], runner: Runner,
              *, budget: int = 370, pop_size: int = 70, n_offsprings: int = 105, seed: int = 0,
              on_generation: Callable[[Progress], None] | None = None) -> SearchOutcome:
    """Search with SPEA2 (PCS's settings: SBX p=1 η=20, polynomial mutation η=20, p=1/n).

    Args:
        task, space, objectives: what to evaluate, over which parameters, for which goals.
        runner: evaluates each generation (serial or Dask).
        budget: total evaluations (the termination is given to ``minimize``).
        pop_size, n_offsprings: SPEA2's archive and offspring sizes.
        seed: the search's seed: same seed, same front, whichever worker ran what.
        on_generation: called with a :class:`Progress` after each generation.
    """
    problem = _Problem(task, space, objectives, runner)
    algorithm = SPEA2(pop_size=pop_size, n_offsprings=n_offsprings,
                      crossover=SBX(prob=1.0, eta=20), mutation=PM(eta=20))
    hv = _Generation(problem, on_generation)
    res = minimize(problem, algorithm, termination=("n_eval", budget), seed=seed,
                   callback=hv, verbose=False)
    front = [problem.by_point[_key(x)] for x in np.atleast_2d(res.opt.get("X"))]
    return SearchOutcome(front, problem.evaluated, hv.history,
                         [] if hv.ref is None else hv.ref.tolist())


def _key(x: FloatArray) -> tuple[float, ...]:
    return tuple(float(v) for v in x)
