"""The preference API (PCS §3.2): ``SetPreference``, ``GetParetoFront``, ``SetConfig``.

A :class:`PolicySearch` holds a workload, a cluster profile and a policy family; the operator
names objectives, runs the search, and picks a configuration from the front. The search runs
on a training sample and the front is re-evaluated on a held-out test sample (PCS §5.1);
with a generated workload, ``replicates`` independent draws are averaged (common random
numbers: every candidate faces the same draws), three by default, and the test sample is as
many other draws.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paretosearch.config import SearchConfig
from paretosearch.definition import SearchDefinition
from paretosearch.io import regular_file
from paretosearch.objectives import Objective, parse_objectives
from paretosearch.runs import select as choose
from paretosearch.runs.records import (
    BaselineWarning,
    ChosenConfig,
    FrontEntry,
    front_warnings,
    mark_dominated,
)
from paretosearch.runs.store import RunStore
from paretosearch.samples import samples, split_workload
from paretosearch.search.cache import CachedRunner, EvaluationCache
from paretosearch.search.cluster import connect
from paretosearch.search.evaluation import SearchSpace, Task
from paretosearch.search.runners import DaskRunner, Runner, SerialRunner, interrupts_kept
from paretosearch.search.spea2 import Progress, SearchSettings, run_spea2
from policies import make_policy
from simulator import ClusterProfile, Workload, read_trace
from simulator.errors import ParetoSearchError
from simulator.rounds.sharing import can_share

if TYPE_CHECKING:  # imported when needed: both take a while to import
    import pandas as pd

    from paretosearch.runs.optuna_copy import OptunaCopy

__all__ = ["BASELINES", "PolicySearch", "SearchConfig", "SearchSettings", "baselines_for",
           "split_workload"]

BASELINES = ("fifo", "srsf", "themis", "afs", "maxmin")
"""Policies evaluated beside every search as reference points (PCS Fig. 3 and 5b)."""
SLO_BASELINES = ("llf", "hydra")
"""Added when the workload has SLO jobs (UniSched §IV-A's comparison)."""
HETERO_BASELINES = ("gavel", "yarn-cs", "tiresias")
"""Added on clusters with several GPU types: Hadar §V's comparison (Gavel, YARN-CS, Tiresias)."""
SHARING_BASELINES = ("fifo-exclusive", "obp", "horus", "ojpp")
"""Added when the jobs may share GPUs (Horus §5.2, OJPP §5.2)."""


def baselines_for(workload: Workload, profile: ClusterProfile) -> tuple[str, ...]:
    """The reference policies that fit a workload and cluster."""
    names = BASELINES + (SLO_BASELINES if workload.slos is not None else ())
    names += SHARING_BASELINES if can_share(workload, profile) else ()
    return names + (HETERO_BASELINES if len(profile.gpus_by_type) > 1 else ())


def resolved(config: SearchConfig, workload: Workload | None
             ) -> tuple[list[Workload], list[Workload], SearchSpace]:
    """A search's training and test samples (:func:`paretosearch.samples.samples`) and the
    space it searches on them (:meth:`SearchSpace.of`); bad input fails here."""
    train, test = samples(config, workload)
    return train, test, SearchSpace.of(config.policy, config.fixed, workload=train,
                                       profile=config.cluster)


class PolicySearch:
    """Search a policy family's settings for the operator's objectives.

    Args:
        workload: a :class:`Workload` or trace path (first half trains, second half tests),
            or None for the built-in generator (independent draws for training and test).
        config: what to search (:class:`SearchConfig`: policy family, fixed parameters,
            profile, objectives, budget, generated samples). Parameters the policy cannot use
            on the training workload and profile (:meth:`policies.Policy.inapplicable`) are
            not searched either; they keep their defaults and are listed, with the reason, as
            ``dropped`` in ``run.json`` and ``front.json``.
        store: where the run lives (journal, front): a folder or its :class:`RunStore`;
            None: nothing written.
        client: a Dask client, or a scheduler address (``"tcp://host:8786"``), to evaluate
            on; None: an embedded ``LocalCluster`` with ``workers`` processes, or serial
            evaluation in this process if ``workers`` is 0.
        workers: size of the embedded cluster.
        cache: an evaluation cache (:class:`paretosearch.search.cache.EvaluationCache`) shared
            with other runs: evaluations found there are not run again.
    """

    def __init__(self, workload: Workload | str | Path | None = None,
                 config: SearchConfig | None = None, *,
                 store: RunStore | str | Path | None = None, client: Any = None,
                 workers: int = 0, cache: EvaluationCache | None = None) -> None:
        self.config = config = config or SearchConfig()
        self.profile, self.settings = config.cluster, config.settings
        wl = workload if workload is None or isinstance(workload, Workload) else read_trace(
            regular_file(workload))
        self.train, self.test, self.space = resolved(config, wl)
        self.task = Task(config.policy, self.profile, dict(config.fixed))
        self.store = store if isinstance(store, RunStore) or store is None else RunStore(store)
        self.client, self.workers, self.cache = client, workers, cache
        self._open: tuple[Runner, Runner] | None = None
        self._stack = contextlib.ExitStack()
        self.objectives: tuple[Objective, ...] = ()
        self.SetPreference(*config.objectives)
        self.front: list[FrontEntry] = []
        self.baselines: dict[str, dict[str, float]] = {}
        """Each baseline policy's record on the training sample; ``baselines_test``: on the
        test sample (``front.json``'s ``baselines`` and ``baselines_test``)."""
        self.baselines_test: dict[str, dict[str, float]] = {}
        self.chosen: ChosenConfig | None = None

    # --- PCS's interface ------------------------------------------------------------------

    def SetPreference(self, *objectives: object) -> None:
        """Name the objectives, e.g. ``SetPreference(("jct", "avg"), "pred_err:p99")``
        (in place of the config's).

        Evaluations predict JCTs (by playout, several times the simulation's cost) only when
        an objective needs the predictions; otherwise ``pred_err`` is not recorded.
        """
        self.config = self.config.with_objectives(*objectives)
        self.objectives = parse_objectives(self.config.objectives)
        self.task = replace(self.task, predict=any(o.predicted for o in self.objectives))

    def GetParetoFront(self) -> list[FrontEntry]:
        """The front: parameters, objective values, all metrics, test-sample metrics."""
        if not self.front:
            raise ParetoSearchError("no front yet: call run() after SetPreference(...)")
        return self.front

    def SetConfig(self, choice: int | FrontEntry | Mapping[str, Any]) -> ChosenConfig:
        """Record the operator's choice in the run: a front index, a front entry, or the
        policy's parameters (e.g. ``{"W": 2.0}``; the rest as fixed or at their defaults),
        which are simulated on both samples first so the choice carries its metrics."""
        index = None
        if isinstance(choice, int):
            front = self.GetParetoFront()
            index = choose.by_index(front, choice)
            entry = front[index]
        elif isinstance(choice, FrontEntry):
            entry = choice
        else:
            params = dict(choice)
            train, test = self.evaluate(self.task.policy, {**self.task.fixed, **params})
            entry = FrontEntry.of(params, train, self.objectives, test, self.fitted(params))
        self.chosen = ChosenConfig.of(
            self.definition(), entry, front_index=index,
            run=str(self.store.path.resolve()) if self.store and index is not None else None)
        if self.store:
            self.store.write_choice(self.chosen)
        return self.chosen

    def front_dataframe(self) -> pd.DataFrame:
        """The front as one flat table, a row per configuration (as Optuna's
        ``trials_dataframe()``): its parameters, every metric on the training sample
        (``jct:avg``, ...) and on the test sample (``test:jct:avg``, ...), and
        ``dominated_by``: the baselines that dominate it on the test sample, comma-separated
        (empty: none)."""
        import pandas as pd

        return pd.DataFrame([{**e.params, **e.objectives, **e.metrics,
                              **{f"test:{k}": v for k, v in (e.test_metrics or {}).items()},
                              "dominated_by": ", ".join(e.dominated_by or ())}
                             for e in self.GetParetoFront()])

    set_preference = SetPreference
    get_pareto_front = GetParetoFront
    select = SetConfig

    # --- selection helpers ----------------------------------------------------------------
    # each chooses among the entries no baseline dominates on the test sample (all of them
    # where every one is dominated, or include_dominated): :func:`choose.among`

    def knee(self, *, include_dominated: bool = False) -> int:
        """Index of the knee point (closest to the ideal point, objectives scaled to [0, 1])."""
        return choose.among(self.GetParetoFront(), lambda f: choose.knee(f, self.objectives),
                            include_dominated=include_dominated)[0]

    def where(self, *constraints: str, minimize: str, include_dominated: bool = False) -> int:
        """Index of the best entry for ``minimize`` among those meeting every constraint."""
        return choose.among(self.GetParetoFront(),
                            lambda f: choose.by_constraints(f, constraints, minimize),
                            include_dominated=include_dominated)[0]

    def by_weights(self, *weights: float, include_dominated: bool = False) -> int:
        """Index of the entry nearest the given objective weights (pymoo pseudo-weights)."""
        return choose.among(self.GetParetoFront(),
                            lambda f: choose.by_weights(f, self.objectives, weights),
                            include_dominated=include_dominated)[0]

    # --- running --------------------------------------------------------------------------

    def definition(self) -> SearchDefinition:
        """What this search is, as stored in ``run.json`` (a resumed run must match it)."""
        return SearchDefinition.of(self.config, self.space.names, self.space.dropped,
                                   self.train, self.test)

    def fitted(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Every field of the policy with ``params``, fitted to the training workload."""
        policy = make_policy(self.task.policy, {**self.task.fixed, **params})
        fields: dict[str, Any] = policy.fit(self.train[0]).to_dict()["params"]
        return fields

    def run(self, on_generation: Callable[[Progress], None] | None = None, *,
            resume: bool = False,
            initial: Sequence[Mapping[str, Any]] = ()) -> list[FrontEntry]:
        """Search (or resume), re-evaluate the front on the test sample, publish the front.

        ``initial``: configurations to start from (a warm start): they open the first
        generation, random points fill the rest. Parameters the search does not vary are
        ignored, missing ones start mid-domain.
        """
        # a Ctrl-C that a finaliser swallows anywhere in the search still stops it
        with interrupts_kept(), self.store.writing() if self.store else contextlib.nullcontext():
            return self._run(on_generation, resume=resume, initial=initial)

    def _run(self, on_generation: Callable[[Progress], None] | None, *, resume: bool,
             initial: Sequence[Mapping[str, Any]]) -> list[FrontEntry]:
        self._prepare_store(resume)
        copy, about = self._optuna_copy(), self._about()
        with self.runners() as (train_runner, test_runner):
            def publish(p: Progress) -> None:
                if self.store and copy:
                    self.store.write_progress(
                        p.evaluated, [FrontEntry.of(*e, self.objectives) for e in p.front],
                        p.history, seed=self.settings.seed, dropped=dict(self.space.dropped))
                    copy.add(p.evaluated, about)
                if on_generation is not None:
                    on_generation(p)

            out = run_spea2(self.task, self.space, self.objectives, train_runner,
                            self.settings, store=self.store, on_generation=publish,
                            initial=[dict(p) for p in initial])
            unique = list({tuple(r[o.label] for o in self.objectives): (p, r)
                           for p, r in reversed(out.front)}.values())[::-1]
            tests = test_runner.map(self.task, [p for p, _ in unique])
            for name in baselines_for(self.train[0], self.profile):
                task = Task(name, self.profile, predict=self.task.predict)
                self.baselines[name] = train_runner.map(task, [{}])[0]
                self.baselines_test[name] = test_runner.map(task, [{}])[0]
        self.front = mark_dominated(sorted(
            (FrontEntry.of(p, r, self.objectives, t, self.fitted(p))
             for (p, r), t in zip(unique, tests, strict=True)),
            key=lambda e: [e.objectives[o.label] for o in self.objectives]), self.baselines_test)
        for message in front_warnings(self.front, self.baselines, self.baselines_test):
            warnings.warn(message, BaselineWarning, stacklevel=2)
        if self.store:
            self.store.write_progress(out.evaluations, self.front, out.hypervolume,
                                      seed=self.settings.seed, baselines=self.baselines,
                                      baselines_test=self.baselines_test,
                                      dropped=dict(self.space.dropped), done=True)
        if copy:
            copy.add(out.evaluations, about | _jsonable(
                {"baselines": self.baselines, "baselines_test": self.baselines_test}),
                self.front)
        return self.front

    def _prepare_store(self, resume: bool) -> None:
        if self.store is None:
            if resume:
                raise ParetoSearchError("resume needs the run directory of the interrupted run")
            return
        started = (self.store.path / "run.json").exists()
        if started and not resume:
            raise ParetoSearchError(f"{self.store.path} already holds a run: resume it "
                                    "(--resume) or choose another run directory")
        if resume:
            if not started:
                raise ParetoSearchError(f"{self.store.path}: no run to resume (no run.json)")
            if self.store.read_spec() != self.definition():
                raise ParetoSearchError(f"{self.store.path} was started with other settings; "
                                        "resume it with the same arguments it was started with")
            self.store.warn_of_pickles()
        else:
            self.store.write_spec(self.definition())

    def evaluate(self, policy: str, params: Mapping[str, Any]
                 ) -> tuple[dict[str, float], dict[str, float]]:
        """One configuration (any policy family, e.g. the one in production) simulated on
        the training and on the test sample: ``(train_record, test_record)``."""
        task = Task(policy, self.profile, dict(params), predict=self.task.predict)
        with self.runners() as (train, test):
            return train.map(task, [{}])[0], test.map(task, [{}])[0]

    def __enter__(self) -> PolicySearch:
        """Keep one set of runners (one Dask cluster) open for several calls."""
        self._open = self._stack.enter_context(self._runners())
        return self

    def __exit__(self, *exc: object) -> None:
        self._open = None
        self._stack.close()

    @contextlib.contextmanager
    def runners(self) -> Iterator[tuple[Runner, Runner]]:
        """Runners on the training and the test samples: those held open by ``with``, or
        fresh ones for this call."""
        if self._open is not None:
            yield self._open
        else:
            with self._runners() as pair:
                yield pair

    @contextlib.contextmanager
    def _runners(self) -> Iterator[tuple[Runner, Runner]]:
        """On the cluster :func:`paretosearch.search.cluster.connect` picks (serial without one);
        through the cache, if any."""
        with connect(self.client, self.workers) as client:
            pair: tuple[Runner, Runner] = (
                (SerialRunner(self.train, self.train[0]), SerialRunner(self.test, self.train[0]))
                if client is None else (DaskRunner(client, self.train, self.train[0]),
                                        DaskRunner(client, self.test, self.train[0])))
            if self.cache is not None:
                pair = (CachedRunner(pair[0], self.cache, self.train, self.train[0]),
                        CachedRunner(pair[1], self.cache, self.test, self.train[0]))
            yield pair

    def _optuna_copy(self) -> OptunaCopy | None:
        """The run's Optuna study (``optuna.log``), every evaluation a trial."""
        from paretosearch.runs.optuna_copy import OptunaCopy

        return OptunaCopy(self.store.path / "optuna.log", self.objectives,
                          self.space) if self.store else None

    def _about(self) -> dict[str, Any]:
        """What was searched, as the Optuna study's user attributes."""
        spec = self.definition().to_dict()
        return {k: spec[k] for k in ("policy", "profile", "fixed", "train", "test")}


def _jsonable(spec: dict[str, Any]) -> Any:
    """The spec as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(spec))
