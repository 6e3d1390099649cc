"""Run one simulation and keep its per-job records.

Two engines keep one contract, ``run(workload, profile, policy, *, predict, seed) ->
SimulationResult``: kernel policies (:class:`~simulator.view.Scheduler`) run on the compiled
fluid engine (:func:`simulator.fluid.engine.run`), round policies
(:class:`~simulator.rounds.RoundScheduler`) on the round engine
(:func:`simulator.rounds.driver.run`).
"""

from __future__ import annotations

from simulator.fluid import engine
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.workload import Workload
from simulator.result import SimulationResult
from simulator.rounds import RoundScheduler
from simulator.rounds import driver as round_driver
from simulator.view import Scheduler

__all__ = ["SimulationResult", "simulate"]


def simulate(
    workload: Workload,
    profile: ClusterProfile,
    policy: Scheduler | RoundScheduler,
    *,
    predict: bool = False,
    seed: int | None = None,
) -> SimulationResult:
    """Replay ``workload`` on ``profile`` under ``policy``, on the policy's engine.

    Args:
        workload: the jobs (every job must fit the cluster).
        profile: the cluster; its size and restart overhead apply.
        policy: the scheduler.
        predict: make a JCT prediction at each arrival by playout (SPEC §2).
        seed: seeds the run's random draws (memory surges of jobs sharing GPUs); default:
            from the workload's digest, so every policy faces the same draws.

    Raises:
        InvalidWorkload: a job asks for more GPUs than the cluster has.
    """
    workload.check_fits(profile.total_gpus, profile.name)
    if isinstance(policy, RoundScheduler):
        return round_driver.run(workload, profile, policy, predict=predict, seed=seed)
    return engine.run(workload, profile, policy, predict=predict, seed=seed)
