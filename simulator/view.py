"""What a policy sees: a read-only view of the active jobs, and the contract it implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from simulator.inputs.scaling import ScalingTable
from simulator.inputs.workload import Workload

__all__ = ["ClusterView", "Scheduler"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The active (arrived, unfinished) jobs at one decision, in arrival order.

    Every array has one entry per active job and is read-only. ``alloc`` is the allocation in
    force before this decision. Sizes are the scheduler's *estimates*, never the true work.

    Attributes:
        now: simulated time in seconds.
        total_gpus: GPUs in the cluster.
        job: workload row of each job (stable across decisions; ties in arrival broken by it).
        arrival_s: arrival time.
        demand: maximum useful GPUs.
        est_size: estimated total work (1-GPU-seconds) the job was submitted with.
        est_remaining: estimated work left.
        attained: work done so far (1-GPU-seconds).
        alloc: GPUs held until now (fractional for fluid policies).
        model: row of ``scaling`` giving the job's speed-up curve.
        scaling: the speed-up table.
    """

    now: float
    total_gpus: int
    job: IntArray
    arrival_s: FloatArray
    demand: IntArray
    est_size: FloatArray
    est_remaining: FloatArray
    attained: FloatArray
    alloc: FloatArray
    model: IntArray
    scaling: ScalingTable

    def __len__(self) -> int:
        return int(self.job.shape[0])

    def speed(self, gpus: FloatArray) -> FloatArray:
        """Each job's speed-up at the given per-job GPU counts."""
        return self.scaling.speed(self.model, gpus)


class Scheduler(Protocol):
    """The contract between the simulator and a policy.

    ``kernel`` is a numba-compiled function (signature in :mod:`simulator.fluid.engine`) called
    after every arrival, completion and tick; it writes the GPUs (possibly fractional) of
    each active job into ``out``, with ``0 <= out <= demand`` and ``out.sum() <= gpus``, and
    must depend on its inputs only. ``kernel_args`` gives the policy's parameters as arrays.
    ``tick_s``, if not ``None``, asks for an extra decision that many seconds after the last
    event (a lease or round timer). ``history`` says what the kernel's ``attained`` argument
    carries: ``"attained"``, the work done so far, or ``"seen"``, the mean number of active
    jobs the job has seen over the events since its arrival, itself included (PCS's
    "observed contention", for finish-time fairness), or ``"rank"``, a row the kernel writes
    for itself and gets back at its next decision (0 for a job new to it; a view starts every
    job at 0). ``pcs_clock`` keeps the fluid engine's time on PCS's microsecond grid (as
    ``datetime`` rounds): every arrival and completion time rounded to it, the work between
    two events ``speed x whole microseconds / 1e6``; the kernel's ``now`` and ``arrival`` are
    then in microseconds. ``playout`` says how a JCT-prediction playout starts (``PLAYOUTS``
    in :mod:`simulator.fluid.engine`). A policy that serves fixed classes in arrival order may
    also give ``queue_kernel`` and ``queue_classes``: the same decisions from per-class
    queues, so that a decision costs the jobs served rather than the whole queue (None: full
    kernel).
    """

    @property
    def tick_s(self) -> float | None: ...

    @property
    def history(self) -> str: ...

    @property
    def pcs_clock(self) -> bool: ...

    @property
    def playout(self) -> str: ...

    @property
    def kernel(self) -> Any: ...

    def kernel_args(self, scaling: ScalingTable) -> tuple[FloatArray, FloatArray]: ...

    @property
    def queue_kernel(self) -> Any: ...

    def queue_classes(self, workload: Workload) -> tuple[IntArray, int] | None: ...
