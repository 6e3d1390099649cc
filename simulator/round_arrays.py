"""The round engine's state as plain arrays: what the compiled loop and policy kernels share.

Four named tuples of NumPy arrays (numba types them once, so one compiled engine serves every
kernel):

- :class:`ClusterArrays` - the nodes and devices, per-type speeds, the scaling table and the
  slowdown model (read-only);
- :class:`JobArrays` - every job of the workload, indexed by workload row: what it asks for
  (static) and where it stands (remaining work, placement, records). A job's GPUs are
  ``alloc[row]`` (per node); a job of a device-placing policy also has its workers' devices
  ``wdev[woff[row]:woff[row] + nw[row]]``, ascending (``wrow[slot]`` is a slot's row);
- :class:`PolicyMemory` - a kernel's parameters, the state it keeps across decisions (per-row
  columns ``f`` and ``i``, global vectors ``g`` and ``gi``) and the plan it writes;
- :class:`EngineState` - the loop's clock and counters, the active rows (arrival order) and
  the rows holding GPUs, GPUs in use per node, the workers on each device, the generator, the
  busy-GPU series and scratch space.

A round kernel is a compiled function of signature :data:`ROUND_KERNEL_SIG`::

    kernel(cluster, jobs, memory, state, now) -> PLAN | HOST

It decides for the active rows ``state.active[:state.cnt[N_ACTIVE]]`` and depends on its
arguments only (a policy acting at round boundaries keeps the next one in its memory). It may
read what a policy knows of a job (``arrival``, ``demand``, ``min_gpus``, ``est_size``, ``est``
(estimated remaining), ``att`` (attained), ``model``, ``job_class``, ``deadlines``,
``rewards``, the sharing columns, ``alloc``, ``nw``/``wdev``, ``alone``: the rate its
allocation gives alone, ``started``), never ``rem``; and, of the state, ``hold[:cnt[N_HOLD]]``
(rows holding GPUs, in no order), ``node_used`` (GPUs in use per node) and, for device-placing
policies, the workers on device ``d``: pool slots ``dev_rows[dev_start[d]:dev_start[d + 1]]``.

Its plan is incremental: on entry, the rows of ``memory.out_alloc`` (GPUs per node, by row)
and ``memory.out_nw``/``memory.out_wdev`` (a device-placing policy's workers, by pool slot,
ascending) equal the plan in force. The kernel rewrites the rows it changes and lists each
such row once with :func:`touch`; rows it does not list keep their plan. It returns
:data:`PLAN`, or :data:`HOST` before writing anything if its policy's Python
``host_step(cluster, jobs, memory, state, now)`` must run first (a solver, say), after which it
is asked again. Rows that are not active may hold stale values in a kernel's memory.

A kernel may also set ``memory.quiet[0]`` (reset to -inf before every call) to a time until
which, unless a job arrives or finishes first, it would decide the same plan at every round
boundary and leave its memory as it is (``np.inf``: until then). The engine then skips those
boundaries (:func:`simulator.round_engine.run_loop`).
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

import numba as nb
import numpy as np

from simulator.jit import configure_cache, njit, njit_lazily
from simulator.slo import BEST_EFFORT

if TYPE_CHECKING:
    from simulator.rounds import Cluster, RoundState
    from simulator.scaling import ScalingTable
    from simulator.sharing import SharingModel
    from simulator.workload import Workload

configure_cache()

__all__ = ["HOST", "N_ACTIVE", "N_HOLD", "PLAN", "ROUND_KERNEL_SIG", "ClusterArrays",
           "EngineState", "JobArrays", "PolicyMemory", "active_rows", "cluster_arrays",
           "decision_state", "empty_memory", "engine_state", "host_kernel", "job_arrays",
           "job_arrays_from", "touch", "workspace"]

PLAN, HOST = 0, 2
"""What a kernel returns: its plan is written, or its Python step must run first."""

# state.clk entries
NOW, NEXT_ROUND, ANCHORED, BUSY, UTIL, OCC_USED, OCC_UTIL, CUM0, CUM1, ERR_X = range(10)
# state.cnt entries
(NXT, N_ACTIVE, N_HOLD, EVENTS, DECISIONS, PHASE, SERIES_K, ARR_LO, ARR_HI, GONE, ERR_A,
 ERR_B, SKIPPED, SURGING) = range(14)

ClusterArrays = namedtuple("ClusterArrays", [
    "node_type", "node_gpus", "node_first", "type_gpus",
    "device_node", "device_type", "device_mem", "shareable",
    "speeds", "speedup", "matrix", "curves",
    "inter_node_factor", "restart_s", "collision_slowdown", "has_matrix", "has_sharing"])
"""Nodes (``node_*``), GPU types (``type_gpus``), devices (``device_*``; ``shareable``:
a slowdown model exists for the device's type), ``speeds[model, type]``,
``speedup[model, gpus]``, the pairwise slowdown ``matrix[model, model, type]`` (used if
``has_matrix``) and per-type utilization ``curves[type] = (a, b, c, slope, intercept, fitted)``;
``has_sharing``: the workload has sharing columns."""

JobArrays = namedtuple("JobArrays", [
    "arrival", "est_size", "demand", "min_gpus", "model", "job_class", "deadlines", "rewards",
    "util", "mem", "surge_gib", "surge_p", "woff", "wrow",
    "rem", "est", "att", "alone", "base", "pause", "start", "finish",
    "ran0", "ran1", "seen0", "seen1", "started", "preempt", "held", "alloc",
    "nw", "wdev", "wsurge", "used"])
"""Per workload row (module docstring). ``deadlines`` are absolute; ``base`` is the rate with
sharing slowdowns (``alone`` without); ``pause`` ends a restart; ``ran0``/``ran1`` are seconds
run and the seconds alone that work needed; ``seen0``/``seen1`` PCS's active-count sums;
``used`` the peak GPUs per node (device-placing policies: whether each device ever hosted a
worker)."""

PolicyMemory = namedtuple("PolicyMemory", ["params", "f", "i", "g", "gi", "out_alloc",
                                           "out_nw", "out_wdev", "touched", "ntouched",
                                           "quiet"])
"""A kernel's parameters, its memory, the plan it writes and how long it stays quiet (module
docstring)."""

EngineState = namedtuple("EngineState", [
    "clk", "cnt", "active", "pos", "hold", "inhold", "rng", "series_t", "series_busy",
    "left", "rate", "node_used", "dev_count", "dev_start", "dev_rows", "wslow", "keys"])
"""The loop's clock (``clk``) and counters (``cnt``), the active rows and each one's position
(``pos``), the rows holding GPUs or pausing (``hold``, flagged in ``inhold``), the PCG64 state,
the busy-GPU series, GPUs in use per node, the workers per device, and scratch arrays."""


@njit(inline="always")
def touch(memory: Any, row: int) -> None:
    """List ``row`` as rewritten in ``memory``'s plan (once per decision)."""
    memory.touched[memory.ntouched[0]] = row
    memory.ntouched[0] += 1


