"""Shared machinery of the co-locating policies: Horus (:mod:`policies.horus.policy`) and its
baselines FIFO-exclusive, OBP and PAB (:mod:`policies.horus.baselines`), compiled.

All four place workers on devices (``shares_gpus``) and decide at arrivals and completions;
all but FIFO read each job's predicted utilization and memory from the workload's sharing
columns. None moves a running job, except PAB's evictions. A decision builds the devices' load
(:class:`Load`) from the engine's workers per device, then places jobs one at a time
(:func:`place`), each on the cheapest devices that can take it (:func:`cheapest`).
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import EventDriven
from policies.round_kernel import KernelRoundPolicy
from simulator.errors import InvalidWorkload
from simulator.jit import configure_cache, njit
from simulator.rounds.view import (
    N_ACTIVE,
    ClusterArrays,
    JobView,
    PolicyMemory,
    active_rows,
    touch,
)

configure_cache()

__all__ = ["Colocating", "Load", "cheapest", "curve_slowdown", "device_load", "fits",
           "least_memory", "pending_rows", "place"]

Load = namedtuple("Load", ["mem", "surge", "util", "count", "head", "nxt", "who", "size"])
"""The devices' load under the plan being built: base memory (gamma) summed, largest surge
(delta), utilization summed and workers, per device. With an interference matrix, also the
workers on each device in arrival order: entries ``head[d]``, ``nxt[e]`` (-1 ends), each a
row ``who[e]``; ``size[0]`` entries used. Without one, those arrays are empty."""


@njit
def pending_rows(J: Any, E: Any) -> Any:
    """The active rows with no worker placed, in arrival order."""
    out = np.empty(E.cnt[N_ACTIVE], dtype=np.int64)
    n = 0
    for r in active_rows(E):
        if J.nw[r] == 0:
            out[n] = r
            n += 1
    return out[:n]


@njit
def device_load(C: Any, J: Any, E: Any, flags: Any, skip: int, extra: int) -> Any:
    """The load of the plan in force, leaving out rows ``r`` with ``flags[r] == skip`` (no
    flags: none); room for ``extra`` more workers in the per-device lists."""
    D = C.device_node.shape[0]
    mem, surge, util = np.zeros(D), np.zeros(D), np.zeros(D)
    count = np.zeros(D, dtype=np.int64)
    lists = C.has_matrix
    cap = E.dev_start[D] + extra if lists else 0
    head = np.full(D if lists else 0, -1, dtype=np.int64)
    nxt, who = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    size = np.zeros(1, dtype=np.int64)
    for d in range(D):
        for x in range(E.dev_start[d], E.dev_start[d + 1]):  # arrival order, as rows add up
            r = J.wrow[E.dev_rows[x]]
            if flags.shape[0] and flags[r] == skip:
                continue
            mem[d] += J.mem[r]
            util[d] += J.util[r]
            surge[d] = max(surge[d], J.surge_gib[r])
            count[d] += 1
        if not lists:
            continue
        for x in range(E.dev_start[d + 1] - 1, E.dev_start[d] - 1, -1):
            r = J.wrow[E.dev_rows[x]]  # pushed last first, so the list runs in arrival order
            if not (flags.shape[0] and flags[r] == skip):
                who[size[0]], nxt[size[0]], head[d] = r, head[d], size[0]
                size[0] += 1
    return Load(mem, surge, util, count, head, nxt, who, size)


@njit(inline="always")
def fits(C: Any, J: Any, load: Any, r: int, d: int) -> bool:
    """Whether device ``d`` can take a worker of row ``r``: memory (OJPP eq. 3) and, where
    others already run, a slowdown model for sharing."""
    peak = load.mem[d] + J.mem[r] + max(load.surge[d], J.surge_gib[r])
    return peak <= C.device_mem[d] + 1e-10 and (load.count[d] == 0 or C.shareable[d])


@njit(inline="always")
def curve_slowdown(C: Any, t: int, u: float) -> float:
    """Type ``t``'s utilization curve at cumulative utilization ``u`` (``SlowdownCurve``)."""
    a, b, c = C.curves[t, 0], C.curves[t, 1], C.curves[t, 2]
    out = a * u * u + b * u + c - 1.0 if u > 1.0 else C.curves[t, 3] * u + C.curves[t, 4]
    return max(out, 0.0)


