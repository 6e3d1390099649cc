"""The round-based engine: policies that decide in rounds or leases, with placements on nodes.

UniSched (leases), Hadar and Gavel (rounds) and YARN-CS decide with Python solvers (a MILP, a
dynamic program, a linear program) that place whole GPUs on nodes of possibly different types.
They implement :class:`RoundScheduler`; :func:`simulator.simulate` runs them here and returns
the same :class:`~simulator.simulate.SimulationResult` as the fluid engine, so every metric
applies unchanged.

Semantics:

- Decisions at round boundaries, every ``round_s`` from the first arrival; when the cluster
  empties, the clock re-anchors at the next arrival. A policy that ``reacts`` also decides at
  every arrival and completion. Jobs arriving mid-round wait for the next decision; GPUs a job
  frees mid-round stay idle until then. With ``short_rounds`` (Gavel's simulator) a round also
  ends when no job holds GPUs any more (its kernel may end it sooner by lowering the clock's
  next round), and a round that starts nothing lasts until the next arrival (a playout, which
  sees none, starts the next at once).
- Between decisions rates are constant, so completions are computed, not stepped. At one
  instant, completions are handled before arrivals, then the decision is taken.
- A job holding ``g`` GPUs progresses at ``speedup(model, g)`` times the per-GPU speed of the
  slowest GPU type it holds (Hadar eq. 1b), times, if its GPUs span more than one node, its
  model's speed over that many nodes where the scaling table has one (Chronus's
  ``model_info.json``) and the profile's ``inter_node_factor`` where not. A plan may not
  give a job GPUs of a type where its model's speed is 0 (it cannot run there:
  :class:`~simulator.inputs.scaling.TypeSpeeds`).
- A started job whose allocation changes to a non-zero one pauses ``restart_overhead_s``
  (checkpoint and restart); every change after the first start counts as a preemption.
- A policy that ``shares_gpus`` places workers on devices instead: its plan is a
  ``(jobs, devices)`` 0/1 array, several jobs may share a device within its memory (OJPP eq.
  3), and each job runs at ``1 / (1 + slowdown)`` of its exclusive rate, its slowdown being its
  slowest worker's (:mod:`simulator.rounds.sharing`). Memory surges are drawn at every decision from
  the run's generator (seeded), and rates are recomputed when a co-located job finishes.
- A JCT prediction at a job's arrival plays the state after that instant's decision (if one
  is due) out with estimated sizes and no later arrivals (SPEC §2), the policy's memory and
  the memory-surge generator forked with it.

The loop is compiled (:mod:`simulator.rounds.engine`, state in :mod:`simulator.rounds.arrays`);
policies with a compiled kernel decide inside it, others in Python through :class:`RoundState`
(:mod:`simulator.rounds.driver`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from simulator.errors import ParetoSearchError
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.scaling import ScalingTable
from simulator.rounds.sharing import SharingModel

__all__ = ["Cluster", "InvalidPlan", "RoundScheduler", "RoundState", "checked_plan", "job_rates"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class InvalidPlan(ParetoSearchError, RuntimeError):
    """A policy returned an allocation the cluster cannot hold (a bug in the policy)."""


@dataclass(frozen=True, eq=False)
class Cluster:
    """Nodes of a profile, each with one GPU type.

    Attributes:
        types: GPU type names, in profile order.
        node_type: ``(nodes,)`` index into ``types``.
        node_gpus: ``(nodes,)`` GPUs on each node.
        inter_node_factor: speed multiplier of a job whose GPUs span several nodes, where
            the scaling table has no speed of its own for the job's model (``spread``).
        restart_s: seconds of no progress after a started job's allocation changes.
        node_mem_gib: ``(nodes,)`` memory of each of the node's GPUs.

    Devices (GPUs) are numbered node by node: node ``k`` holds devices
    ``node_first[k] .. node_first[k] + node_gpus[k] - 1``.
    """

    types: tuple[str, ...]
    node_type: IntArray
    node_gpus: IntArray
    inter_node_factor: float
    restart_s: float
    node_mem_gib: FloatArray

    @classmethod
    def from_profile(cls, profile: ClusterProfile) -> Cluster:
        """Expand the profile's node groups into nodes."""
        types = tuple(profile.gpus_by_type)
        groups = profile.node_groups
        counts = [g.count for g in groups]
        return cls(types, np.repeat(np.array([types.index(g.gpu_type) for g in groups],
                                             dtype=np.int64), counts),
                   np.repeat(np.array([g.gpus_per_node for g in groups], dtype=np.int64), counts),
                   profile.inter_node_factor, profile.restart_overhead_s,
                   np.repeat(np.array([g.gpu_memory_gib for g in groups]), counts))

    @cached_property
    def node_first(self) -> IntArray:
        """First device of each node."""
        first: IntArray = np.concatenate([[0], np.cumsum(self.node_gpus)[:-1]]).astype(np.int64)
        return first

    @cached_property
    def device_node(self) -> IntArray:
        """``(devices,)`` the node of each device."""
        return np.repeat(np.arange(self.nodes, dtype=np.int64), self.node_gpus)

    def on_nodes(self, placed: BoolArray) -> IntArray:
        """A ``(jobs, devices)`` placement counted per node: ``(jobs, nodes)`` GPUs."""
        alloc: IntArray = np.add.reduceat(placed.astype(np.int64), self.node_first, axis=1)
        return alloc

    @property
    def nodes(self) -> int:
        """Number of nodes."""
        return int(self.node_gpus.shape[0])

    @property
    def type_gpus(self) -> IntArray:
        """GPUs of each type."""
        return np.bincount(self.node_type, weights=self.node_gpus,
                           minlength=len(self.types)).astype(np.int64)

    def by_type(self, alloc: IntArray) -> IntArray:
        """A ``(jobs, nodes)`` allocation summed per GPU type: ``(jobs, types)``."""
        out = np.zeros((alloc.shape[0], len(self.types)), dtype=np.int64)
        for t in range(len(self.types)):
            out[:, t] = alloc[:, self.node_type == t].sum(axis=1)
        return out


