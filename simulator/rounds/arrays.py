"""The round engine's state as plain arrays: what the compiled loop keeps.

Named tuples of NumPy arrays (numba types them once, so one compiled engine serves every
kernel): :class:`JobArrays`, every job of the workload by workload row, what it asks for and
where it stands (remaining work, placement, records), and :class:`EngineState`, the loop's
clock and counters, the active rows (arrival order) and the rows holding GPUs, GPUs in use per
node, the workers on each device, the generator, the busy-GPU series and scratch space. The
cluster and a kernel's memory are :mod:`simulator.rounds.view`'s, which also says what a kernel
may see of these: the read-only views :func:`job_view` and :func:`state_view` build.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

import numba as nb
import numpy as np

from simulator.inputs.slo import BEST_EFFORT
from simulator.jit import configure_cache, njit_lazily
from simulator.rounds.view import (
    HOST,
    NEXT_ROUND,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    JobView,
    PolicyMemory,
    StateView,
    read_only,
)

if TYPE_CHECKING:
    from simulator.inputs.scaling import ScalingTable
    from simulator.inputs.workload import Workload
    from simulator.rounds import Cluster
    from simulator.rounds.sharing import SharingModel

configure_cache()

__all__ = ["ClusterArrays", "EngineState", "JobArrays", "cluster_arrays", "engine_state",
           "host_kernel", "job_arrays", "job_view", "jobs_from_columns", "state_view", "workspace"]

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

EngineState = namedtuple("EngineState", [
    "clk", "cnt", "active", "pos", "hold", "inhold", "rng", "series_t", "series_busy",
    "left", "rate", "node_used", "dev_count", "dev_start", "dev_rows", "wslow", "keys"])
"""The loop's clock (``clk``) and counters (``cnt``), the active rows and each one's position
(``pos``), the rows holding GPUs or pausing (``hold``, flagged in ``inhold``), the PCG64 state,
the busy-GPU series, GPUs in use per node, the workers per device, and scratch arrays."""


def _f(*shape: int) -> Any:
    return np.zeros(shape, dtype=np.float64)


def _i(*shape: int) -> Any:
    return np.zeros(shape, dtype=np.int64)


def _types() -> tuple[Any, Any]:
    b = np.zeros(1, dtype=np.bool_)
    jobs = JobArrays(*([_f(1), _f(1), _i(1), _i(1), _i(1), _i(1), _f(1, 1), _f(1, 1)]
                       + [_f(1)] * 4 + [_i(2), _i(1)] + [_f(1)] * 12
                       + [b, _i(1), _f(1), _i(1, 1), _i(1), _i(1), b, _f(1)]))
    state = EngineState(_f(1), _i(1), _i(1), _i(1), _i(1), b, np.zeros(4, np.uint64), _f(1),
                        _f(1), _f(1), _f(1), _i(1), _i(1), _i(1), _i(1), _f(1), _i(1))
    return nb.typeof(jobs), nb.typeof(state)


JOBS_T, STATE_T = _types()


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
    return ClusterArrays._make((*(read_only(a) for a in (
        _c(cluster.node_type, np.int64), _c(cluster.node_gpus, np.int64),
        _c(cluster.node_first, np.int64), _c(cluster.type_gpus, np.int64),
        _c(cluster.device_node, np.int64), _c(device_type, np.int64),
        _c(cluster.node_mem_gib[cluster.device_node], np.float64),
        _c(sharing.shareable if sharing is not None else np.zeros(devices), np.bool_),
        _c(speeds, np.float64), _c(scaling.speedup, np.float64),
        _c(matrix if matrix is not None else np.zeros((1, 1, 1)), np.float64), curves,
        _c(scaling.spread_factors(cluster.inter_node_factor), np.float64))),
        float(cluster.restart_s),
        float(sharing.collision_slowdown) if sharing is not None else 0.0,
        matrix is not None, sharing is not None))


def job_arrays(workload: Workload, nodes: int, devices: int, shares: bool) -> JobArrays:
    """Every job of ``workload`` at time 0: nothing run, nothing placed."""
    wl = workload
    slos, sh = wl.slos, wl.sharing
    return jobs_from_columns(
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


def jobs_from_columns(*, arrival: Any, est_size: Any, demand: Any, min_gpus: Any,
                      model: Any, job_class: Any, deadlines: Any, rewards: Any, sharing: Any,
                      rem: Any, est: Any, att: Any, alloc: Any, placed: Any, used: int
                      ) -> JobArrays:
    """:class:`JobArrays` from per-job columns (nothing run; ``placed``: each row's devices,
    or None where jobs do not share GPUs)."""
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


def job_view(jobs: JobArrays, clairvoyant: bool = False) -> JobView:
    """What a round policy may read of ``jobs``, read-only: ``est`` is the estimated work
    left, or for a ``clairvoyant`` policy the true work left (``rem``)."""
    return JobView(**{name: read_only(jobs.rem if name == "est" and clairvoyant
                                      else getattr(jobs, name)) for name in JobView._fields})


def state_view(state: EngineState) -> StateView:
    """What a round policy may read of ``state``, read-only."""
    return StateView(**{name: read_only(getattr(state, name)) for name in StateView._fields})


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
