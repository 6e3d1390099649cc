"""OJPP: opportunistic job placement on shared GPUs (papers/ojpp.md §4), and its baselines.

Every policy here decides at each arrival and completion (and every ``round_s``): running jobs
keep their devices; waiting jobs are taken in the policy's order and placed by
:func:`~policies.ojpp_placement.place_workers` (Algorithm 2) under the policy's bounds; a job
that does not fit waits for a later decision (no head-of-line blocking). They differ only in
bounds, device ranking and queue order (Table 4):

=========== ===================================== ================ ==============
policy      bounds                                device ranking   queue
=========== ===================================== ================ ==============
best-fit    compute, memory (eq. 3)               best fit         BFD
c-greedy    + collision tau-bar                   best fit         BFD
i-greedy    + interference theta-bar              best fit         BFD
b-greedy    + balance theta'                      best fit         BFD
ojpp-greedy all three (Algorithm 1)               lowest theta_k   BFD
ojpp        all three (Algorithm 3), Algorithm 4  lowest theta_k   gregariousness
=========== ===================================== ================ ==============

Choices the paper leaves open:

- BFD order: workers' compute need ``alpha`` descending (§4.2), ties by peak memory
  ``gamma + delta``, then arrival. The baselines rank devices by best fit (least capacity left,
  compute and memory shares summed), as "greedy based on best-fit" (§5.2); OJPP by the lowest
  resulting interference (Algorithm 2 line 6), best fit breaking ties.
- Gregariousness (eq. 20) is taken over the jobs waiting at this decision. Two workers
  collide with probability ``p_i p_q``, so ``tau(i, V) = p_i max_{q != i} p_q``: the re-sort
  before each pick (kept, as Algorithm 3 says) gives the same order as one sort up front.
- A job that found no room is retried only after some worker has left a device (every check
  only tightens as workers are added), which keeps long queues cheap.
- A device to open is one that hosted a job before if there is one (it costs no new bin),
  else the lowest-numbered empty device.
- Online adjustment (``ojpp`` only; off when ``migration_budget`` is 0): at each decision the
  observed interference of a device is the largest slowdown of the jobs on it over the last
  interval (a synchronous job's workers all progress at the job's rate), measured from their
  progress (collisions included); predicted by the sharing model at a job's first decision
  under this policy, or after a move that paused it. Its EWMA (eq. 18,
  kept in ``state.memo``) above ``theta_max`` triggers Algorithm 4
  (:func:`~policies.ojpp_placement.adjust`): migration cost ``c_i`` is the worker's base memory
  ``gamma`` in GiB (parameter size is what a checkpoint moves; §3.5 only says it is estimated
  offline), at most ``migration_budget`` GiB per adjustment. A migrated job pays the profile's
  restart overhead and counts a preemption.
- Without sharing columns in the workload, every worker gets a device of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import RoundPolicy, param, register
from policies.ojpp_placement import (
    EPS,
    Bounds,
    DeviceLoad,
    adjust,
    bfd_order,
    gregarious_order,
    place_workers,
)
from simulator.errors import InvalidWorkload
from simulator.rounds import RoundState
from simulator.sharing import SharingModel

__all__ = ["OJPP", "BGreedy", "BestFit", "CGreedy", "IGreedy", "OJPPGreedy"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _tau() -> Any:
    return param(0.1, low=0.0, high=1.0, help="collision probability bound tau-bar (eq. 14)")


def _theta() -> Any:
    return param(0.2, low=0.0, high=5.0, help="device interference bound theta-bar (eq. 15)")


def _balance() -> Any:
    return param(0.1, low=0.0, high=5.0,
                 help="max - min interference across a job's workers, theta' (eq. 16)")


@dataclass(frozen=True)
class _Packing(RoundPolicy):
    """Shared decision loop (module docstring); subclasses give bounds, ranking and order."""

    shares_gpus: ClassVar[bool] = True
    round_s: float = param(60.0, low=10.0, high=3600.0, searchable=False,
                           help="seconds between decisions besides arrivals and completions")

    @property
    def reacts(self) -> bool:
        """Decide at every arrival and completion."""
        return True

    def bounds(self) -> Bounds:
        """The checks each placement must pass."""
        return Bounds(rank_by_interference=False)

    def queue(self, sh: SharingModel, rows: IntArray, waiting: IntArray) -> IntArray:
        """The order in which waiting jobs (indices into the state) are placed."""
        return bfd_order(sh, rows, waiting)

    def rearrange(self, state: RoundState, placed: BoolArray, new_order: IntArray) -> BoolArray:
        """Move running jobs before placing the waiting ones (none by default)."""
        return placed

    def plan(self, state: RoundState) -> IntArray:
        """Keep running jobs, optionally rearrange, then place waiting jobs in order."""
        n = len(state)
        d = (state.placed.shape[1] if state.placed.shape[0] == n
             else int(state.cluster.node_gpus.sum()))
        placed = (state.placed.astype(bool) if state.placed.shape[0] == n
                  else np.zeros((n, d), dtype=bool))
        used = state.memo.setdefault("ojpp_used", np.zeros(d, dtype=bool))
        used |= placed.any(axis=0)
        new_order = np.argsort(~used, kind="stable")
        sh = state.sharing
        if sh is None:
            placed = _dedicated(placed, state.demand, new_order)
        else:
            _check_fits(sh, state, self.bounds().alpha_cap)
            placed = self.rearrange(state, placed, new_order)
            blocked, failed = _still_blocked(state, placed), set()
            bounds = self.bounds()
            for j in self.queue(sh, state.rows, np.flatnonzero(~placed.any(axis=1))):
                row = int(state.rows[j])
                devices = None if row in blocked else place_workers(
                    sh, DeviceLoad.of(sh, state.rows, placed), row, int(state.demand[j]),
                    bounds, new_order=new_order)
                if devices is None:
                    failed.add(row)
                else:
                    placed[j, devices] = True
            state.memo["ojpp_blocked"] = (state.rows.copy(), placed.copy(), failed)
        used |= placed.any(axis=0)
        return placed.astype(np.int64)


def _dedicated(placed: BoolArray, demand: IntArray, new_order: IntArray) -> BoolArray:
    """Waiting jobs in arrival order, each worker on an empty device of its own."""
    out = placed.copy()
    free = [int(k) for k in new_order if not out[:, k].any()]
    for j in np.flatnonzero(~out.any(axis=1)):
        g = int(demand[j])
        if g <= len(free):
            out[j, free[:g]] = True
            free = free[g:]
    return out


def _still_blocked(state: RoundState, placed: BoolArray) -> set[int]:
    """Workload rows that found no room at the last decision, if no worker has left a device
    since (every check only tightens as workers are added, so they would fail again)."""
    last = state.memo.get("ojpp_blocked")
    if last is None:
        return set()
    rows0, placed0, failed = last
    index = {int(r): i for i, r in enumerate(state.rows)}
    for i in np.flatnonzero(placed0.any(axis=1)):
        j = index.get(int(rows0[i]))
        if j is None or (placed0[i] & ~placed[j]).any():
            return set()
    out: set[int] = failed
    return out


def _check_fits(sh: SharingModel, state: RoundState, alpha_cap: float) -> None:
    """Refuse a job whose worker fits no device even alone (it would wait forever)."""
    J, rows = sh.jobs, state.rows
    peak = J.mem_gib[rows] + J.surge_gib[rows]
    fits = ((peak[:, None] <= sh.device_mem_gib[None, :] + EPS / 10)
            & (J.gpu_util[rows] <= alpha_cap + EPS)[:, None]).sum(axis=1)
    bad = np.flatnonzero(fits < state.demand)
    if bad.size:
        j = int(bad[0])
        raise InvalidWorkload(f"workload row {rows[j]}: {state.demand[j]} workers needing "
                              f"{peak[j]:g} GiB (base + surge) and compute "
                              f"{J.gpu_util[rows[j]]:g} fit on only {fits[j]} devices, even "
                              f"alone")


@register
@dataclass(frozen=True)
class BestFit(_Packing):
    """Two-dimensional best fit (compute, memory), no interference or collision checks."""

    name: ClassVar[str] = "best-fit"
    summary: ClassVar[str] = "best-fit packing of workers on shared GPUs (OJPP's baseline)"


@register
@dataclass(frozen=True)
class CGreedy(_Packing):
    """Best fit with OJPP's collision bound only."""

    name: ClassVar[str] = "c-greedy"
    summary: ClassVar[str] = "best-fit sharing with a memory-collision bound (OJPP baseline)"
    tau_max: float = _tau()

    def bounds(self) -> Bounds:
        """Collision bound only."""
        return Bounds(tau_max=self.tau_max, rank_by_interference=False)


