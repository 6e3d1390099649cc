"""What a simulation leaves behind: per-job records and cluster totals."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.inputs.workload import Workload

__all__ = ["SimulationResult"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


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
        slowdown: each job's ``(t_colocated - t_alone) / t_alone`` over its running time
            (0 for jobs that never shared a GPU).
        gpus_used: devices that ever hosted a job (OJPP's bins); on the fluid engine, whose
            shares are fractional, the peak of allocated GPUs rounded up.
        util_gpu_s: integral over time of the busy GPUs' utilization (co-located jobs'
            utilizations summed, capped at 1 per GPU); NaN without utilization data.
        decisions: the policy's decisions (the fluid engine decides after every event).
        skipped_rounds: round boundaries jumped over because the policy would have decided
            the same there (round engine).
        dropped: jobs the policy gave up on (Gavel's, after 5 failed tasks in a row); the
            per-job metrics leave them out, as Gavel's averages do. ``None``: no job.
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
    slowdown: FloatArray
    gpus_used: float
    util_gpu_s: float
    decisions: int = 0
    skipped_rounds: int = 0
    dropped: BoolArray | None = None

    def __post_init__(self) -> None:
        if self.dropped is None:
            object.__setattr__(self, "dropped", np.zeros(len(self.workload), dtype=bool))

    @property
    def kept(self) -> BoolArray:
        """Jobs not dropped: those the per-job metrics count."""
        return ~np.asarray(self.dropped, dtype=bool)

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
        """One row per job: ids, times, predictions, fairness inputs, and whether the
        policy dropped the job (its times are then what it ran, outside the averages)."""
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
            "slowdown": self.slowdown,
            "dropped": ~self.kept,
        })
