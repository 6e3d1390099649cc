"""Horus: interference-aware GPU co-location (papers/horus.md §4.2; SPEC §3.5), and the
baselines of its evaluation (§5.2): FIFO on exclusive GPUs, opportunistic bin packing (OBP) and
performance-aware bin packing (PAB).

All four place workers on devices (``shares_gpus``) and decide at arrivals and completions;
all but FIFO read each job's predicted utilization and memory from the workload's sharing
columns. None moves a running job, except PAB's evictions.

**horus** (Algorithm 1), also deciding every ``round_s``. The pending jobs are clustered into
``k_queues`` queues by k-means over (workers, utilization, GPUs per worker = 1, base memory),
standardized; queue ``x`` weighs ``w_x = max(len, median wait [s] x len)`` and puts
``round(beta w_x / sum w)`` of its oldest jobs into the buffer. Each buffered job, oldest
first, takes the ``demand`` cheapest devices (eq. 7-10: ``w_mem (used + mem_j) / capacity +
w_util f_type(used_util + util_j)``) among those passing the capacity check: the worker fits
the memory (OJPP eq. 3, as the engine enforces) and the cumulative utilization stays within
``overcommit_limit``. A job that does not fit waits; the jobs behind it still try. Horus
penalizes over-commitment in its cost but gives no hard limit; the default 1.0 is this
project's, measured: read as a JCT ratio, the RTX 2080 fit makes two jobs past u = 1.31 do
less work together than one alone, and on the testbed-style batches of
``benchmarks/bench_colocation.py`` a limit of 1.0 cut the makespan vs FIFO by 25.6 % / 18.2 %
(W-Small / W-Large) against 15.5 % / 1.3 % at 1.5. The search tunes it.

Where the paper leaves a choice open, this module takes:

- k-means: SciPy's ``kmeans2``, Euclidean (the paper names L1), k-means++ seeded from a fixed
  generator so decisions are deterministic; recomputed only when the pending jobs change.
- Counts: rounding half up; an excess over ``beta`` is taken back from the queues rounded up
  most; slots a queue is too short to fill go to the others by weight, so ``min(beta,
  pending)`` jobs enter the buffer (at most ``beta`` pending: all of them, unclustered). One
  buffer per decision.
- Cost: used memory is the base memory ``gamma`` (eq. 2; surges only enter the capacity
  check); ties go to the lower device number; types without a fitted curve cost their
  cumulative utilization (§3.2's proxy) and are not shared. With a workload interference
  matrix, ``f`` is the predicted slowdown of the worst worker on the device after placing.
  Line 11's σ-node test holds for any ``demand`` distinct devices, so it needs no check.

**fifo-exclusive**: arrival order onto idle devices only, never co-locating; the first job
that does not fit blocks the rest (YARN-CS's node choice, then the node's lowest idle devices).

**obp**: arrival order, each job onto the devices where its memory fits (eq. 3), least base
memory used first; no utilization bound; a job that does not fit does not block the rest.

**pab**: OBP, plus every ``round_s`` and decision: once every job on a job's devices has run
``warmup_s`` where it is, a job slowed beyond ``max_slowdown`` is evicted (the most recently
placed first, re-checking after each) and re-queued behind the jobs already waiting; it is
placed again from the next decision on and keeps its progress (the engine charges the
restart). Horus's "performance drops by 50 percent" is a slowdown of 1.0 in this project's
terms (``(t_shared - t_alone) / t_alone``), the default bound.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy, param, register
from policies.gangs import place_gang
from simulator.errors import InvalidWorkload
from simulator.rounds import RoundState
from simulator.sharing import SharingModel

__all__ = ["OBP", "PAB", "FifoExclusive", "Horus", "Usage", "cluster_queues", "fair_buffer",
           "horus_costs", "pick_devices", "queue_counts", "queue_weights", "require_sharing"]

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


def horus_costs(usage: Usage, sh: SharingModel, i: int, w_mem: float,
                w_util: float) -> FloatArray:
    """Eq. 7-10: ``w_mem (used_mem + mem_j) / cap + w_util f_type(used_util + util_j)`` on
    every device. Types without a fitted curve cost their cumulative utilization (§3.2's
    proxy); with an interference matrix, ``f`` is the worst predicted worker slowdown."""
    r = usage.state.rows[i]
    mem_cost = (usage.mem + sh.jobs.mem_gib[r]) / sh.device_mem_gib
    if sh.matrix is not None:
        trial = usage.plan.astype(bool)
        trial[i] = True  # slowdowns on one device do not depend on the others
        slow: FloatArray = sh.worker_slowdowns(usage.state.rows, trial).max(axis=0)
    else:
        u = usage.util + sh.jobs.gpu_util[r]
        slow = u.copy()
        for t, curve in enumerate(sh.curves):
            on = sh.device_type == t
            if curve is not None and on.any():
                slow[on] = curve(u[on])
    out: FloatArray = w_mem * mem_cost + w_util * slow
    return out


def queue_weights(lengths: IntArray, median_wait_s: FloatArray) -> FloatArray:
    """§4.2.2: ``w_x = max(len, median wait x len)`` (waits in seconds)."""
    out: FloatArray = np.maximum(lengths, median_wait_s * lengths).astype(np.float64)
    return out


def queue_counts(weights: FloatArray, lengths: IntArray, beta: int) -> IntArray:
    """Jobs taken from each queue: ``round(beta w_x / sum w)`` (half up), within the queue's
    length and ``beta`` in all; spare slots go to queues with jobs left, heaviest first."""
    raw = beta * weights / weights.sum()
    counts = np.minimum(np.floor(raw + 0.5), lengths).astype(np.int64)
    while counts.sum() > beta:
        counts[np.argmax(np.where(counts > 0, counts - raw, -np.inf))] -= 1
    spare = min(beta, int(lengths.sum())) - int(counts.sum())
    for q in np.argsort(-weights, kind="stable"):
        take = min(spare, int(lengths[q] - counts[q]))
        counts[q] += take
        spare -= take
    out: IntArray = counts
    return out


def cluster_queues(features: FloatArray, k: int) -> IntArray:
    """Queue of each job: k-means (k-means++ seeded from a fixed generator, so deterministic)
    on standardized features; labels 0..k'-1 with k' <= k non-empty queues."""
    scale = features.std(axis=0)
    z = (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    k = min(k, int(np.unique(z, axis=0).shape[0]))
    if k <= 1:
        return np.zeros(features.shape[0], dtype=np.int64)
    from scipy.cluster.vq import kmeans2

    with warnings.catch_warnings():  # an emptied cluster is dropped below
        warnings.simplefilter("ignore", UserWarning)
        labels = kmeans2(z, k, iter=20, minit="++", seed=np.random.default_rng(0))[1]
    compact: IntArray = np.unique(labels, return_inverse=True)[1].astype(np.int64)
    return compact


def fair_buffer(labels: IntArray, wait_s: FloatArray, beta: int) -> IntArray:
    """Algorithm 1 line 4: which pending jobs (given oldest first, with their queues) enter the
    buffer, as positions in arrival order."""
    if not labels.size:
        return np.zeros(0, dtype=np.int64)
    queues = [np.flatnonzero(labels == q) for q in range(int(labels.max()) + 1)]
    lengths = np.array([q.size for q in queues], dtype=np.int64)
    medians = np.array([np.median(wait_s[q]) for q in queues])
    counts = queue_counts(queue_weights(lengths, medians), lengths, beta)
    return np.sort(np.concatenate([q[:c] for q, c in zip(queues, counts, strict=True)]))


def _horus_choice(usage: Usage, i: int, *, sh: SharingModel, policy: Horus) -> IntArray | None:
    r = usage.state.rows[i]
    ok = usage.fits(i) & (usage.util + sh.jobs.gpu_util[r] <= policy.overcommit_limit + 1e-12)
    cost = np.where(ok, horus_costs(usage, sh, i, policy.w_mem, policy.w_util), np.inf)
    return pick_devices(cost, int(usage.state.demand[i]))


def _least_memory(usage: Usage, i: int) -> IntArray | None:
    """OBP: devices where the worker fits, least base memory used first."""
    return pick_devices(np.where(usage.fits(i), usage.mem, np.inf), int(usage.state.demand[i]))


def _idle_gang(usage: Usage, i: int) -> IntArray | None:
    """FIFO: idle devices only, on the nodes YARN-CS would choose (:func:`place_gang`)."""
    cluster, idle = usage.state.cluster, usage.count == 0
    per_node = place_gang(np.add.reduceat(idle.astype(np.int64), cluster.node_first),
                          int(usage.state.demand[i]))
    if per_node is None:
        return None
    return np.concatenate([np.flatnonzero(idle & (cluster.device_node == k))[:g]
                           for k, g in enumerate(per_node) if g > 0])


def _pending(state: RoundState) -> IntArray:
    out: IntArray = np.flatnonzero(~state.placed.any(axis=1))
    return out


@dataclass(frozen=True)
class _Colocating(RoundPolicy):
    """Shared by the policies here: device plans, decisions at arrivals and completions."""

    shares_gpus: ClassVar[bool] = True

    @property
    def reacts(self) -> bool:
        """Decide at arrivals and completions."""
        return True

    @property
    def round_s(self) -> float:
        """No rounds: decisions at arrivals and completions only."""
        return math.inf


@register
@dataclass(frozen=True)
class Horus(_Colocating):
    """Horus (papers/horus.md Algorithm 1): weighted fair queues, cheapest top-λ devices."""

    name: ClassVar[str] = "horus"
    summary: ClassVar[str] = "interference-aware co-location: fair queues, eq. 7 cost (Horus)"
    w_mem: float = param(0.5, low=0.0, high=1.0, help="weight of GPU memory in the cost (ω1)")
    w_util: float = param(0.5, low=0.0, high=1.0,
                          help="weight of the utilization slowdown in the cost (ω2)")
    k_queues: int = param(3, low=1, high=8, kind="int",
                          help="k-means queues of pending jobs (1: no fairness queues)")
    buffer: int = param(15, low=1, high=100, kind="int", help="jobs considered per decision (β)")
    overcommit_limit: float = param(1.0, low=1.0, high=3.0,
                                    help="max cumulative GPU utilization on a device")
    round_s: float = param(60.0, low=1.0, high=3600.0, searchable=False,
                           help="seconds between decisions")

    def plan(self, state: RoundState) -> IntArray:
        """Keep placed jobs; place the buffer's jobs on their cheapest feasible devices."""
        sh = require_sharing(state, self.name)
        usage, pending = Usage.of(state), _pending(state)
        labels = (self._queues(state, sh, pending) if pending.size > self.buffer
                  else np.zeros(pending.size, dtype=np.int64))  # all fit the buffer anyway
        chosen = fair_buffer(labels, state.now - state.arrival_s[pending], self.buffer)
        return greedy(usage, pending[chosen], partial(_horus_choice, sh=sh, policy=self))

    def _queues(self, state: RoundState, sh: SharingModel, pending: IntArray) -> IntArray:
        """Algorithm 1 line 2, cached in the memo while the pending jobs stay the same."""
        rows = state.rows[pending]
        key = (self.k_queues, tuple(rows.tolist()))
        cached = state.memo.get("horus_queues")
        if cached is not None and cached[0] == key:
            labels: IntArray = cached[1]
            return labels
        features = np.column_stack([state.demand[pending], sh.jobs.gpu_util[rows],
                                    np.ones(pending.size), sh.jobs.mem_gib[rows]])
        labels = cluster_queues(features, self.k_queues)
        state.memo["horus_queues"] = (key, labels)
        return labels