@register
@dataclass(frozen=True)
class IGreedy(_Packing):
    """Best fit with OJPP's device interference bound only."""

    name: ClassVar[str] = "i-greedy"
    summary: ClassVar[str] = "best-fit sharing with an interference bound (OJPP baseline)"
    theta_max: float = _theta()

    def bounds(self) -> Bounds:
        """Interference bound only."""
        return Bounds(theta_max=self.theta_max, rank_by_interference=False)


@register
@dataclass(frozen=True)
class BGreedy(_Packing):
    """Best fit with OJPP's per-job balance bound only."""

    name: ClassVar[str] = "b-greedy"
    summary: ClassVar[str] = "best-fit sharing with a worker-balance bound (OJPP baseline)"
    theta_balance: float = _balance()

    def bounds(self) -> Bounds:
        """Balance bound only."""
        return Bounds(theta_balance=self.theta_balance, rank_by_interference=False)


@register
@dataclass(frozen=True)
class OJPPGreedy(_Packing):
    """OJPP's Greedy (Algorithm 1): BFD queue, every bound, lowest interference first."""

    name: ClassVar[str] = "ojpp-greedy"
    summary: ClassVar[str] = "OJPP greedy: best-fit decreasing within collision/interference bounds"
    tau_max: float = _tau()
    theta_max: float = _theta()
    theta_balance: float = _balance()

    def bounds(self) -> Bounds:
        """All of OJPP's bounds, ranking devices by the interference they would have."""
        return Bounds(tau_max=self.tau_max, theta_max=self.theta_max,
                      theta_balance=self.theta_balance)