@njit
def cheapest(cost: Any, need: int, out: Any) -> bool:
    """The ``need`` devices of least finite ``cost`` (ties: lower number) into ``out[:need]``,
    ascending; False if fewer than ``need`` are finite."""
    if need > 32:
        order = np.argsort(cost, kind="mergesort")
        if not cost[order[need - 1]] < np.inf:
            return False
        out[:need] = np.sort(order[:need])
        return True
    best, at = np.empty(need), np.empty(need, dtype=np.int64)
    m = 0
    for d in range(cost.shape[0]):
        c = cost[d]
        if not c < np.inf or (m == need and not c < best[m - 1]):
            continue
        m = min(m + 1, need)
        j = m - 1
        while j > 0 and c < best[j - 1]:  # strictly: an equal cost stays behind
            best[j], at[j] = best[j - 1], at[j - 1]
            j -= 1
        best[j], at[j] = c, d
    if m < need:
        return False
    out[:need] = np.sort(at)
    return True


@njit
def place(J: Any, M: Any, E: Any, load: Any, r: int, devices: Any) -> None:
    """Plan one worker of row ``r`` on each of ``devices`` (ascending) and add it to the
    load."""
    need = J.demand[r]
    M.out_nw[r] = need
    for k in range(need):
        d = devices[k]
        M.out_wdev[J.woff[r] + k] = d
        load.mem[d] += J.mem[r]
        load.util[d] += J.util[r]
        load.surge[d] = max(load.surge[d], J.surge_gib[r])
        load.count[d] += 1
        if load.head.shape[0]:
            e = load.size[0]
            load.size[0] += 1
            load.who[e] = r
            prev, cur = -1, load.head[d]
            while cur >= 0 and E.pos[load.who[cur]] < E.pos[r]:
                prev, cur = cur, load.nxt[cur]
            load.nxt[e] = cur
            if prev < 0:
                load.head[d] = e
            else:
                load.nxt[prev] = e
    touch(M, r)


@njit
def least_memory(C: Any, J: Any, M: Any, E: Any, load: Any, order: Any) -> None:
    """OBP's placement: each row of ``order`` in turn onto the devices where its worker fits,
    least base memory used first; one that fits nowhere waits, the rest still try."""
    D = C.device_node.shape[0]
    cost = np.empty(D)
    devices = np.empty(D, dtype=np.int64)
    for r in order:
        for d in range(D):
            cost[d] = load.mem[d] if fits(C, J, load, r, d) else np.inf
        if cheapest(cost, J.demand[r], devices):
            place(J, M, E, load, r, devices)


def require_sharing(cluster: ClusterArrays, policy: str) -> None:
    """An error naming the missing workload columns if the run has no sharing model."""
    if not cluster.has_sharing:
        raise InvalidWorkload(
            f"policy {policy!r} places jobs by their GPU utilization and memory, but the "
            f"workload has no sharing columns (gpu_util, gpu_mem_gib, mem_surge_gib, "
            f"mem_surge_p): add them, or generate them with simulator.inputs.generate.add_sharing")


def require_fit_alone(cluster: ClusterArrays, jobs: JobView) -> None:
    """An error naming the first job whose worker no device could hold, even alone."""
    need = jobs.mem + jobs.surge_gib
    big = float(cluster.device_mem.max())
    over = np.flatnonzero(~(need <= big + 1e-10))
    if over.size:
        raise InvalidWorkload(
            f"workload row {over[0] + 1}: a worker needs {need[over[0]]:g} GiB (gpu_mem_gib + "
            f"mem_surge_gib), more than any device's {big:g} GiB; it could never start")


@dataclass(frozen=True)
class Colocating(KernelRoundPolicy, EventDriven):
    """Shared by the co-locating policies: device plans, decisions at arrivals and completions.

    A run is refused up front if the policy reads sharing columns the workload lacks, or if a
    job's worker fits no device even alone.
    """

    shares_gpus: ClassVar[bool] = True
    reads_sharing: ClassVar[bool] = True

    def memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """:meth:`fresh_memory`, once the workload is known to suit the policy."""
        if self.reads_sharing:
            require_sharing(cluster, self.name)
        if cluster.has_sharing:
            require_fit_alone(cluster, jobs)
        return self.fresh_memory(cluster, jobs)

    def fresh_memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """The kernel's initial memory (default: zeros as ``layouts`` declares, and
        :meth:`kernel_params`)."""
        return super().memory(cluster, jobs)