@register
@dataclass(frozen=True)
class FifoExclusive(_Colocating):
    """Horus §5.2's FIFO: arrival order onto idle GPUs, no co-location, head-of-line blocking."""

    name: ClassVar[str] = "fifo-exclusive"
    summary: ClassVar[str] = "FIFO onto idle GPUs, never co-locating (Horus's FIFO baseline)"

    def plan(self, state: RoundState) -> IntArray:
        """Start waiting jobs in arrival order until the first that finds too few idle GPUs."""
        return greedy(Usage.of(state), _pending(state), _idle_gang, blocking=True)


@register
@dataclass(frozen=True)
class OBP(_Colocating):
    """Horus §5.2's opportunistic bin packing: memory fit only, least-loaded devices first."""

    name: ClassVar[str] = "obp"
    summary: ClassVar[str] = "opportunistic bin packing by GPU memory (Horus's OBP baseline)"

    def plan(self, state: RoundState) -> IntArray:
        """Place waiting jobs in arrival order wherever their memory fits."""
        require_sharing(state, self.name)
        return greedy(Usage.of(state), _pending(state), _least_memory)


@register
@dataclass(frozen=True)
class PAB(_Colocating):
    """Horus §5.2's performance-aware bin packing: OBP, evicting jobs slowed past a bound."""

    name: ClassVar[str] = "pab"
    summary: ClassVar[str] = "bin packing that re-queues jobs slowed past a bound (Horus's PAB)"
    warmup_s: float = param(60.0, low=0.0, high=600.0,
                            help="seconds a placement runs before its slowdown is judged")
    max_slowdown: float = param(1.0, low=0.05, high=10.0,
                                help="evict above this (t_shared - t_alone) / t_alone; "
                                     "1.0 = steps/s halved, Horus's 50 % drop")
    round_s: float = param(60.0, low=1.0, high=3600.0, searchable=False,
                           help="seconds between slowdown checks")

    def plan(self, state: RoundState) -> IntArray:
        """Evict jobs over the bound, then pack the queue (evicted jobs at its tail)."""
        sh = require_sharing(state, self.name)
        placed_at: dict[int, float] = state.memo.setdefault("pab_placed_at", {})
        queued_at: dict[int, float] = state.memo.setdefault("pab_queued_at", {})
        rows, now = state.rows.tolist(), state.now
        held = (state.placed.sum(axis=1) > 0).tolist()
        since = np.array([placed_at.setdefault(r, now) if h else now
                          for r, h in zip(rows, held, strict=True)])
        keep = state.placed.copy()
        for i in self._evictions(state, sh, keep, since):
            queued_at[rows[i]] = now
        waiting = [i for i in np.flatnonzero(~keep.any(axis=1))
                   if queued_at.get(rows[i], -math.inf) < now]
        order = np.array(sorted(waiting, key=lambda i: (  # by when each (re)joined the queue
            queued_at.get(rows[i], state.arrival_s[i]), state.arrival_s[i], i)), dtype=np.int64)
        plan = greedy(Usage.of(state, keep), order, _least_memory)
        for j in np.flatnonzero((plan != state.placed).any(axis=1) & plan.any(axis=1)):
            placed_at[rows[j]] = now
        return plan

    def _evictions(self, state: RoundState, sh: SharingModel, keep: BoolArray,
                   since: FloatArray) -> list[int]:
        """Jobs to evict, one at a time: among settled jobs over the bound, the latest placed
        (then the most slowed, then the latest to arrive). ``keep`` is updated in place."""
        fresh = since > state.now - self.warmup_s
        out: list[int] = []
        while True:
            unsettled = (keep & fresh[:, None]).sum(axis=0) > 0
            settled = keep.any(axis=1) & ~(keep & unsettled[None, :]).any(axis=1)
            slow = sh.slowdowns(state.rows, keep)
            bad = np.flatnonzero(settled & (slow > self.max_slowdown))
            if not bad.size:
                return out
            worst = int(bad[np.lexsort((bad, slow[bad], since[bad]))[-1]])
            keep[worst] = False
            out.append(worst)
