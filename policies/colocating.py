"""Shared machinery of the co-locating policies: Horus (:mod:`policies.horus`) and its
baselines FIFO-exclusive, OBP and PAB (:mod:`policies.horus_baselines`).

Holds the device-load bookkeeping of a plan being built (:class:`Usage`), the greedy placement
loop (:func:`greedy`) with its device picker (:func:`pick_devices`), the sharing-columns check
(:func:`require_sharing`) and the base class :class:`Colocating`.

All four policies place workers on devices (``shares_gpus``) and decide at arrivals and
completions; all but FIFO read each job's predicted utilization and memory from the workload's
sharing columns. None moves a running job, except PAB's evictions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import EventDriven
from simulator.errors import InvalidWorkload
from simulator.rounds import RoundState
from simulator.sharing import SharingModel

__all__ = ["Chooser", "Colocating", "Usage", "greedy", "pending_jobs", "pick_devices",
           "require_sharing"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def require_sharing(state: RoundState, policy: str) -> SharingModel:
    """The run's sharing model; an error naming the missing workload columns if it has none."""
    if state.sharing is None:
        raise InvalidWorkload(
            f"policy {policy!r} places jobs by their GPU utilization and memory, but the "
            f"workload has no sharing columns (gpu_util, gpu_mem_gib, mem_surge_gib, "
            f"mem_surge_p): add them, or generate them with simulator.generate.add_sharing")
    return state.sharing


@dataclass(eq=False)
class Usage:
    """The devices' load under a plan being built (a ``(jobs, devices)`` 0/1 array).

    Without a sharing model (FIFO on a workload without sharing columns) only ``count`` is
    known and jobs never share a device.
    """

    state: RoundState
    sharing: SharingModel | None
    plan: IntArray
    mem: FloatArray  # sum of base memory (gamma) per device
    surge: FloatArray  # largest surge (delta) per device
    util: FloatArray  # cumulative utilization per device
    count: IntArray  # workers per device

    @classmethod
    def of(cls, state: RoundState, placed: BoolArray | None = None) -> Usage:
        """The load of ``placed`` (default: the current placement)."""
        plan = (state.placed if placed is None else placed).astype(np.int64)
        sh, devices = state.sharing, plan.shape[1]
        if sh is None:
            zero = np.zeros(devices)
            return cls(state, None, plan, zero, zero.copy(), zero.copy(), plan.sum(axis=0))
        jobs, on = sh.jobs.take(state.rows), plan.astype(bool)
        fit_alone = jobs.mem_gib + jobs.surge_gib <= sh.device_mem_gib.max() + 1e-10
        if not fit_alone.all():
            i = int(np.flatnonzero(~fit_alone)[0])
            raise InvalidWorkload(
                f"workload row {state.rows[i] + 1}: a worker needs "
                f"{jobs.mem_gib[i] + jobs.surge_gib[i]:g} GiB (gpu_mem_gib + mem_surge_gib), "
                f"more than any device's {sh.device_mem_gib.max():g} GiB; it could never start")
        surge = np.where(on, jobs.surge_gib[:, None], 0.0).max(axis=0, initial=0.0)
        return cls(state, sh, plan, jobs.mem_gib @ plan, surge, jobs.gpu_util @ plan,
                   plan.sum(axis=0))

    def fits(self, i: int) -> BoolArray:
        """Devices that can take a worker of job ``i``: memory (OJPP eq. 3) and, where others
        already run, a slowdown model for sharing."""
        sh = self.sharing
        if sh is None:
            out: BoolArray = self.count == 0
            return out
        r = self.state.rows[i]
        peak = self.mem + sh.jobs.mem_gib[r] + np.maximum(self.surge, sh.jobs.surge_gib[r])
        ok: BoolArray = (peak <= sh.device_mem_gib + 1e-10) & ((self.count == 0) | sh.shareable)
        return ok

    def add(self, i: int, devices: IntArray) -> None:
        """Place one worker of job ``i`` on each of ``devices``."""
        self.plan[i, devices] = 1
        self.count[devices] += 1
        if self.sharing is not None:
            r = self.state.rows[i]
            self.mem[devices] += self.sharing.jobs.mem_gib[r]
            self.util[devices] += self.sharing.jobs.gpu_util[r]
            self.surge[devices] = np.maximum(self.surge[devices], self.sharing.jobs.surge_gib[r])


Chooser = Callable[[Usage, int], IntArray | None]
"""Picks the devices for job ``i`` under the current load, or None if it does not fit now."""


def pick_devices(cost: FloatArray, need: int) -> IntArray | None:
    """The ``need`` cheapest devices with a finite cost (ties: lower number), or None."""
    cand = np.flatnonzero(np.isfinite(cost))
    if cand.size < need:
        return None
    out: IntArray = cand[np.argsort(cost[cand], kind="stable")[:need]]
    return out


def greedy(usage: Usage, order: IntArray, choose: Chooser, *, blocking: bool = False) -> IntArray:
    """Place the jobs in ``order`` one by one; one that does not fit waits (and, if
    ``blocking``, every job behind it too). Returns the plan."""
    for i in order:
        devices = choose(usage, int(i))
        if devices is None:
            if blocking:
                break
            continue
        usage.add(int(i), devices)
    return usage.plan


def pending_jobs(state: RoundState) -> IntArray:
    """Jobs with no worker placed."""
    out: IntArray = np.flatnonzero(~state.placed.any(axis=1))
    return out


@dataclass(frozen=True)
class Colocating(EventDriven):
    """Shared by the co-locating policies: device plans, decisions at arrivals and completions."""

    shares_gpus: ClassVar[bool] = True

