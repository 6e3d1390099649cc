"""Mirror every evaluation into an Optuna study (SQLite), for ``optuna-dashboard`` and CLI."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paretosearch.evaluation import SearchSpace
from paretosearch.objectives import Objective
from paretosearch.store import Evaluation

__all__ = ["mirror"]


def mirror(db: Path, study_name: str, objectives: Sequence[Objective], space: SearchSpace,
           evaluations: Sequence[Evaluation], about: Mapping[str, Any]) -> int:
    """Add the evaluations the study does not hold yet (in order); return the trial count.
    ``about``: what was searched (policy, profile, samples), the study's user attributes.

    ``optuna best-trials --storage sqlite:///DB --study-name NAME`` then lists the front, and
    ``optuna-dashboard sqlite:///DB`` shows the objectives by name, the parameters, the
    Pareto front and what the study is.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    try:
        return _add(optuna.create_study(
            storage=storage, study_name=study_name, load_if_exists=True,
            directions=["maximize" if o.maximize else "minimize" for o in objectives]),
            objectives, space, evaluations, about)
    finally:
        storage.engine.dispose()  # no file left open (a long-lived process mirrors often)


def _add(study: Any, objectives: Sequence[Objective], space: SearchSpace,
         evaluations: Sequence[Evaluation], about: Mapping[str, Any]) -> int:
    import optuna
    from optuna.distributions import (
        BaseDistribution,
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    with warnings.catch_warnings():  # metric names are "experimental" in Optuna, and stable
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.label for o in objectives])
    dists: dict[str, BaseDistribution] = {}
    for n, d in zip(space.names, space.domains, strict=True):
        if d.kind == "choice":
            dists[n] = CategoricalDistribution(d.choices)
        elif d.kind == "int":
            dists[n] = IntDistribution(int(d.low), int(d.high), log=d.log)
        else:
            dists[n] = FloatDistribution(d.low, d.high, log=d.log)
    done = len(study.get_trials(deepcopy=False))
    if done == 0:
        for key, value in about.items():
            study.set_user_attr(key, value)
    trials = []
    for params, record in evaluations[done:]:
        values = [record[o.label] for o in objectives]
        ok = all(math.isfinite(v) for v in values)
        trials.append(optuna.trial.create_trial(
            params={n: params[n] for n in space.names}, distributions=dists,
            values=values if ok else None,
            state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
            user_attrs={k: v for k, v in record.items() if math.isfinite(v)}))
    study.add_trials(trials)
    return done + len(trials)
