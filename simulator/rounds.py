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
  frees mid-round stay idle until then.
- Between decisions rates are constant, so completions are computed, not stepped. At one
  instant, completions are handled before arrivals, then the decision is taken.
- A job holding ``g`` GPUs progresses at ``speedup(model, g)`` times the per-GPU speed of the
  slowest GPU type it holds (Hadar eq. 1b), times the profile's ``inter_node_factor`` if its
  GPUs span more than one node.
- A started job whose allocation changes to a non-zero one pauses ``restart_overhead_s``
  (checkpoint and restart); every change after the first start counts as a preemption.
- A policy that ``shares_gpus`` places workers on devices instead: its plan is a
  ``(jobs, devices)`` 0/1 array, several jobs may share a device within its memory (OJPP eq.
  3), and each job runs at ``1 / (1 + slowdown)`` of its exclusive rate, its slowdown being its
  slowest worker's (:mod:`simulator.sharing`). Memory surges are drawn at every decision from
  the run's generator (seeded), and rates are recomputed when a co-located job finishes.
- No JCT predictions are made (``pred_err`` is NaN).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from simulator.errors import ParetoSearchError
from simulator.profile import ClusterProfile
from simulator.result import SimulationResult
from simulator.scaling import ScalingTable, TypeSpeeds
from simulator.sharing import SharingModel
from simulator.slo import BEST_EFFORT
from simulator.workload import Workload

__all__ = ["Cluster", "InvalidPlan", "RoundScheduler", "RoundState", "job_rates", "run_rounds"]

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
        inter_node_factor: speed multiplier of a job whose GPUs span several nodes.
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
    spread = (alloc > 0).sum(axis=1) > 1
    locality = np.where(spread, cluster.inter_node_factor, 1.0)
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

    def gang_rates(self) -> FloatArray:
        """``(jobs, types)``: each job's rate with its whole demand on one node of each type."""
        gang = self.scaling.speed(self.model, self.demand.astype(np.float64))
        rates: FloatArray = gang[:, None] * self.speeds[self.model]
        return rates


@runtime_checkable
class RoundScheduler(Protocol):
    """The contract of a round policy.

    ``plan`` returns a ``(jobs, nodes)`` array of non-negative GPU counts with column sums
    within each node's GPUs and row sums within each job's demand; it may keep state in
    ``state.memo`` and must otherwise depend on the state only. ``round_s`` is the time
    between decisions; ``reacts`` asks for decisions at arrivals and completions too. A
    scheduler with a true ``shares_gpus`` attribute returns a ``(jobs, devices)`` 0/1 plan
    instead (module docstring).
    """

    @property
    def round_s(self) -> float: ...

    @property
    def reacts(self) -> bool: ...

    def plan(self, state: RoundState) -> IntArray: ...


class _Jobs:
    """Per-job state of one run, indexed by workload row."""

    def __init__(self, wl: Workload, cluster: Cluster, shares: bool) -> None:
        n, devices = len(wl), int(cluster.node_gpus.sum())
        self.rem = wl.service_s.copy()
        self.est = wl.estimated_service_s.copy()
        self.att = np.zeros(n)
        self.alloc = np.zeros((n, cluster.nodes), dtype=np.int64)
        self.place = np.zeros((n, devices if shares else 0), dtype=bool)
        self.surge = np.zeros_like(self.place)
        self.held = np.zeros(n)  # GPUs each job holds (row sums of alloc)
        self.alone = np.zeros(n)  # rate under the allocation, were the job alone on its GPUs
        self.base = np.zeros(n)  # rate under the allocation, ignoring restart pauses
        self.pause = np.zeros(n)
        self.started = np.zeros(n, dtype=bool)
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.preempt = np.zeros(n, dtype=np.int64)
        self.ran = np.zeros((2, n))  # seconds running, and the seconds alone that work needs
        self.seen = np.zeros((2, n))  # PCS's n_avg: sum of active counts and events seen
        self.used = np.zeros(devices if shares else cluster.nodes)  # devices ever / node peaks
        slos = wl.slos
        self.job_class = (slos.job_class if slos is not None
                          else np.full(n, BEST_EFFORT, dtype=np.int64))
        self.deadlines = (wl.arrival_s[:, None] + slos.deadlines_s if slos is not None
                          else np.zeros((n, 0)))
        self.rewards = slos.rewards if slos is not None else np.zeros((n, 0))


