"""SPEA2 over a policy family's declared space: a thin adapter onto pymoo (SPEC §4).

pymoo's ask/tell loop lets the search own evaluation: each generation's candidates are looked
up in the run's journal first (so a resumed run never repeats finished work), the rest go to
the injected runner, and every record is journaled the moment it exists. Nothing else is
saved: a run killed at any moment is resumed by running it again from its seed, the journal
answering every candidate it had evaluated, which rebuilds the optimiser's state exactly and
reaches the same front as an uninterrupted run (no pickle of the optimiser, which would run
code on loading).

A space with a choice parameter is searched with pymoo's mixed-variable sampling and mating
(numbers still coded on [0, 1], choices by option index) under the same SPEA2 survival.

The archive holds one member per objective vector. Many configurations score exactly alike
(in WFQ, any T that leaves a single class makes the weights irrelevant), and as equals they
are all non-dominated: left in, they crowd the archive and breed more of themselves (in a
warm-started retune, up to half the evaluations went to one objective vector).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from pymoo.algorithms.moo.nsga3 import HyperplaneNormalization
from pymoo.algorithms.moo.spea2 import SPEA2, SPEA2Survival, spea_binary_tournament
from pymoo.core.mixed import MixedVariableDuplicateElimination, MixedVariableMating
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.core.variable import Choice, Real
from pymoo.indicators.hv import HV
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.crossover.ux import UX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.mutation.rm import ChoiceRandomMutation
from pymoo.operators.selection.tournament import TournamentSelection
from pymoo.problems.static import StaticProblem
from pymoo.util.display.multi import MultiObjectiveOutput
from pymoo.util.optimum import filter_optimum
from scipy.stats import qmc

from paretosearch.objectives import Objective
from paretosearch.search.evaluation import SearchSpace, Task
from paretosearch.search.journal import Evaluation, Journal, param_key
from paretosearch.search.runners import Runner
from paretosearch.settings import COVERED, MODES, SearchSettings
from simulator.metrics import InvalidObjective

__all__ = ["COVERED", "MODES", "HypervolumeBox", "Progress", "SearchOutcome", "SearchSettings",
           "run_spea2"]

FloatArray = npt.NDArray[np.float64]

@dataclass(frozen=True)
class Progress:
    """The state after one generation, for progress bars and publishing."""

    front: list[Evaluation]
    evaluated: list[Evaluation]
    history: list[tuple[int, float]]
    """(evaluations so far, hypervolume) after each generation: the share of a fixed box
    that the archive dominates (:class:`HypervolumeBox`)."""

    @property
    def generation(self) -> int:
        """Generations completed."""
        return len(self.history)

    @property
    def evaluations(self) -> int:
        """Evaluations so far."""
        return self.history[-1][0]

    @property
    def hypervolume(self) -> float:
        """Hypervolume of the current archive, as a share of the box (0 to 1)."""
        return self.history[-1][1]

    @property
    def best_hypervolume(self) -> float:
        """The largest hypervolume so far. SPEA2 keeps an archive of fixed size: where more
        points are non-dominated than it holds, truncation drops some, and the hypervolume
        can fall below this."""
        return max(h for _, h in self.history)


@dataclass(frozen=True)
class HypervolumeBox:
    """The fixed box a search's hypervolume is measured in, set by its first generation's
    losses: from 0 (for an objective with a negative loss, a maximised metric, from one span
    below its best) to 10 % beyond the worst. The hypervolume is the share of the box the
    points dominate (points outside it are clipped to it), so it reads as a number from 0
    to 1 and can be compared from one generation to the next."""

    low: FloatArray
    ref: FloatArray

    @classmethod
    def of(cls, F: FloatArray) -> HypervolumeBox:
        """The box of a first generation's losses ``F`` (a row per point)."""
        worst, best = np.nanmax(F, axis=0), np.nanmin(F, axis=0)
        ref = worst + 0.1 * np.abs(worst) + 1e-9
        return cls(np.where(best >= 0, 0.0, best - (ref - best)), ref)

    def share(self, F: FloatArray) -> float:
        """The share of the box that the points ``F`` dominate."""
        inside = np.clip(F, self.low, self.ref)
        return float(HV(ref_point=self.ref)(inside)) / float(np.prod(self.ref - self.low))


