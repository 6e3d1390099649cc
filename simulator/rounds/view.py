"""What a round policy may see and write: the whole contract between a round kernel and the
round engine (:mod:`simulator.rounds.engine`). Round policies import this module, never the
engine's own arrays (:mod:`simulator.rounds.arrays`; ``tests/test_imports.py``).

A round kernel is a compiled function of signature :data:`ROUND_KERNEL_SIG`::

    kernel(cluster, jobs, memory, state, now) -> PLAN | HOST

- ``cluster`` (:class:`ClusterArrays`), ``jobs`` (:class:`JobView`) and ``state``
  (:class:`StateView`) are **read-only** arrays: numba refuses to compile a kernel that writes
  them, and a kernel that names a field they do not have (the true remaining work ``rem``,
  the engine's rates and records) does not compile either. ``jobs`` holds what a scheduler
  knows of each job, by workload row: its request (``arrival``, ``demand``, ``min_gpus``,
  ``est_size``, ``model``, ``job_class``, ``deadlines`` (absolute), ``rewards``, the sharing
  columns ``util``/``mem``/``surge_gib``/``surge_p``), its progress (``est``: the estimated
  work left - the true work left only for a policy that declares ``clairvoyant``, as Gavel's
  simulator is; ``att``: work attained; ``ran0``: seconds it has run (Tiresias counts GPUs x
  seconds); ``started``; ``finish``, NaN until it ends; ``pause``: when its last restart
  pause ends) and its
  placement (``alloc[row]`` GPUs per node, ``held`` GPUs, ``alone``: the rate that allocation
  gives alone; for a device-placing policy its workers' devices ``wdev[woff[row]:woff[row] +
  nw[row]]``, ascending, ``wrow[slot]`` a slot's row). ``state`` holds the active rows
  ``active[:cnt[N_ACTIVE]]`` (arrival order; ``pos[row]`` a row's index there), the rows
  holding GPUs ``hold[:cnt[N_HOLD]]`` (in no order), ``cnt[NXT]`` (rows arrived so far),
  ``clk[NEXT_ROUND]``, ``node_used`` (GPUs in use per node) and, for device-placing policies,
  the workers on device ``d``: pool slots ``dev_rows[dev_start[d]:dev_start[d + 1]]``.
- ``memory`` (:class:`PolicyMemory`) is the kernel's own: its parameters, the columns it
  keeps across decisions (named once per policy with :class:`Layout`), and what it writes
  back to the engine, nothing else:

  - the plan, incremental: on entry ``out_alloc`` (GPUs per node, by row) and
    ``out_nw``/``out_wdev`` (a device-placing policy's workers, by pool slot, ascending)
    equal the plan in force. The kernel rewrites the rows it changes and lists each such row
    once with :func:`touch`; rows it does not list keep their plan;
  - ``quiet[0]`` (reset to -inf before every call): a time until which, unless a job arrives
    or finishes first, it would decide the same plan at every round boundary and leave its
    memory as it is (``np.inf``: until then); the engine skips those boundaries;
  - ``round_end[0]`` (reset to inf before every call): the round ends then if sooner than
    ``round_s`` after it began (rounds that end with their last task, ``short_rounds``);
  - ``out_stop[row]``: whole-step rounds. A row given GPUs whose work this round ends at
    ``out_stop[row]``, before the round does, holds its GPUs idle from then on: at the next
    decision the engine takes back what it ran after that time (Gavel's tasks run whole
    training steps). ``inf``: it runs until the round ends.

It returns :data:`PLAN`, or :data:`HOST` before writing anything if its policy's Python
``host_step(cluster, jobs, memory, state, now)`` (same read-only views) must run first (a
solver, say), after which it is asked again. Rows that are not active may hold stale values
in a kernel's memory.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numba as nb
import numpy as np

from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["HOST", "NEXT_ROUND", "NXT", "N_ACTIVE", "N_HOLD", "PLAN", "ROUND_KERNEL_SIG",
           "ClusterArrays", "JobView", "Layout", "PolicyMemory", "StateView", "active_rows",
           "empty_memory", "gang_spread", "locality", "read_only", "set_plan", "speed", "touch"]

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
    "speeds", "speedup", "matrix", "curves", "spread",
    "restart_s", "collision_slowdown", "has_matrix", "has_sharing"])
"""Nodes (``node_*``), GPU types (``type_gpus``), devices (``device_*``; ``shareable``:
a slowdown model exists for the device's type), ``speeds[model, type]``,
``speedup[model, gpus]``, the pairwise slowdown ``matrix[model, model, type]`` (used if
``has_matrix``), per-type utilization ``curves[type] = (a, b, c, slope, intercept, fitted)``
and ``spread[model, gpus, k]``, a gang's speed over 2 nodes (k 0) or more (k 1), the cluster's
``inter_node_factor`` where the scaling table has none (:func:`locality`); ``has_sharing``:
the workload has sharing columns. Read-only."""

JobView = namedtuple("JobView", [
    "arrival", "est_size", "demand", "min_gpus", "model", "job_class", "deadlines", "rewards",
    "util", "mem", "surge_gib", "surge_p", "woff", "wrow",
    "est", "att", "ran0", "alone", "finish", "pause", "started", "held", "alloc", "nw",
    "wdev"])
"""What a round policy may read of the jobs (module docstring), read-only."""

StateView = namedtuple("StateView", ["clk", "cnt", "active", "pos", "hold", "node_used",
                                     "dev_start", "dev_rows"])
"""What a round policy may read of the engine's state (module docstring), read-only."""

PolicyMemory = namedtuple("PolicyMemory", ["params", "f", "i", "g", "gi", "out_alloc",
                                           "out_nw", "out_wdev", "out_stop", "touched",
                                           "ntouched", "quiet", "round_end"])
"""A kernel's parameters, its memory (per-row columns ``f`` and ``i``, global vectors ``g``
and ``gi``: their names come from the policy's :class:`Layout`), the plan it writes, how long
it stays quiet and when its round ends (module docstring)."""


class Layout:
    """A policy's memory, declared once: named column blocks of its per-row ``f`` (float) or
    ``i`` (int) memory, or of its global ``g``/``gi`` vectors, each ``name=width`` in order.

    ``L.NAME`` is block ``name``'s first column (compiled code reads it as a constant once
    bound to a module global: ``CREDIT = L.CREDIT``); ``L.width`` is what
    :func:`empty_memory` takes. A last block of width 0 marks where columns sized per run
    begin (``L.open``): the memory is then at least ``L.width`` wide, else exactly.
    A policy lists its layouts in ``KernelRoundPolicy.layouts`` (``tests/policies/
    test_memory_layout.py`` checks its memory against them and its kernels' reads).
    """

    def __init__(self, **blocks: int) -> None:
        self.blocks = dict(blocks)
        self.offsets: dict[str, int] = {}
        at = 0
        for name, width in self.blocks.items():
            self.offsets[name.upper()] = at
            at += width
        self.width = at
        self.open = bool(self.blocks) and list(self.blocks.values())[-1] == 0

    def __getattr__(self, name: str) -> int:
        offsets = self.__dict__.get("offsets", {})
        if name not in offsets:
            raise AttributeError(f"no memory block {name.lower()!r} in {self!r}")
        return int(offsets[name])

    def __repr__(self) -> str:
        return f"Layout({', '.join(f'{k}={v}' for k, v in self.blocks.items())})"


@njit(inline="always")
def touch(memory: Any, row: int) -> None:
    """List ``row`` as rewritten in ``memory``'s plan (once per decision)."""
    memory.touched[memory.ntouched[0]] = row
    memory.ntouched[0] += 1


@njit(inline="always")
def set_plan(memory: Any, row: int, alloc: Any) -> None:
    """Make ``alloc`` (GPUs per node) ``row``'s plan, listing the row with :func:`touch` if
    that changes the plan in force."""
    if np.any(alloc != memory.out_alloc[row]):
        memory.out_alloc[row] = alloc
        touch(memory, row)


@njit(inline="always")
def active_rows(state: Any) -> Any:
    """The active rows, in arrival order."""
    return state.active[:state.cnt[N_ACTIVE]]


@njit(inline="always")
def speed(C: Any, m: int, g: float) -> float:
    """``ScalingTable.speed`` for one job: linear between integer counts, flat above."""
    top = C.speedup.shape[1] - 1
    g = min(max(g, 0.0), float(top))
    lo = int(g)
    hi = min(lo + 1, top)
    base = C.speedup[m, lo]
    return base + (g - lo) * (C.speedup[m, hi] - base)


@njit(inline="always")
def locality(C: Any, m: int, gpus: int, nodes: int) -> float:
    """Speed multiplier of a ``gpus``-GPU gang of model ``m`` over ``nodes`` nodes
    (``ScalingTable.spread_factors``): 1 on one node."""
    if nodes <= 1:
        return 1.0
    return C.spread[m, min(gpus, C.spread.shape[1] - 1), 0 if nodes == 2 else 1]


@njit
def gang_spread(C: Any, model: Any, gpus: Any) -> Any:
    """Each job's :func:`locality` over 2 nodes and over 3 or more at its gang size,
    ``(jobs, 2)``."""
    top = C.spread.shape[1] - 1
    out = np.empty((model.shape[0], 2))
    for j in range(model.shape[0]):
        out[j] = C.spread[model[j], min(gpus[j], top)]
    return out


def read_only(a: Any) -> Any:
    """A read-only view of array ``a`` (what the engine writes there shows through it)."""
    view = a.view()
    view.flags.writeable = False
    return view


def _f(*shape: int) -> Any:
    return np.zeros(shape, dtype=np.float64)


def _i(*shape: int) -> Any:
    return np.zeros(shape, dtype=np.int64)


def empty_memory(jobs: Any, nodes: int, *, params: Any = None, f: Layout | int = 0,
                 i: Layout | int = 0, g: Layout | int = 0, gi: Layout | int = 0) -> PolicyMemory:
    """A :class:`PolicyMemory` for ``jobs`` (a :class:`JobView`) with ``f``/``i`` per-row
    columns and ``g``/``gi`` global entries (a :class:`Layout`: its width; an open layout's
    width plus the columns sized per run), all zero, and the plan in force (nothing
    placed)."""
    n = jobs.arrival.shape[0]
    nf, ni, ng, ngi = (w.width if isinstance(w, Layout) else w for w in (f, i, g, gi))
    return PolicyMemory(np.zeros(0) if params is None else np.asarray(params, np.float64),
                        _f(n, nf), _i(n, ni), _f(ng), _i(ngi), jobs.alloc.copy(), jobs.nw.copy(),
                        jobs.wdev.copy(), np.full(n, np.inf), _i(n), _i(1),
                        np.full(1, -np.inf), np.full(1, np.inf))


def _types() -> tuple[Any, Any, Any, Any]:
    b, ro = np.zeros(1, dtype=np.bool_), read_only
    cl = ClusterArrays._make((*(ro(a) for a in (_i(1), _i(1), _i(1), _i(1), _i(1), _i(1),
                                                _f(1), b, _f(1, 1), _f(1, 1), _f(1, 1, 1),
                                                _f(1, 6), _f(1, 1, 2))),
                                0.0, 0.0, False, False))
    jobs = JobView(*(ro(a) for a in ([_f(1), _f(1), _i(1), _i(1), _i(1), _i(1), _f(1, 1),
                                      _f(1, 1)] + [_f(1)] * 4 + [_i(2), _i(1)] + [_f(1)] * 6
                                     + [b, _f(1), _i(1, 1), _i(1), _i(1)])))
    mem = PolicyMemory(_f(1), _f(1, 1), _i(1, 1), _f(1), _i(1), _i(1, 1), _i(1), _i(1), _f(1),
                       _i(1), _i(1), _f(1), _f(1))
    state = StateView(*(ro(a) for a in (_f(1), _i(1), _i(1), _i(1), _i(1), _i(1), _i(1),
                                        _i(1))))
    return nb.typeof(cl), nb.typeof(jobs), nb.typeof(mem), nb.typeof(state)


CLUSTER_T, VIEW_T, MEMORY_T, STATE_VIEW_T = _types()
ROUND_KERNEL_SIG = nb.types.int64(CLUSTER_T, VIEW_T, MEMORY_T, STATE_VIEW_T, nb.types.float64)
"""Numba signature of every round kernel (module docstring)."""