@dataclass
class _Run:
    """What one run shares between its steps."""

    wl: Workload
    cluster: Cluster
    speeds: FloatArray
    jobs: _Jobs
    sharing: SharingModel | None
    shares: bool
    rng: np.random.Generator
    memo: dict[str, Any]
    occupancy: tuple[float, float] = (0.0, np.nan)
    """GPUs occupied by the active jobs and their utilization summed (see :meth:`refresh`)."""

    def state(self, active: IntArray, now: float) -> RoundState:
        wl, jobs = self.wl, self.jobs
        return RoundState(
            now=now, cluster=self.cluster, rows=active.copy(), arrival_s=wl.arrival_s[active],
            demand=wl.gpus[active], min_gpus=wl.min_gpus[active],
            est_size=wl.estimated_service_s[active], est_remaining=jobs.est[active],
            attained=jobs.att[active], alloc=jobs.alloc[active], model=wl.model[active],
            job_class=jobs.job_class[active], deadlines_s=jobs.deadlines[active],
            rewards=jobs.rewards[active], scaling=wl.scaling, speeds=self.speeds,
            memo=self.memo, placed=jobs.place[active], sharing=self.sharing)

    def rerate(self, active: IntArray) -> None:
        """Rates of the active jobs under their placement and the surges drawn."""
        jobs = self.jobs
        slow = (self.sharing.slowdowns(active, jobs.place[active], jobs.surge[active])
                if self.sharing is not None and self.shares else 0.0)
        jobs.base[active] = jobs.alone[active] / (1.0 + slow)

    def apply(self, plan: IntArray, state: RoundState) -> None:
        """Adopt a checked plan at ``state.now``; draw the surges until the next decision."""
        active, now, jobs = state.rows, state.now, self.jobs
        if self.shares:
            placed = plan.astype(bool)
            changed = (placed != state.placed).any(axis=1)
            plan = self.cluster.on_nodes(placed)
            jobs.place[active] = placed
            jobs.used = np.maximum(jobs.used, placed.any(axis=0))
            if self.sharing is not None:
                jobs.surge[active] = self.sharing.draw_surges(self.rng, active, placed)
        else:
            changed = (plan != state.alloc).any(axis=1)
            jobs.used = np.maximum(jobs.used, plan.sum(axis=0))
        holds = plan.sum(axis=1) > 0
        was = jobs.started[active]
        jobs.preempt[active[changed & was]] += 1
        if self.cluster.restart_s > 0:
            jobs.pause[active[changed & was & holds]] = now + self.cluster.restart_s
        first = active[~was & holds]
        jobs.started[first] = True
        jobs.start[first] = now
        jobs.alloc[active] = plan
        jobs.held[active] = plan.sum(axis=1)
        jobs.alone[active] = state.rate(plan)
        self.rerate(active)
        self.refresh(active)

    def refresh(self, active: IntArray) -> None:
        """Recount :attr:`occupancy` (after a decision or a completion, the only changes):
        GPUs the active jobs occupy, and their utilization summed, capped at 1 per GPU (NaN
        without utilization data)."""
        jobs, sh = self.jobs, self.wl.sharing
        if not self.shares:
            used = float(jobs.held[active].sum())
            self.occupancy = used, (float(jobs.held[active] @ sh.gpu_util[active])
                                    if sh is not None else np.nan)
            return
        placed = jobs.place[active]
        self.occupancy = (float(placed.any(axis=0).sum()),
                          float(np.minimum(sh.gpu_util[active] @ placed, 1.0).sum())
                          if sh is not None else np.nan)


def _sharing_model(wl: Workload, cluster: Cluster, profile: ClusterProfile) -> SharingModel | None:
    if wl.sharing is None:
        return None
    matrix = (wl.interference.columns(cluster.types, wl.source)
              if wl.interference is not None else None)
    return SharingModel(
        jobs=wl.sharing, model=wl.model, device_node=cluster.device_node,
        device_type=cluster.node_type[cluster.device_node],
        device_mem_gib=cluster.node_mem_gib[cluster.device_node], matrix=matrix,
        curves=tuple(profile.slowdown_curves.get(t) for t in cluster.types),
        collision_slowdown=profile.collision_slowdown)


def _checked(plan: Any, state: RoundState, policy: RoundScheduler, shares: bool) -> IntArray:
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
    return out