@dataclass
class SearchOutcome:
    """The front, every evaluation, and the hypervolume history."""

    front: list[Evaluation]
    evaluations: list[Evaluation]
    hypervolume: list[tuple[int, float]] = field(default_factory=list)


class _SpanNormalization(HyperplaneNormalization):  # type: ignore[misc]  # pymoo is untyped
    """pymoo's normalisation for SPEA2, with a unit span on an objective that has not varied.

    pymoo divides by ``nadir - ideal``: an objective every evaluation so far scored alike
    (no SLO job ever missed, say) made every distance NaN, and SPEA2 then filled its archive
    in index order instead of by fitness, keeping the worst configurations."""

    ideal_point: FloatArray
    nadir_point: FloatArray

    def update(self, F: FloatArray, nds: Any = None) -> None:
        super().update(F, nds=nds)
        ideal, nadir = self.ideal_point, self.nadir_point
        self.nadir_point = np.where(nadir > ideal, nadir, ideal + 1.0)


class _DistinctSurvival(SPEA2Survival):  # type: ignore[misc]  # pymoo is untyped
    """SPEA2's environmental selection over the first member of each objective vector."""

    norm: HyperplaneNormalization | None

    def _do(self, problem: Problem, pop: Population, *args: Any, n_survive: int,
            **kwargs: Any) -> Population:
        if self.normalize and self.norm is None:
            self.norm = _SpanNormalization(problem.n_obj)
        _, first = np.unique(pop.get("F"), axis=0, return_index=True)
        distinct = pop[np.sort(first)]
        return super()._do(problem, distinct, *args, n_survive=min(n_survive, len(distinct)),
                           **kwargs)


def _check_defined(F: FloatArray, objectives: Sequence[Objective]) -> None:
    """Stop on an objective the first generation found undefined (NaN) everywhere: it
    measures jobs the workload does not have, and would only mislead the search."""
    undefined = [o.label for o, column in zip(objectives, F.T, strict=True)
                 if np.isnan(column).all()]
    if undefined:
        raise InvalidObjective(
            f"{', '.join(map(repr, undefined))}: undefined (NaN) for every configuration of the "
            "first generation, so the workload has no jobs it measures (slo_miss needs SLO "
            "jobs, be_jct best-effort jobs, pred_err predictions); choose other objectives, or "
            "give the workload such jobs (--slo-mix, or a spec's slo_mix). The evaluations so far "
            "are kept")


IMMIGRANTS = 0.25
"""Share of each generation's candidates drawn from the space-filling sequence instead of
bred: the sequence goes on covering the space while the rest exploit the archive."""


def _fits(space: SearchSpace, objectives: Sequence[Objective]
          ) -> Callable[[dict[str, Any], dict[str, float]], bool]:
    """Whether a journaled evaluation is one of this search: a point of its space, scored on
    its objectives (a damaged or altered line is evaluated again, never trusted)."""
    return lambda params, record: space.holds(params) and all(o.label in record
                                                              for o in objectives)


def _algorithm(space: SearchSpace, n_obj: int, s: SearchSettings,
               initial: Sequence[dict[str, Any]] = ()) -> SPEA2:
    # every component fresh: pymoo's default arguments are shared instances, and SPEA2's
    # survival keeps normalisation state, which would leak from one search into the next
    if space.mixed:
        problem, operators = _mixed(space, n_obj)
    else:
        problem = Problem(n_var=len(space), n_obj=n_obj, xl=0.0, xu=1.0)
        operators = {"selection": TournamentSelection(spea_binary_tournament),
                     "crossover": SBX(prob=1.0, prob_var=1.0, eta=10), "mutation": PM(eta=10)}
    operators["sampling"] = _first_sample(space, initial, s)
    algorithm = SPEA2(pop_size=s.archive, n_offsprings=s.offspring,
                      survival=_DistinctSurvival(normalize=True), output=MultiObjectiveOutput(),
                      **operators)
    # the termination goes to setup() (what minimize() does), not to SPEA2()
    algorithm.setup(problem, termination=("n_eval", s.budget), seed=s.seed, verbose=False)
    return algorithm