@njit(inline="always")
def active_rows(state: Any) -> Any:
    """The active rows, in arrival order."""
    return state.active[:state.cnt[N_ACTIVE]]


def _f(*shape: int) -> Any:
    return np.zeros(shape, dtype=np.float64)


def _i(*shape: int) -> Any:
    return np.zeros(shape, dtype=np.int64)


def empty_memory(jobs: JobArrays, nodes: int, *, params: Any = None, f: int = 0, i: int = 0,
                 g: int = 0, gi: int = 0) -> PolicyMemory:
    """A :class:`PolicyMemory` for ``jobs`` with ``f``/``i`` per-row columns and ``g``/``gi``
    global entries, all zero, and the plan in force (nothing placed)."""
    n = jobs.arrival.shape[0]
    return PolicyMemory(np.zeros(0) if params is None else np.asarray(params, np.float64),
                        _f(n, f), _i(n, i), _f(g), _i(gi), jobs.alloc.copy(), jobs.nw.copy(),
                        jobs.wdev.copy(), _i(n), _i(1), np.full(1, -np.inf))


def _types() -> tuple[Any, Any, Any, Any]:
    b = np.zeros(1, dtype=np.bool_)
    cl = ClusterArrays(_i(1), _i(1), _i(1), _i(1), _i(1), _i(1), _f(1), b, _f(1, 1), _f(1, 1),
                       _f(1, 1, 1), _f(1, 6), 1.0, 0.0, 0.0, False, False)
    jobs = JobArrays(*([_f(1), _f(1), _i(1), _i(1), _i(1), _i(1), _f(1, 1), _f(1, 1)]
                       + [_f(1)] * 4 + [_i(2), _i(1)] + [_f(1)] * 12
                       + [b, _i(1), _f(1), _i(1, 1), _i(1), _i(1), b, _f(1)]))
    mem = PolicyMemory(_f(1), _f(1, 1), _i(1, 1), _f(1), _i(1), _i(1, 1), _i(1), _i(1), _i(1),
                       _i(1), _f(1))
    state = EngineState(_f(1), _i(1), _i(1), _i(1), _i(1), b, np.zeros(4, np.uint64), _f(1),
                        _f(1), _f(1), _f(1), _i(1), _i(1), _i(1), _i(1), _f(1), _i(1))
    return nb.typeof(cl), nb.typeof(jobs), nb.typeof(mem), nb.typeof(state)