def run_rounds(workload: Workload, profile: ClusterProfile, policy: RoundScheduler, *,
               seed: int = 0) -> SimulationResult:
    """Replay ``workload`` on ``profile`` under a round policy (semantics: module docstring).

    Args:
        workload, profile, policy: what to run.
        seed: seeds the memory-surge draws of jobs sharing GPUs.

    Raises:
        InvalidPlan: the policy over-allocated, or left jobs waiting with no decision due.
        InvalidWorkload: the workload has no speed for one of the profile's GPU types.
    """
    cpu0 = time.process_time()
    wl, cluster = workload, Cluster.from_profile(profile)
    table = wl.type_speed or TypeSpeeds.uniform(profile.relative_speed, len(wl.scaling.models))
    shares = bool(getattr(policy, "shares_gpus", False))
    run = _Run(wl, cluster, table.columns(cluster.types, wl.source),
               _Jobs(wl, cluster, shares), _sharing_model(wl, cluster, profile), shares,
               np.random.default_rng(seed), {})
    jobs = run.jobs
    n, nxt, now = len(wl), 0, 0.0
    active = np.zeros(0, dtype=np.int64)
    next_round, anchored = np.inf, False
    cum = np.zeros(2)  # active counts summed over events, events
    busy_s, util_s, events, series_t, series_busy = 0.0, 0.0, 0, [], []
    while nxt < n or active.size:
        rate = np.where(jobs.pause[active] > now, 0.0, jobs.base[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(rate > 0, jobs.rem[active] / rate, np.inf)
        paused = jobs.pause[active]
        t = min(wl.arrival_s[nxt] if nxt < n else np.inf, now + left.min(initial=np.inf),
                next_round, paused[paused > now].min(initial=np.inf))
        if t == np.inf:
            raise InvalidPlan(f"policy {type(policy).__name__} left {active.size} jobs without "
                              f"GPUs at t={now:g} s and no decision is due")
        dt = t - now
        if dt > 0 and active.size:
            work = rate * dt
            jobs.rem[active] -= work
            jobs.est[active] -= work
            jobs.att[active] += work
            running = rate > 0
            jobs.ran[0, active[running]] += dt
            jobs.ran[1, active[running]] += work[running] / jobs.alone[active[running]]
            used, util = run.occupancy
            busy_s += used * dt
            util_s += util * dt
            series_t.append(now)
            series_busy.append(used)
        now, events = t, events + 1
        done = left <= dt + 1e-9
        arrived = np.arange(nxt, np.searchsorted(wl.arrival_s, now, side="right"))
        nxt += arrived.size
        cum += (active.size + arrived.size, 1)
        gone = active[done]
        jobs.finish[gone] = now
        jobs.seen[:, gone] += cum[:, None]
        jobs.seen[:, arrived] -= (cum - (active.size + arrived.size, 1))[:, None]
        if gone.size:
            jobs.place[gone] = False
            if shares:
                run.rerate(active[~done])
            run.refresh(active[~done])
        active = np.concatenate([active[~done], arrived])
        if not active.size:
            next_round, anchored = np.inf, False
            continue
        due = not anchored or now >= next_round
        if due or (policy.reacts and (gone.size or arrived.size)):
            if due:
                next_round, anchored = now + policy.round_s, True
            state = run.state(active, now)
            run.apply(_checked(policy.plan(state), state, policy, shares), state)
            if nxt == n and not jobs.held[active].any():
                raise InvalidPlan(f"policy {type(policy).__name__} left {active.size} jobs "
                                  f"waiting on an idle cluster at t={now:g} s with no arrival "
                                  f"to come (can any of them ever be placed?)")
    with np.errstate(invalid="ignore", divide="ignore"):
        slowdown = np.where(jobs.ran[1] > 0, jobs.ran[0] / jobs.ran[1] - 1.0, 0.0)
    return SimulationResult(
        workload=wl, total_gpus=profile.total_gpus, start_s=jobs.start, finish_s=jobs.finish,
        pred_start_s=np.full(n, np.nan), pred_finish_s=np.full(n, np.nan),
        seen_avg=jobs.seen[0] / jobs.seen[1], preemptions=jobs.preempt, busy_gpu_s=busy_s,
        series_t=np.array(series_t), series_busy=np.array(series_busy), events=events,
        playout_events=0, cpu_s=time.process_time() - cpu0, slowdown=np.maximum(slowdown, 0.0),
        gpus_used=float(jobs.used.sum()), util_gpu_s=util_s if wl.sharing is not None
        else np.nan)