def _space_filling(space: SearchSpace, seed: int, start: int, n: int) -> list[list[float]]:
    """Points ``start`` to ``start + n`` of the search's scrambled Halton sequence, as codes
    (:meth:`SearchSpace.unit_codes`)."""
    sequence = qmc.Halton(len(space), rng=np.random.default_rng([seed, 3]))
    sequence.fast_forward(start)
    return [space.unit_codes(row) for row in sequence.random(n)]


def _first_sample(space: SearchSpace, initial: Sequence[dict[str, Any]],
                  s: SearchSettings) -> Population:
    """The first generation: the given configurations (a warm start, up to the archive
    size, duplicates dropped), then the space-filling sequence to the first sample's size."""
    seeds = list({param_key(space.decode(space.encode(p))): space.encode(p)
                  for p in initial}.values())[:s.archive]
    fill = _space_filling(space, s.seed, 0, max(0, s.first_sample(len(space)) - len(seeds)))
    return Population.new(X=_coded(space, seeds + fill))


def _immigrate(space: SearchSpace, s: SearchSettings, pop: Population, start: int) -> int:
    """Replace the last :data:`IMMIGRANTS` share of a bred generation by the space-filling
    sequence's points from ``start``; returns how many."""
    k = int(IMMIGRANTS * len(pop))
    if k:
        X = pop.get("X")
        X[len(X) - k:] = _coded(space, _space_filling(space, s.seed, start, k))
        pop.set("X", X)
    return k


def _coded(space: SearchSpace, rows: Sequence[Sequence[float]]) -> Any:
    """Encoded points as pymoo holds them: a float matrix, or for mixed variables one
    ``{name: code}`` dict per point."""
    if space.mixed:
        return np.array([{n: int(c) if d.kind == "choice" else c
                          for n, d, c in zip(space.names, space.domains, r, strict=True)}
                         for r in rows], dtype=object)
    return np.array(rows, dtype=np.float64)


def _mixed(space: SearchSpace, n_obj: int) -> tuple[Problem, dict[str, Any]]:
    """pymoo's mixed-variable problem and operators: numbers on [0, 1], choices by index.

    Numbers mate as in the real-coded search (SBX p=1 η=10, polynomial mutation η=10);
    each choice by uniform crossover and random resetting; parents by SPEA2's tournament.
    """
    variables = {n: Choice(options=list(range(len(d.choices)))) if d.kind == "choice"
                 else Real(bounds=(0.0, 1.0))
                 for n, d in zip(space.names, space.domains, strict=True)}
    mating = MixedVariableMating(
        selection=TournamentSelection(spea_binary_tournament),
        crossover={Real: SBX(prob=1.0, prob_var=1.0, eta=10), Choice: UX()},
        mutation={Real: PM(eta=10), Choice: ChoiceRandomMutation()},
        eliminate_duplicates=MixedVariableDuplicateElimination())
    return Problem(vars=variables, n_obj=n_obj), {
        "mating": mating, "eliminate_duplicates": MixedVariableDuplicateElimination()}