CLUSTER_T, JOBS_T, MEMORY_T, STATE_T = _types()
ROUND_KERNEL_SIG = nb.types.int64(CLUSTER_T, JOBS_T, MEMORY_T, STATE_T, nb.types.float64)
"""Numba signature of every round kernel (module docstring)."""


@njit_lazily(ROUND_KERNEL_SIG)
def host_kernel(cluster: Any, jobs: Any, memory: Any, state: Any, now: float) -> int:
    """The kernel of a policy that decides in Python: every decision goes to the host."""
    return HOST


def cluster_arrays(cluster: Cluster, speeds: Any, scaling: ScalingTable,
                   sharing: SharingModel | None) -> ClusterArrays:
    """The arrays of ``cluster`` for jobs with ``scaling``'s models, per-type ``speeds``
    and, if they may share GPUs, the ``sharing`` model (its slowdowns)."""
    devices = int(cluster.node_gpus.sum())
    device_type = cluster.node_type[cluster.device_node]
    curves = np.zeros((len(cluster.types), 6))
    for t, curve in enumerate(sharing.curves if sharing is not None else ()):
        if curve is not None:
            a, b, c = curve.quadratic
            slope, icpt = curve.linear or (a + b + c - 1.0, 0.0)
            curves[t] = (a, b, c, slope, icpt, 1.0)
    matrix = sharing.matrix if sharing is not None else None
    return ClusterArrays(
        _c(cluster.node_type, np.int64), _c(cluster.node_gpus, np.int64),
        _c(cluster.node_first, np.int64), _c(cluster.type_gpus, np.int64),
        _c(cluster.device_node, np.int64), _c(device_type, np.int64),
        _c(cluster.node_mem_gib[cluster.device_node], np.float64),
        _c(sharing.shareable if sharing is not None else np.zeros(devices), np.bool_),
        _c(speeds, np.float64), _c(scaling.speedup, np.float64),
        _c(matrix if matrix is not None else np.zeros((1, 1, 1)), np.float64), curves,
        float(cluster.inter_node_factor), float(cluster.restart_s),
        float(sharing.collision_slowdown) if sharing is not None else 0.0,
        matrix is not None, sharing is not None)


