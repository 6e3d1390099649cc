"""The run-time model of shared GPUs: devices, placements, slowdowns, memory and collisions.

A policy that shares GPUs places each job's workers on devices: a ``(jobs, devices)`` 0/1
array, at most one worker of a job per device. :class:`SharingModel` checks such a placement
against device memory (OJPP eq. 3: ``sum gamma + max delta <= capacity``) and computes each
job's slowdown under it (the model in :mod:`simulator.inputs.colocation`). Policies use the same
object to predict interference before placing, so what they bound is what the run suffers,
apart from the random memory collisions drawn by the run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulator.errors import InvalidWorkload
from simulator.inputs.colocation import JobSharing, SlowdownCurve
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.workload import Workload

__all__ = ["SharingModel", "can_share"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class SharingModel:
    """What one run knows about sharing. Per-job arrays are indexed by workload row.

    Attributes:
        jobs: each job's worker requirements.
        model: each job's model (row of ``matrix``).
        device_node, device_type: ``(devices,)`` node and GPU-type index of each device.
        device_mem_gib: ``(devices,)`` memory of each device.
        matrix: ``(models, models, types)`` pairwise slowdown, or None (use ``curves``).
        curves: per GPU type, the utilization-slowdown curve (None: not fitted).
        collision_slowdown: extra slowdown of every worker on a device where two or more
            workers surge at once.
    """

    jobs: JobSharing
    model: IntArray
    device_node: IntArray
    device_type: IntArray
    device_mem_gib: FloatArray
    matrix: FloatArray | None
    curves: tuple[SlowdownCurve | None, ...]
    collision_slowdown: float

    @property
    def devices(self) -> int:
        """Number of devices."""
        return int(self.device_node.shape[0])

    @property
    def shareable(self) -> BoolArray:
        """Devices on which a slowdown model exists, so jobs may share them."""
        if self.matrix is not None:
            return np.ones(self.devices, dtype=bool)
        ok = np.array([c is not None for c in self.curves], dtype=bool)
        out: BoolArray = ok[self.device_type]
        return out

    def worker_slowdowns(self, rows: IntArray, placed: BoolArray) -> FloatArray:
        """``(jobs, devices)``: each placed worker's slowdown, collisions left out (0 elsewhere).

        Args:
            rows: workload rows of the jobs (rows of ``placed``).
            placed: ``(jobs, devices)`` boolean placement.
        """
        out = np.zeros(placed.shape)
        shared = np.flatnonzero(placed.sum(axis=0) >= 2)
        if not shared.size:
            return out
        p = placed[:, shared]
        on = np.flatnonzero(p.any(axis=1))
        p, r = p[on], rows[on]
        types = self.device_type[shared]
        w = np.zeros(p.shape)
        for t in np.unique(types):
            cols = types == t
            if self.matrix is not None:
                m = self.model[r]
                pair = self.matrix[:, :, t][np.ix_(m, m)]
                np.fill_diagonal(pair, 0.0)
                w[:, cols] = pair @ p[:, cols].astype(np.float64)
            else:
                curve = self.curves[int(t)]
                if curve is None:
                    raise InvalidWorkload(f"no slowdown model for sharing GPU type index {t}: "
                                          f"give the profile a slowdown_fit for it")
                u = self.jobs.gpu_util[r] @ p[:, cols]
                w[:, cols] = curve(u)[None, :]
        out[np.ix_(on, shared)] = w * p
        return out

    def memory_excess(self, rows: IntArray, placed: BoolArray) -> FloatArray:
        """GiB by which ``sum gamma + max delta`` exceeds each device (``<= 0``: fits)."""
        base = self.jobs.mem_gib[rows] @ placed
        surge = np.where(placed, self.jobs.surge_gib[rows][:, None], 0.0).max(axis=0, initial=0.0)
        excess: FloatArray = base + surge - self.device_mem_gib
        return excess


def can_share(workload: Workload, profile: ClusterProfile) -> bool:
    """Whether jobs of ``workload`` may share GPUs of ``profile``: the jobs carry sharing data
    and a slowdown model exists (the workload's interference matrix, or a fitted curve for at
    least one of the profile's GPU types)."""
    return workload.sharing is not None and (workload.interference is not None
                                             or bool(profile.slowdown_curves))