def run_spea2(task: Task, space: SearchSpace, objectives: Sequence[Objective], runner: Runner,
              settings: SearchSettings, *, store: Journal | None = None,
              on_generation: Callable[[Progress], None] | None = None,
              initial: Sequence[dict[str, Any]] = ()) -> SearchOutcome:
    """Search with SPEA2: a space-filling first sample (scrambled Halton), then generations
    bred by SBX (p=1 per variable, η=10) and polynomial mutation (η=10, p=1/n), a quarter of
    each generation drawn from the space-filling sequence instead (:data:`IMMIGRANTS`).

    Args:
        task, space, objectives: what to evaluate, over which parameters, for which goals.
        runner: evaluates each generation (serial or Dask).
        settings: budget (total evaluations), population sizes and seed; same seed, same
            front, whichever worker ran what.
        store: the run directory: its journal, replayed if present (a resumed run).
        on_generation: called with a :class:`Progress` after each generation.
        initial: configurations to start from (a warm start, e.g. the previous run's front):
            they open the first generation, the space-filling sample fills the rest of it.
    """
    if settings.mode == "async":
        return _SteadyState(task, space, objectives, runner, settings, store, on_generation,
                            initial).run()
    # a resumed run replays its journal: each generation asks for the same candidates as
    # before (same seed), those evaluated are answered from the journal, the rest run
    journal: dict[str, Evaluation] = store.read_journal(_fits(space, objectives)) if store \
        else {}
    algorithm = _algorithm(space, len(objectives), settings, initial)
    history: list[tuple[int, float]] = []
    box: HypervolumeBox | None = None

    def losses(params: dict[str, Any]) -> list[float]:
        record = journal[param_key(params)][1]
        return [o.loss(record[o.label]) for o in objectives]

    immigrants = settings.first_sample(len(space))  # the space-filling sequence's next point
    while algorithm.has_next():
        bred = algorithm.is_initialized
        algorithm.n_offsprings = min(settings.offspring,
                                     settings.budget - algorithm.evaluator.n_eval)
        pop = algorithm.ask()
        if pop is None or len(pop) == 0:  # nothing new left to try (a small discrete space)
            break
        if bred:
            immigrants += _immigrate(space, settings, pop, immigrants)
        batch = [space.decode(x) for x in pop.get("X")]
        todo = [p for p in batch if param_key(p) not in journal]

        def keep(i: int, record: dict[str, float], todo: list[dict[str, Any]] = todo) -> None:
            journal[param_key(todo[i])] = (todo[i], record)
            if store:
                store.append(param_key(todo[i]), todo[i], record)

        runner.map(task, todo, keep)
        F = np.array([losses(p) for p in batch])
        if box is None:  # fixed once, by the first generation
            _check_defined(F, objectives)
            box = HypervolumeBox.of(F)
        algorithm.evaluator.eval(StaticProblem(algorithm.problem, F=F), pop)
        algorithm.tell(infills=pop)
        history.append((int(algorithm.evaluator.n_eval), box.share(algorithm.opt.get("F"))))
        if on_generation is not None and (todo or not algorithm.has_next()):
            on_generation(Progress(_front(algorithm, space, journal), list(journal.values()),
                                   list(history)))
    return SearchOutcome(_front(algorithm, space, journal), list(journal.values()), history)


def _front(algorithm: Any, space: SearchSpace,
           journal: dict[str, Evaluation]) -> list[Evaluation]:
    X = algorithm.opt.get("X")
    rows = list(X) if space.mixed else np.atleast_2d(X)  # mixed: one dict per member
    return [journal[param_key(space.decode(x))] for x in rows]


