"""The preference API (PCS §3.2): ``SetPreference``, ``GetParetoFront``, ``SetConfig``.

A :class:`PolicySearch` holds a workload, a cluster profile and a policy family; the operator
names objectives, runs the search, and picks a configuration from the front. Searches run on
a training sample and the front is re-evaluated on a held-out test sample (PCS §5.1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paretosearch.evaluation import SearchSpace, Task
from paretosearch.objectives import Objective, parse_objectives
from paretosearch.runners import DaskRunner, Runner, SerialRunner
from paretosearch.search import Progress, run_spea2
from paretosearch.store import RunStore, front_entry
from policies import get_policy
from simulator import ClusterProfile, Workload, generate, load_profile, read_trace
from simulator.errors import ParetoSearchError

__all__ = ["PolicySearch", "SearchSettings", "split_workload"]


@dataclass(frozen=True)
class SearchSettings:
    """How hard to search (PCS's settings by default: 370 evaluations, 70 / 105)."""

    budget: int = 370
    pop_size: int = 70
    n_offsprings: int = 105
    seed: int = 0


def split_workload(workload: Workload) -> tuple[Workload, Workload]:
    """Train on the first half of a trace, test on the second (arrivals re-based to 0)."""
    half = len(workload) // 2
    if half < 2:
        raise ParetoSearchError(f"{workload.source}: {len(workload)} jobs are too few to split "
                                "into a training and a test sample")
    frame = workload.to_frame()
    test = frame.iloc[half:].copy()
    test["arrival_s"] -= test["arrival_s"].iloc[0]
    source = workload.source
    return (Workload.from_frame(frame.iloc[:half], scaling=workload.scaling,
                                source=f"{source}[train]"),
            Workload.from_frame(test, scaling=workload.scaling, source=f"{source}[test]"))


class PolicySearch:
    """Search a policy family's settings for the operator's objectives.

    Args:
        workload: a :class:`Workload`, a trace path, or None for the built-in generator
            (two independent draws: one to train on, one to test).
        profile: cluster profile name, path or object.
        policy: policy family name (``"wfq"``).
        fixed: parameters held fixed (not searched).
        settings: budget, population sizes and seed.
        run_dir: where to publish the run (None: nothing written).
        client: a Dask client to evaluate on (None: serial in this process).
        jobs: jobs per generated sample.
    """

    def __init__(self, workload: Workload | str | Path | None = None, *,
                 profile: str | ClusterProfile = "pcs-64", policy: str = "wfq",
                 fixed: Mapping[str, Any] | None = None,
                 settings: SearchSettings | None = None, run_dir: str | Path | None = None,
                 client: Any = None, jobs: int = 1000) -> None:
        self.profile = profile if isinstance(profile, ClusterProfile) else load_profile(profile)
        self.settings = settings or SearchSettings()
        gpus = self.profile.total_gpus
        if workload is None:
            seeds = np.random.SeedSequence(self.settings.seed).spawn(2)
            self.train = generate(jobs, load=0.9, gpus=gpus, seed=seeds[0])
            self.test = generate(jobs, load=0.9, gpus=gpus, seed=seeds[1])
        else:
            wl = workload if isinstance(workload, Workload) else read_trace(workload)
            self.train, self.test = split_workload(wl)
        self.task = Task(policy, self.profile, dict(fixed or {}))
        self.space = SearchSpace.of(policy, self.task.fixed)
        get_policy(policy).from_params(self.task.fixed)  # bad fixed values fail here, not later
        self.store = RunStore(run_dir) if run_dir is not None else None
        self.client = client
        self.objectives: tuple[Objective, ...] = ()
        self.front: list[dict[str, Any]] = []
        self.chosen: dict[str, Any] | None = None

    def SetPreference(self, *objectives: object) -> None:
        """Name the objectives, e.g. ``SetPreference(("jct", "avg"), "pred_err:p99")``."""
        self.objectives = parse_objectives(objectives)

    set_preference = SetPreference

    def _runner(self, workload: Workload) -> Runner:
        if self.client is None:
            return SerialRunner([workload], self.train)
        return DaskRunner(self.client, [workload], self.train)

    def run(self, on_generation: Callable[[Progress], None] | None = None) -> list[dict[str, Any]]:
        """Search, re-evaluate the front on the test sample, publish; returns the front."""
        if not self.objectives:
            raise ParetoSearchError("no objectives yet: call SetPreference(...) first")
        spec = {"policy": self.task.policy, "profile": self.profile.name,
                "fixed": dict(self.task.fixed), "objectives": [o.label for o in self.objectives],
                "settings": vars(self.settings), "train": self.train.source,
                "test": self.test.source, "workload_digest": self.train.digest()}
        if self.store:
            self.store.write_spec(spec)

        history: list[tuple[int, float]] = []

        def publish(p: Progress) -> None:
            history.append((p.evaluations, p.hypervolume))
            if self.store:
                self.store.write_progress(p.evaluated,
                                          [front_entry(c, self.objectives) for c in p.front],
                                          history)
            if on_generation is not None:
                on_generation(p)

        s = self.settings
        out = run_spea2(self.task, self.space, self.objectives, self._runner(self.train),
                        budget=s.budget, pop_size=s.pop_size, n_offsprings=s.n_offsprings,
                        seed=s.seed, on_generation=publish)
        # SPEA2's archive may hold several settings with equal objective values: keep one
        unique = list({tuple(c.values(self.objectives)): c for c in reversed(out.front)}
                      .values())[::-1]
        tests = self._runner(self.test).map(self.task, [c.params for c in unique])
        self.front = [front_entry(c, self.objectives, t) for c, t in zip(unique, tests,
                                                                         strict=True)]
        self.front.sort(key=lambda e: [e["objectives"][o.label] for o in self.objectives])
        if self.store:
            self.store.write_progress(out.evaluations, self.front, out.hypervolume)
        return self.front

    def GetParetoFront(self) -> list[dict[str, Any]]:
        """The front: parameters, objective values, all metrics, test-sample metrics."""
        if not self.front:
            raise ParetoSearchError("no front yet: call run() after SetPreference(...)")
        return self.front

    get_pareto_front = GetParetoFront

    def SetConfig(self, choice: int | Mapping[str, Any]) -> dict[str, Any]:
        """Record the operator's choice (a front index or entry) in the run."""
        front = self.GetParetoFront()
        if isinstance(choice, int):
            if not -len(front) <= choice < len(front):
                raise ParetoSearchError(f"front index {choice} is out of range: the front has "
                                        f"{len(front)} configurations (0..{len(front) - 1})")
            entry = front[choice]
        else:
            entry = dict(choice)
        self.chosen = {"policy": self.task.policy, "params": {**self.task.fixed,
                                                              **entry["params"]},
                       "objectives": entry.get("objectives")}
        if self.store:
            self.store.write_choice(self.chosen)
        return self.chosen

    select = SetConfig