def job_rates(alloc: IntArray, model: IntArray, cluster: Cluster, speeds: FloatArray,
              scaling: ScalingTable) -> FloatArray:
    """Progress rate (reference-type work per second) of each job under ``alloc``.

    Args:
        alloc: ``(jobs, nodes)`` GPUs of each job on each node.
        model: each job's model (row of ``scaling`` and ``speeds``).
        cluster: the nodes.
        speeds: ``(models, types)`` per-GPU speed of each model on each type.
        scaling: the speed-up table.
    """
    gpus = alloc.sum(axis=1)
    held = cluster.by_type(alloc) > 0
    slowest = np.where(held, speeds[model], np.inf).min(axis=1, initial=np.inf)
    slowest[gpus == 0] = 0.0
    nodes = (alloc > 0).sum(axis=1)
    spread = scaling.spread_factors(cluster.inter_node_factor)
    at = spread[model, np.minimum(gpus, spread.shape[1] - 1), (nodes > 2).astype(np.int64)]
    locality = np.where(nodes > 1, at, 1.0)
    rates: FloatArray = scaling.speed(model, gpus.astype(np.float64)) * slowest * locality
    return rates


@dataclass(frozen=True, eq=False)
class RoundState:
    """What a round policy sees at one decision: the active jobs, in arrival order.

    Per-job arrays are read-only copies. Deadlines are absolute (arrival + relative).
    ``memo`` persists across the decisions of one run: the policy's own state (leases held,
    a cached solution), passed in and out explicitly.
    """

    now: float
    cluster: Cluster
    rows: IntArray
    arrival_s: FloatArray
    demand: IntArray
    min_gpus: IntArray
    est_size: FloatArray
    est_remaining: FloatArray
    attained: FloatArray
    alloc: IntArray
    model: IntArray
    job_class: IntArray
    deadlines_s: FloatArray
    rewards: FloatArray
    scaling: ScalingTable
    speeds: FloatArray
    memo: dict[str, Any]
    placed: BoolArray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    """``(jobs, devices)`` current device placement (policies that share GPUs; else empty)."""
    sharing: SharingModel | None = None
    """The sharing model (per-row requirements, slowdowns), None if jobs cannot share."""

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def rate(self, alloc: IntArray) -> FloatArray:
        """Each active job's progress rate under a candidate ``(jobs, nodes)`` allocation."""
        return job_rates(alloc, self.model, self.cluster, self.speeds, self.scaling)