class _SteadyState:
    """The asynchronous search (``mode="async"``): steady-state SPEA2.

    The first sample is drawn as in the generational mode. Whenever an evaluation
    finishes it joins the archive (SPEA2's environmental selection over the archive and it,
    with a generator drawn from the seed and the number of evaluations finished), and every
    free slot of the runner at once gets a new candidate: the next of the first sample, then
    (one in four from the space-filling sequence) an offspring bred from the archive (SPEA2's
    tournament, SBX and polynomial mutation, with a generator drawn from the seed and the
    candidate's number). Each candidate is written to ``started.jsonl`` (with how many
    evaluations had finished) before it starts, each result to the journal as it finishes; a
    resumed run replays the journal in the order evaluations finished, restarts the
    candidates that were running, and goes on.
    So a run given the same order of finishing reaches the same front; which order a Dask
    cluster produces depends on timing, so two runs may not.
    """

    def __init__(self, task: Task, space: SearchSpace, objectives: Sequence[Objective],
                 runner: Runner, settings: SearchSettings, store: Journal | None,
                 on_generation: Callable[[Progress], None] | None,
                 initial: Sequence[dict[str, Any]]) -> None:
        self.task, self.space, self.objectives, self.runner = task, space, objectives, runner
        self.s, self.store, self.on_generation = settings, store, on_generation
        self.algorithm = _algorithm(space, len(objectives), settings, initial)
        first = [space.decode(x) for x in self.algorithm.ask().get("X")]
        self.first = list({param_key(p): p for p in first}.values())
        self.first_size = settings.first_sample(len(space))  # where the sequence goes on
        self.archive = Population.empty()
        self.journal: dict[str, Evaluation] = {}
        self.started: list[tuple[int, dict[str, Any]]] = []
        self.running: set[str] = set()
        self.history: list[tuple[int, float]] = []
        self.box: HypervolumeBox | None = None

    def run(self) -> SearchOutcome:
        restart: list[dict[str, Any]] = []
        if self.store:
            fits = _fits(self.space, self.objectives)
            for params, record in self.store.read_journal(fits).values():  # finishing order
                self._absorb(params, record)
            self.started = self.store.read_started(self.space.holds)
            restart = [p for _, p in self.started if param_key(p) not in self.journal]
            self.running = {param_key(p) for p in restart}
            self._publish()
        self.runner.stream(self.task, restart + self._fill(), self._finished)
        if self.box is not None and (not self.history or self.history[-1][0] != self._done):
            self._record()
        self._publish()
        return SearchOutcome(self._front(), list(self.journal.values()), self.history)

    @property
    def _done(self) -> int:
        return len(self.journal)

    def _finished(self, params: Mapping[str, Any], record: dict[str, float]
                  ) -> list[dict[str, Any]]:
        key = param_key(dict(params))
        self.running.discard(key)
        if self.store:
            self.store.append(key, dict(params), record)
        self._absorb(dict(params), record)
        if self._done % self.s.offspring == 0 and self.box is not None:
            self._publish()
        return self._fill()

    def _absorb(self, params: dict[str, Any], record: dict[str, float]) -> None:
        """One finished evaluation joins the archive (environmental selection)."""
        self.journal[param_key(params)] = (params, record)
        # the member keeps its journal key: decoding its encoding need not give back the
        # same floats
        member = Population.new(X=_coded(self.space, [self.space.encode(params)]),
                                key=[param_key(params)])
        F = np.array([[o.loss(record[o.label]) for o in self.objectives]])
        self.algorithm.evaluator.eval(StaticProblem(self.algorithm.problem, F=F), member)
        merged = Population.merge(self.archive, member)
        rng = np.random.default_rng([self.s.seed, 1, self._done])
        self.archive = self.algorithm.survival.do(self.algorithm.problem, merged,
                                                  n_survive=self.s.archive,
                                                  algorithm=self.algorithm, random_state=rng)
        if self.box is None and self._done == min(self.s.archive, self.s.budget):
            seen = np.array([[o.loss(r[o.label]) for o in self.objectives]
                             for _, r in self.journal.values()])
            _check_defined(seen, self.objectives)
            self.box = HypervolumeBox.of(seen)
        if self.box is not None and self._done % self.s.offspring == 0:
            self._record()

    def _record(self) -> None:
        assert self.box is not None
        self.history.append((self._done, self.box.share(self.archive.get("F"))))

    def _fill(self) -> list[dict[str, Any]]:
        """Candidates for the runner's free slots (none once the budget is started)."""
        out, slots = [], self.runner.slots
        while len(self.started) < self.s.budget and len(self.running) < slots:
            params = self._candidate(len(self.started))
            if params is None:
                break
            if self.store:
                self.store.append_started(self._done, params)
            self.started.append((self._done, params))
            self.running.add(param_key(params))
            out.append(params)
        return out

    def _candidate(self, k: int) -> dict[str, Any] | None:
        """Candidate ``k``: the first sample's; then one in four the space-filling
        sequence's next point, the others an offspring of the archive; never one evaluated
        or started (None: the archive cannot breed one yet)."""
        if k < len(self.first):
            return self.first[k]
        bred = k - len(self.first)
        due = int(IMMIGRANTS * bred)  # immigrants among the candidates bred before this one
        if int(IMMIGRANTS * (bred + 1)) > due:  # the space-filling sequence's turn
            params = self.space.decode(_space_filling(self.space, self.s.seed,
                                                      self.first_size + due, 1)[0])
            if param_key(params) not in self.journal and param_key(params) not in self.running:
                return params
        if len(self.archive) < 2:
            return None
        for attempt in range(20):
            rng = np.random.default_rng([self.s.seed, 2, k, attempt])
            off = self.algorithm.mating.do(self.algorithm.problem, self.archive, 1,
                                           algorithm=self.algorithm, random_state=rng)
            if len(off):
                params = self.space.decode(off.get("X")[0])
                key = param_key(params)
                if key not in self.journal and key not in self.running:
                    return params
        return None

    def _front(self) -> list[Evaluation]:
        """The archive's non-dominated members (what ``algorithm.opt`` is in the other mode)."""
        if not len(self.archive):
            return []
        return [self.journal[k] for k in filter_optimum(self.archive).get("key")]

    def _publish(self) -> None:
        if self.on_generation is not None and self.history:
            self.on_generation(Progress(self._front(), list(self.journal.values()),
                                        list(self.history)))
