"""Run one simulation and keep its per-job records.

Kernel policies (:class:`~simulator.view.Scheduler`) run on the compiled fluid engine; round
policies (:class:`~simulator.rounds.RoundScheduler`) on the round engine.
"""

from __future__ import annotations

import time

import numpy as np

from simulator.engine import no_queue, run_engine
from simulator.profile import ClusterProfile
from simulator.result import SimulationResult
from simulator.round_driver import run_rounds
from simulator.rounds import RoundScheduler
from simulator.view import Scheduler
from simulator.workload import Workload

__all__ = ["SimulationResult", "simulate"]

_NO_CLASSES = np.zeros(0, dtype=np.int64)


def simulate(
    workload: Workload,
    profile: ClusterProfile,
    policy: Scheduler | RoundScheduler,
    *,
    predict: bool = False,
    seed: int | None = None,
) -> SimulationResult:
    """Replay ``workload`` on ``profile`` under ``policy``.

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
        return run_rounds(workload, profile, policy, seed=seed if seed is not None
                          else int(workload.digest()[:8], 16), predict=predict)
    cpu0 = time.process_time()
    n = len(workload)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    pred_start, pred_finish = np.full(n, np.nan), np.full(n, np.nan)
    seen_sum, seen_cnt = np.zeros(n), np.zeros(n)
    preemptions = np.zeros(n, dtype=np.int64)
    params, aux = policy.kernel_args(workload.scaling)
    queues = policy.queue_classes(workload) if policy.queue_kernel is not None else None
    classes, n_classes = queues if queues is not None else (_NO_CLASSES, 0)
    classes = np.array(classes, dtype=np.int64)
    classes.flags.writeable = False
    events, playout_events, busy_s, series_t, series_busy = run_engine(
        policy.kernel, policy.queue_kernel if queues is not None else no_queue, params, aux,
        classes, n_classes, float(profile.total_gpus), float(policy.tick_s or 0.0),
        float(profile.restart_overhead_s), workload.scaling.speedup, workload.arrival_s,
        workload.service_s, workload.estimated_service_s, workload.gpus, workload.model,
        predict, start, finish, pred_start, pred_finish, seen_sum, seen_cnt, preemptions)
    return SimulationResult(
        workload=workload,
        total_gpus=profile.total_gpus,
        start_s=start,
        finish_s=finish,
        pred_start_s=pred_start,
        pred_finish_s=pred_finish,
        seen_avg=seen_sum / seen_cnt,
        preemptions=preemptions,
        busy_gpu_s=busy_s,
        series_t=series_t,
        series_busy=series_busy,
        events=events,
        playout_events=playout_events,
        cpu_s=time.process_time() - cpu0,
        slowdown=np.zeros(n),
        gpus_used=float(np.ceil(series_busy.max(initial=0.0) - 1e-9)),
        util_gpu_s=float("nan"),
    )
