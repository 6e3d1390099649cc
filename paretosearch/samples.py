"""The workloads a search trains and tests on, built one way for every caller: ``simulate``,
:class:`~paretosearch.service.api.PolicySearch` and the nightly retune. The same seed gives
the same workload: ``simulate --seed S`` replays the first training sample of
``search --seed S`` (same jobs, load, mix and sharing)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from paretosearch.config import GENERATED_REPLICATES, SearchConfig
from simulator import ClusterProfile, Workload, generate
from simulator.errors import ParetoSearchError
from simulator.inputs.generate import add_sharing, add_slos

__all__ = ["generated", "marked", "samples", "split_workload"]

SLO_STREAM, SHARING_STREAM = 1, 2
"""Where the deadlines and the sharing requirements draw from, apart from the jobs."""


def generated(jobs: int, load: float, gpus: int, seed: int, index: int = 0) -> Workload:
    """Sample ``index`` of the built-in generator for ``seed`` (independent draws: common
    random numbers across the candidates of a search)."""
    return generate(jobs, load=load, gpus=gpus,
                    seed=np.random.SeedSequence(seed, spawn_key=(index,)))


def marked(workload: Workload, profile: ClusterProfile, *, slo_mix: str | None,
           sharing: bool, seed: int, index: int = 0) -> Workload:
    """Sample ``index`` with deadlines and rewards of ``slo_mix`` (if any) and, with
    ``sharing``, SYNTHETIC GPU-sharing requirements where it has none of its own."""
    if slo_mix is not None:
        workload = add_slos(workload, slo_mix, seed=np.random.SeedSequence(
            [seed, SLO_STREAM], spawn_key=(index,)))
    if sharing and workload.sharing is None:
        memory = min(g.gpu_memory_gib for g in profile.node_groups)
        workload = add_sharing(workload, device_memory_gib=memory, seed=np.random.SeedSequence(
            [seed, SHARING_STREAM], spawn_key=(index,)))
    return workload


def samples(config: SearchConfig, workload: Workload | None
            ) -> tuple[list[Workload], list[Workload]]:
    """The training and test samples of a search: ``replicates`` generated draws each where
    ``workload`` is None, else the first and second half of ``workload``; marked as the
    config asks (:func:`marked`)."""
    replicates = config.replicates or (GENERATED_REPLICATES if workload is None else 1)
    seed = config.settings.seed
    if workload is None:
        drawn = [generated(config.jobs, config.load, config.cluster.total_gpus, seed, i)
                 for i in range(2 * replicates)]
    elif replicates != 1:
        raise ParetoSearchError("replicates need a generated workload; a trace is one sample "
                                "(it is split into train and test halves)")
    else:
        drawn = list(split_workload(workload))
    drawn = [marked(w, config.cluster, slo_mix=config.slo_mix, sharing=config.sharing,
                    seed=seed, index=i) for i, w in enumerate(drawn)]
    return drawn[:replicates], drawn[replicates:]


def split_workload(workload: Workload) -> tuple[Workload, Workload]:
    """Train on the first half of a trace, test on the second (arrivals re-based to 0)."""
    half = len(workload) // 2
    if half < 2:
        raise ParetoSearchError(f"{workload.source}: {len(workload)} jobs are too few to split "
                                "into a training and a test sample")
    frame = workload.to_frame()
    test = frame.iloc[half:].copy()
    test["arrival_s"] -= test["arrival_s"].iloc[0]
    return (replace(Workload.from_frame(frame.iloc[:half], scaling=workload.scaling,
                                        source=f"{workload.source}[train]"),
                    type_speed=workload.type_speed, interference=workload.interference),
            replace(Workload.from_frame(test, scaling=workload.scaling,
                                        source=f"{workload.source}[test]"),
                    type_speed=workload.type_speed, interference=workload.interference))
