"""The Python path into the round engine: an on-ramp for a new round policy.

A round policy may start in Python: its ``plan(state)`` takes a
:class:`~simulator.rounds.RoundState` (the active jobs, copies) and returns GPUs per node (or
devices) per job; the engine stops at each of its decisions and checks and applies the plan
(:mod:`simulator.rounds.driver`). It is slow (a Python call per decision) but needs nothing
compiled, so a new policy can be written and tested this way first, then moved into a kernel
(:mod:`simulator.rounds.view`). :class:`policies.round_kernel.KernelRoundPolicy` runs its
kernel on a ``RoundState`` too (:func:`kernel_plan`: unit tests, and test harnesses that wrap
a policy), so both paths decide alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from simulator.rounds import RoundState
from simulator.rounds.arrays import (
    EngineState,
    JobArrays,
    cluster_arrays,
    engine_state,
    job_view,
    jobs_from_columns,
    state_view,
)
from simulator.rounds.engine import stop_tasks
from simulator.rounds.plan import index_devices
from simulator.rounds.view import HOST, N_ACTIVE, N_HOLD, ClusterArrays, JobView, PolicyMemory

__all__ = ["decision_state", "job_arrays_from", "kernel_plan"]


def kernel_plan(kernel: Any, host_step: Callable[..., None],
                memory: Callable[[ClusterArrays, JobView], PolicyMemory], state: RoundState,
                shares: bool, clairvoyant: bool) -> npt.NDArray[np.int64]:
    """The plan a compiled ``kernel`` makes at the decision ``state``, its memory from
    ``memory(cluster, jobs)`` and ``host_step`` run where it asks (the engine's contract,
    :mod:`simulator.rounds.view`): GPUs per node, or devices, per active job."""
    cluster = cluster_arrays(state.cluster, state.speeds, state.scaling, state.sharing)
    jobs = job_arrays_from(state, shares)
    engine = decision_state(jobs, state.rows, cluster, shares)
    view, seen, now = job_view(jobs, clairvoyant), state_view(engine), float(state.now)
    mem = memory(cluster, view)
    stop_tasks(jobs, mem, engine, now)
    if kernel(cluster, view, mem, seen, now) == HOST:
        host_step(cluster, view, mem, seen, now)
        kernel(cluster, view, mem, seen, now)
    if not shares:
        out: npt.NDArray[np.int64] = mem.out_alloc[state.rows].copy()
        return out
    out = np.zeros(state.placed.shape, dtype=np.int64)
    for a, r in enumerate(state.rows):
        out[a, mem.out_wdev[jobs.woff[r]:jobs.woff[r] + mem.out_nw[r]]] = 1
    return out


def job_arrays_from(state: RoundState, shares: bool) -> JobArrays:
    """The jobs of one decision as :class:`JobArrays` (rows up to the largest active one;
    the others empty), for running a kernel outside the engine."""
    rows = state.rows
    n = int(rows.max()) + 1 if len(state) else 0

    def spread(values: Any) -> Any:
        out = np.zeros((n, *np.shape(values)[1:]), dtype=np.asarray(values).dtype)
        out[rows] = values
        return out

    placed = spread(state.placed) if shares else None
    jobs = jobs_from_columns(
        arrival=spread(state.arrival_s), est_size=spread(state.est_size),
        demand=spread(state.demand), min_gpus=spread(state.min_gpus),
        model=spread(state.model), job_class=spread(state.job_class),
        deadlines=spread(state.deadlines_s), rewards=spread(state.rewards),
        sharing=state.sharing.jobs if state.sharing is not None else None,
        rem=spread(state.est_remaining),
        est=spread(state.est_remaining), att=spread(state.attained),
        alloc=spread(state.alloc), placed=placed,
        used=state.placed.shape[1] if shares else state.cluster.nodes)
    jobs.alone[rows] = state.rate(state.alloc)
    jobs.base[:] = jobs.alone
    jobs.started[rows] = (state.attained > 0) | (state.alloc.sum(axis=1) > 0)
    jobs.held[rows] = state.alloc.sum(axis=1)
    return jobs


def decision_state(jobs: JobArrays, rows: Any, cluster: ClusterArrays,
                   shares: bool) -> EngineState:
    """The engine's view of one decision over ``jobs`` (from :func:`job_arrays_from`):
    ``rows`` active, the ones with GPUs holding, GPUs in use and workers per device."""
    state = engine_state(jobs, cluster.node_gpus.shape[0], cluster.device_node.shape[0],
                         np.zeros(4, dtype=np.uint64))
    n = len(rows)
    state.active[:n] = rows
    state.pos[rows] = np.arange(n)
    holding = rows[jobs.held[rows] > 0]
    state.hold[:holding.size] = holding
    state.inhold[holding] = True
    state.cnt[N_ACTIVE], state.cnt[N_HOLD] = n, holding.size
    state.node_used[:] = jobs.alloc[rows].sum(axis=0)
    if shares:
        index_devices(jobs, state)
    return state
