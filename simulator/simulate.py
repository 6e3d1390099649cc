"""Run one simulation and keep its per-job records."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.engine import run_engine
from simulator.profile import ClusterProfile
from simulator.view import Scheduler
from simulator.workload import Workload

__all__ = ["SimulationResult", "simulate"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Per-job records (indexed like the workload's rows) and cluster totals.

    Attributes:
        workload: the jobs simulated.
        total_gpus: cluster size.
        start_s: first time each job held GPUs.
        finish_s: completion time.
        pred_start_s, pred_finish_s: the prediction made at the job's arrival (NaN without
            prediction).
        seen_avg: mean number of active jobs (itself included) over the events of the job's
            life: PCS's ``num_apps_seen_diff``, the ``n_avg`` of the fair finish time.
        preemptions: allocation changes after the job first started.
        busy_gpu_s: integral of allocated GPUs over time.
        series_t, series_busy: allocated GPUs from each event time on.
        events, playout_events: events processed by the run and by its prediction playouts.
        cpu_s: CPU seconds the run took.
    """

    workload: Workload
    total_gpus: int
    start_s: FloatArray
    finish_s: FloatArray
    pred_start_s: FloatArray
    pred_finish_s: FloatArray
    seen_avg: FloatArray
    preemptions: IntArray
    busy_gpu_s: float
    series_t: FloatArray
    series_busy: FloatArray
    events: int
    playout_events: int
    cpu_s: float

    @property
    def jct_s(self) -> FloatArray:
        """Job completion times."""
        return self.finish_s - self.workload.arrival_s

    @property
    def jct_pred_s(self) -> FloatArray:
        """Predicted job completion times (NaN where no prediction was made)."""
        return self.pred_finish_s - self.workload.arrival_s

    @property
    def fft_s(self) -> FloatArray:
        """PCS's fair finish time: ``service / min(C / n_avg, demand)``."""
        return self.workload.service_s / np.minimum(self.total_gpus / self.seen_avg,
                                                    self.workload.gpus)

    def records(self) -> pd.DataFrame:
        """One row per job: ids, times, predictions and fairness inputs."""
        wl = self.workload
        return pd.DataFrame({
            "job_id": wl.job_id,
            "arrival_s": wl.arrival_s,
            "start_s": self.start_s,
            "finish_s": self.finish_s,
            "jct_s": self.jct_s,
            "jct_pred_s": self.jct_pred_s,
            "pred_start_s": self.pred_start_s,
            "pred_finish_s": self.pred_finish_s,
            "wait_s": self.start_s - wl.arrival_s,
            "service_s": wl.service_s,
            "gpus": wl.gpus,
            "model": np.asarray(wl.scaling.models, dtype=object)[wl.model],
            "seen_avg": self.seen_avg,
            "fft_s": self.fft_s,
            "preemptions": self.preemptions,
        })


def simulate(
    workload: Workload,
    profile: ClusterProfile,
    policy: Scheduler,
    *,
    predict: bool = False,
) -> SimulationResult:
    """Replay ``workload`` on ``profile`` under ``policy``.

    Args:
        workload: the jobs (every job must fit the cluster).
        profile: the cluster; its size and restart overhead apply.
        policy: the scheduler.
        predict: make a JCT prediction at each arrival by playout (SPEC §2).

    Raises:
        InvalidWorkload: a job asks for more GPUs than the cluster has.
    """
    workload.check_fits(profile.total_gpus, profile.name)
    cpu0 = time.process_time()
    n = len(workload)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    pred_start, pred_finish = np.full(n, np.nan), np.full(n, np.nan)
    seen_sum, seen_cnt = np.zeros(n), np.zeros(n)
    preemptions = np.zeros(n, dtype=np.int64)
    params, aux = policy.kernel_args(workload.scaling)
    events, playout_events, busy_s, series_t, series_busy = run_engine(
        policy.kernel, params, aux, float(profile.total_gpus), float(policy.tick_s or 0.0),
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
    )