@runtime_checkable
class RoundScheduler(Protocol):
    """The contract of a round policy.

    ``plan`` returns a ``(jobs, nodes)`` array of non-negative GPU counts with column sums
    within each node's GPUs and row sums within each job's demand; it may keep state in
    ``state.memo`` and must otherwise depend on the state only. ``round_s`` is the time
    between decisions; ``reacts`` asks for decisions at arrivals and completions too. A
    scheduler with a true ``shares_gpus`` attribute returns a ``(jobs, devices)`` 0/1 plan
    instead, and one with a true ``short_rounds`` attribute has Gavel's rounds (module
    docstring). A compiled policy may name the jobs it gave up on with a ``dropped(memory)``
    method (a boolean per workload row; :attr:`SimulationResult.dropped`).
    """

    @property
    def round_s(self) -> float: ...

    @property
    def reacts(self) -> bool: ...

    def plan(self, state: RoundState) -> IntArray: ...


def checked_plan(plan: Any, state: RoundState, policy: RoundScheduler, shares: bool
                 ) -> IntArray:
    """A Python policy's plan as integers, or :class:`InvalidPlan` naming what is wrong."""
    where = f"policy {type(policy).__name__} at t={state.now:g} s"
    cluster = state.cluster
    width, what = ((state.placed.shape[1], "devices") if shares else (cluster.nodes, "nodes"))
    arr = np.asarray(plan)
    if arr.shape != (len(state), width):
        raise InvalidPlan(f"{where}: expected a ({len(state)}, {width}) plan (active jobs x "
                          f"{what}), got shape {arr.shape}")
    out = arr.astype(np.int64)
    if not np.array_equal(out, arr) or (out < 0).any() or (shares and (out > 1).any()):
        raise InvalidPlan(f"{where}: GPU counts must be non-negative integers"
                          + (" (0 or 1 per device)" if shares else ""))
    capacity = np.ones(width, np.int64) if shares else cluster.node_gpus
    over = np.flatnonzero(out.sum(axis=0) > capacity)
    if shares and state.sharing is not None:
        excess = state.sharing.memory_excess(state.rows, out.astype(bool))
        bad = np.flatnonzero((excess > 1e-9) | (~state.sharing.shareable & (out.sum(axis=0) > 1)))
        if bad.size:
            raise InvalidPlan(f"{where}: device {bad[0]} cannot hold its workers (memory over "
                              f"by {max(excess[bad[0]], 0.0):g} GiB, or no slowdown model for "
                              f"sharing its GPU type)")
    elif over.size:
        raise InvalidPlan(f"{where}: {what[:-1]} {over[0]} given {out[:, over[0]].sum()} "
                          f"GPUs, it has {capacity[over[0]]}")
    greedy = np.flatnonzero(out.sum(axis=1) > state.demand)
    if greedy.size:
        raise InvalidPlan(f"{where}: job row {state.rows[greedy[0]]} given "
                          f"{out[greedy[0]].sum()} GPUs, demand {state.demand[greedy[0]]}")
    types = cluster.node_type[cluster.device_node] if shares else cluster.node_type
    unusable = np.argwhere((out > 0) & (state.speeds[state.model][:, types] <= 0))
    if unusable.size:
        i, k = unusable[0]
        raise InvalidPlan(f"{where}: job row {state.rows[i]} placed on GPU type "
                          f"{cluster.types[types[k]]!r}, where its model "
                          f"{state.scaling.models[state.model[i]]!r} cannot run (speed 0)")
    return out