def job_arrays(workload: Workload, nodes: int, devices: int, shares: bool) -> JobArrays:
    """Every job of ``workload`` at time 0: nothing run, nothing placed."""
    wl = workload
    slos, sh = wl.slos, wl.sharing
    return _jobs(
        arrival=wl.arrival_s, est_size=wl.estimated_service_s, demand=wl.gpus,
        min_gpus=wl.min_gpus, model=wl.model,
        job_class=slos.job_class if slos is not None else np.full(len(wl), BEST_EFFORT),
        deadlines=(wl.arrival_s[:, None] + slos.deadlines_s if slos is not None
                   else np.zeros((len(wl), 0))),
        rewards=slos.rewards if slos is not None else np.zeros((len(wl), 0)),
        sharing=sh, rem=wl.service_s, est=wl.estimated_service_s, att=np.zeros(len(wl)),
        alloc=np.zeros((len(wl), nodes), dtype=np.int64),
        placed=np.zeros((len(wl), devices), dtype=np.bool_) if shares else None,
        used=devices if shares else nodes)


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
    jobs = _jobs(
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


def _jobs(*, arrival: Any, est_size: Any, demand: Any, min_gpus: Any, model: Any,
          job_class: Any, deadlines: Any, rewards: Any, sharing: Any, rem: Any, est: Any,
          att: Any, alloc: Any, placed: Any, used: int) -> JobArrays:
    n = arrival.shape[0]
    woff = np.zeros(n + 1, dtype=np.int64)
    if placed is not None:
        woff[1:] = np.cumsum(demand)
    wrow = np.repeat(np.arange(n, dtype=np.int64), np.diff(woff))
    wdev = np.full(woff[-1], -1, dtype=np.int64)
    nw = np.zeros(n, dtype=np.int64)
    for r in np.flatnonzero(placed.any(axis=1)) if placed is not None else ():
        devices = np.flatnonzero(placed[r])
        nw[r] = devices.size
        wdev[woff[r]:woff[r] + devices.size] = devices
    cols = {"gpu_util": "util", "mem_gib": "mem", "surge_gib": "surge_gib", "surge_p": "surge_p"}
    return JobArrays(
        arrival=_c(arrival, np.float64), est_size=_c(est_size, np.float64),
        demand=_c(demand, np.int64), min_gpus=_c(min_gpus, np.int64), model=_c(model, np.int64),
        job_class=_c(job_class, np.int64), deadlines=_c(deadlines, np.float64),
        rewards=_c(rewards, np.float64),
        **{name: _c(getattr(sharing, col)[:n] if sharing is not None else np.zeros(n),
                    np.float64) for col, name in cols.items()},
        woff=woff, wrow=wrow, rem=_c(rem, np.float64), est=_c(est, np.float64),
        att=_c(att, np.float64), alone=np.zeros(n), base=np.zeros(n), pause=np.zeros(n),
        start=np.full(n, np.nan), finish=np.full(n, np.nan), ran0=np.zeros(n),
        ran1=np.zeros(n), seen0=np.zeros(n), seen1=np.zeros(n),
        started=np.zeros(n, dtype=np.bool_), preempt=np.zeros(n, dtype=np.int64),
        held=np.zeros(n), alloc=_c(alloc, np.int64), nw=nw, wdev=wdev,
        wsurge=np.zeros(wdev.shape[0], dtype=np.bool_), used=np.zeros(used))


def engine_state(jobs: JobArrays, nodes: int, devices: int, seed_state: Any) -> EngineState:
    """A loop at time 0 (the clock's next round at infinity, nothing anchored)."""
    n, pool = jobs.arrival.shape[0], jobs.wdev.shape[0]
    clk = np.zeros(12)
    clk[NEXT_ROUND] = np.inf
    return EngineState(clk, _i(16), _i(n), _i(n), _i(n), np.zeros(n, dtype=np.bool_),
                       np.array(seed_state, dtype=np.uint64), _f(max(16, 2 * n)),
                       _f(max(16, 2 * n)), _f(n), _f(n), _i(nodes), _i(devices),
                       _i(devices + 1), _i(pool), _f(pool), _i(pool))


def decision_state(jobs: JobArrays, rows: Any, cluster: ClusterArrays,
                   shares: bool) -> EngineState:
    """The engine's view of one decision over ``jobs`` (from :func:`job_arrays_from`):
    ``rows`` active, the ones with GPUs holding, GPUs in use and workers per device."""
    from simulator.round_plan import index_devices

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


_STATIC = frozenset(("arrival", "est_size", "demand", "min_gpus", "model", "job_class",
                     "deadlines", "rewards", "util", "mem", "surge_gib", "surge_p", "woff",
                     "wrow"))


def workspace(jobs: JobArrays, memory: PolicyMemory, state: EngineState
              ) -> tuple[JobArrays, PolicyMemory, EngineState]:
    """Arrays for prediction playouts: the static job arrays shared, the rest fresh."""
    j2 = jobs._replace(**{k: np.empty_like(v) for k, v in jobs._asdict().items()
                          if k not in _STATIC})
    m2 = memory._replace(**{k: np.empty_like(v) for k, v in memory._asdict().items()
                            if k != "params"})
    e2 = state._replace(**{k: np.empty_like(v) for k, v in state._asdict().items()
                           if k not in ("series_t", "series_busy")})
    return j2, m2, e2


def _c(a: Any, dtype: Any) -> Any:
    """A writable C-contiguous copy of ``a`` (numba types every field one way)."""
    return np.array(a, dtype=dtype, order="C", copy=True)