@register
@dataclass(frozen=True)
class OJPP(OJPPGreedy):
    """OJPP's Heuristic (Algorithm 3) with online adjustment (Algorithm 4)."""

    name: ClassVar[str] = "ojpp"
    summary: ClassVar[str] = ("OJPP heuristic: gregariousness order, interference bounds, "
                              "EWMA-triggered migrations")
    ewma_a: float = param(0.5, low=0.0, high=1.0,
                          help="weight of the past in the interference EWMA (eq. 18)")
    migration_budget: float = param(8.0, low=0.0, high=100.0,
                                    help="GiB of worker state migrated per adjustment, c-bar "
                                         "(eq. 19); 0: no adjustment")

    def queue(self, sh: SharingModel, rows: IntArray, waiting: IntArray) -> IntArray:
        """BFD, then re-sorted by gregariousness before each pick (Algorithm 3)."""
        return gregarious_order(sh.jobs.surge_p[rows], bfd_order(sh, rows, waiting))

    def rearrange(self, state: RoundState, placed: BoolArray, new_order: IntArray) -> BoolArray:
        """Update the interference EWMA; past ``theta_max`` anywhere, run Algorithm 4."""
        assert state.sharing is not None
        observed = observed_interference(state, placed)
        prev = state.memo.get("ojpp_ewma", np.zeros_like(observed))
        ewma = np.where(placed.any(axis=0), self.ewma_a * prev + (1 - self.ewma_a) * observed,
                        0.0)
        state.memo["ojpp_ewma"] = ewma
        if self.migration_budget > 0 and (ewma > self.theta_max + EPS).any():
            placed, moves, spent = adjust(state.sharing, state.rows, placed, ewma,
                                          self.bounds(), self.migration_budget,
                                          new_order=new_order)
            state.memo["ojpp_moves"] = state.memo.get("ojpp_moves", 0) + len(moves)
            state.memo["ojpp_migrated_gib"] = state.memo.get("ojpp_migrated_gib", 0.0) + spent
        return placed

    def plan(self, state: RoundState) -> IntArray:
        """Algorithm 3 after the adjustment; remembers progress for the next observation."""
        out = super().plan(state)
        if state.sharing is not None:
            state.memo["ojpp_last"] = (state.now, state.rows.copy(), state.attained.copy(),
                                       out.astype(bool), (out != state.placed).any(axis=1)
                                       if state.placed.shape == out.shape
                                       else np.ones(len(state), dtype=bool))
        return out


def observed_interference(state: RoundState, placed: BoolArray) -> FloatArray:
    """``(devices,)`` the largest slowdown of the jobs on each device since the last decision.

    Measured from progress (``alone rate x elapsed / work done - 1``) for jobs that kept their
    placement over the whole interval; predicted (:meth:`SharingModel.slowdowns`, no surges)
    for the others, and for all on a first decision.
    """
    assert state.sharing is not None
    slow = state.sharing.slowdowns(state.rows, placed)
    last = state.memo.get("ojpp_last")
    if last is not None and state.now > last[0]:
        t0, rows0, done0, placed0, moved0 = last
        index = {int(r): i for i, r in enumerate(rows0)}
        pos = np.array([index.get(int(r), -1) for r in state.rows], dtype=np.int64)
        seen = pos >= 0
        pos = np.maximum(pos, 0)
        same = seen & (placed0[pos] == placed).all(axis=1) & placed.any(axis=1)
        if state.cluster.restart_s > 0:
            same &= ~moved0[pos]
        alone = state.rate(state.alloc) * (state.now - t0)
        work = state.attained - done0[pos]
        good = same & (work > 0) & (alone > 0)
        slow[good] = np.maximum(alone[good] / work[good] - 1.0, 0.0)
    out: FloatArray = np.where(placed, slow[:, None], 0.0).max(axis=0, initial=0.0)
    return out

