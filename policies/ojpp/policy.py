"""OJPP: opportunistic job placement on shared GPUs (papers/ojpp.md §4), and its baselines.

Every policy here decides, in one compiled kernel, at each arrival and completion (and every
``round_s``): running jobs keep their devices; waiting jobs are taken in the policy's order and
placed by :func:`~policies.ojpp.placement.place_pack` (Algorithm 2) under the policy's bounds;
a job that does not fit waits for a later decision (no head-of-line blocking). They differ only
in bounds, device ranking and queue order (Table 4):

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
  only tightens as workers are added), which keeps long queues cheap. So a decision with no
  arrival or completion changes nothing, and the engine skips those round boundaries
  (``memory.quiet``), except for ``ojpp`` with a migration budget, which observes every one.
- A device to open is one that hosted a job before if there is one (it costs no new bin),
  else the lowest-numbered empty device.
- Online adjustment (``ojpp`` only; off when ``migration_budget`` is 0): at each decision the
  observed interference of a device is the largest slowdown of the jobs on it over the last
  interval (a synchronous job's workers all progress at the job's rate), measured from their
  progress (collisions included); predicted by the sharing model at a job's first decision
  under this policy, or after a move that paused it. Its EWMA (eq. 18,
  kept in the kernel's memory) above ``theta_max`` triggers Algorithm 4
  (:func:`~policies.ojpp.placement.adjust_pack`): migration cost ``c_i`` is the worker's base
  memory ``gamma`` in GiB (parameter size is what a checkpoint moves; §3.5 only says it is estimated
  offline), at most ``migration_budget`` GiB per adjustment. A migrated job pays the profile's
  restart overhead and counts a preemption.
- Without sharing columns in the workload, every worker gets a device of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.ojpp.pack import Pack, cache_slowdowns, resum
from policies.ojpp.placement import (
    EPS,
    N_BOUNDS,
    THETA,
    Bounds,
    adjust_pack,
    bfd_order,
    gregarious_order,
    place_pack,
)
from policies.round_kernel import KernelRoundPolicy
from simulator.errors import InvalidWorkload
from simulator.jit import configure_cache, njit, njit_lazily
from simulator.rounds.view import (
    PLAN,
    ROUND_KERNEL_SIG,
    ClusterArrays,
    JobView,
    Layout,
    PolicyMemory,
    active_rows,
    empty_memory,
    touch,
)

configure_cache()

__all__ = ["OJPP", "BGreedy", "BestFit", "CGreedy", "IGreedy", "OJPPGreedy"]

FloatArray = npt.NDArray[np.float64]

GREG, EWMA_A, BUDGET = N_BOUNDS, N_BOUNDS + 1, N_BOUNDS + 2
"""Parameters after the bounds vector: gregarious queue (1) or BFD (0), the EWMA's weight of
the past and the migration budget (0: no adjustment)."""
F = Layout(att0=1, seen=1)
"""Per-row floats: work attained at the last decision, and that decision's time if it saw the
row."""
I = Layout(failed=1, moved=1, touch=1)
"""Per-row ints: found no room at the last decision; placement changed by the last decision;
placed or moved by this one."""
G = Layout(devices=0)
"""Global floats, sized by the devices: the blocks of :data:`PER_DEVICE`, then the last
decision's time."""
PER_DEVICE = Layout(opened=1, ewma=1)
"""Blocks of ``g`` of one entry per device each (block ``B`` starts at ``B x D``): the device
hosted a job; its interference EWMA. The last decision's time follows, at ``G_DECIDED x D``."""
GI = Layout(have_last=1, n_placed=1, settled=1, still=0)
"""Global ints: a decision with sharing happened; the rows it left with workers; it changed
no placement; from ``STILL`` on, per device, Algorithm 4 tried it on the placement in force and
moved nothing (``adjust_pack``'s ``still``)."""
F_ATT0, F_SEEN = F.ATT0, F.SEEN
I_FAILED, I_MOVED, I_TOUCH = I.FAILED, I.MOVED, I.TOUCH
G_OPENED, G_EWMA, G_DECIDED = PER_DEVICE.OPENED, PER_DEVICE.EWMA, PER_DEVICE.width
HAVE_LAST, N_PLACED, SETTLED, STILL = GI.HAVE_LAST, GI.N_PLACED, GI.SETTLED, GI.STILL
_INF = np.inf


@njit
def _pack(C: Any, J: Any, M: Any, E: Any) -> Any:
    """The plan in force as a :data:`Pack` over workload rows; a job's devices are its plan
    rows ``M.out_wdev``, so placements write the plan. A device holds at most one worker of
    each active job."""
    D, n = C.device_node.shape[0], active_rows(E).shape[0]
    cnt = np.zeros(D, dtype=np.int64)
    members = np.empty((D, max(n, 1)), dtype=np.int64)
    for d in range(D):
        for x in range(E.dev_start[d], E.dev_start[d + 1]):  # arrival order
            members[d, cnt[d]] = J.wrow[E.dev_rows[x]]
            cnt[d] += 1
    P = Pack(E.pos, J.util, J.mem, J.surge_gib, J.surge_p, J.model, C.device_type,
             C.device_mem, C.shareable, C.matrix, C.curves, C.has_matrix, np.zeros(D),
             np.zeros(D), np.zeros(D), cnt, members, M.out_nw, J.woff, M.out_wdev,
             np.zeros(M.out_wdev.shape[0]), np.empty(n + 1, dtype=np.int64), np.empty(n + 1))
    for d in range(D):
        resum(P, d)
    cache_slowdowns(P)
    return P


@njit
def _observed(C: Any, J: Any, M: Any, E: Any, P: Any, now: float) -> Any:
    """``(devices,)`` the largest slowdown of the jobs on each device since the last decision:
    measured from progress (``alone rate x elapsed / work done - 1``) for jobs that kept
    their placement over the whole interval (and were not restarted by the last decision if
    restarts cost time); predicted (worker slowdowns, no collisions) for the others, and for
    all on a first decision."""
    D = C.device_node.shape[0]
    t0 = M.g[G_DECIDED * D]
    have = M.gi[HAVE_LAST] == 1 and now > t0
    out = np.zeros(D)
    for r in active_rows(E):
        s0, s1 = J.woff[r], J.woff[r] + M.out_nw[r]
        slow = 0.0
        for s in range(s0, s1):
            slow = max(slow, P.wsd[s])
        if have and s1 > s0 and M.f[r, F_SEEN] == t0 and (
                C.restart_s <= 0 or M.i[r, I_MOVED] == 0):
            alone = J.alone[r] * (now - t0)
            work = J.att[r] - M.f[r, F_ATT0]
            if work > 0 and alone > 0:
                slow = max(alone / work - 1.0, 0.0)
        for s in range(s0, s1):
            out[M.out_wdev[s]] = max(out[M.out_wdev[s]], slow)
    return out


@njit
def _rearrange(C: Any, J: Any, M: Any, E: Any, P: Any, now: float, opening: Any) -> int:
    """``ojpp``'s online adjustment: update the interference EWMA (eq. 18); past
    ``theta_max`` anywhere, Algorithm 4. Returns the number of workers moved."""
    D = C.device_node.shape[0]
    observed = _observed(C, J, M, E, P, now)
    ewma, a = M.g[G_EWMA * D:G_EWMA * D + D], M.params[EWMA_A]
    over = False
    for d in range(D):
        ewma[d] = a * ewma[d] + (1 - a) * observed[d] if P.cnt[d] > 0 else 0.0
        over = over or ewma[d] > M.params[THETA] + EPS
    if not over:
        return 0
    moves = np.empty((D, 3), dtype=np.int64)
    n = adjust_pack(P, M.params[:N_BOUNDS], ewma, M.params[BUDGET], opening, moves, M.gi[STILL:])[0]
    for y in range(n):
        M.i[moves[y, 0], I_TOUCH] = 1
    return n


@njit
def _place_waiting(C: Any, J: Any, M: Any, E: Any, P: Any, opening: Any, same: bool) -> None:
    """Waiting jobs in the policy's order, each where Algorithm 2 puts it; a job that found
    no room last time is skipped while no worker has left a device since (``same``)."""
    D = C.device_node.shape[0]
    rows = active_rows(E)
    waiting = np.empty(rows.shape[0], dtype=np.int64)
    n, tries = 0, False
    for r in rows:
        if M.out_nw[r] == 0:
            waiting[n] = r
            n += 1
            tries = tries or not (same and M.i[r, I_FAILED] == 1)
    if not tries:
        return
    queue = bfd_order(J.util, J.mem, J.surge_gib, waiting[:n])
    if M.params[GREG] > 0:
        queue = gregarious_order(J.surge_p, queue)
    allowed, none = np.ones(D, dtype=np.bool_), np.empty(0, dtype=np.int64)
    chosen = np.empty(D, dtype=np.int64)
    for r in queue:
        if not (same and M.i[r, I_FAILED] == 1) and place_pack(
                P, M.params[:N_BOUNDS], r, J.demand[r], opening, allowed, none, chosen):
            M.i[r, I_TOUCH] = 1


@njit
def _share(C: Any, J: Any, M: Any, E: Any, now: float, opening: Any) -> None:
    """A decision on shared devices (module docstring); writes the plan and the memory."""
    D = C.device_node.shape[0]
    rows = active_rows(E)
    P = _pack(C, J, M, E)
    placed = 0
    for r in rows:
        M.i[r, I_TOUCH] = 0
        placed += M.out_nw[r] > 0
    kept = M.gi[HAVE_LAST] == 1 and placed == M.gi[N_PLACED]  # no worker left a device
    if not (kept and M.gi[SETTLED] == 1):
        M.gi[STILL:] = 0
    moved = _rearrange(C, J, M, E, P, now, opening) if M.params[BUDGET] > 0 else 0
    _place_waiting(C, J, M, E, P, opening, kept and moved == 0)
    placed, settled = 0, True
    for r in rows:
        lo, hi = J.woff[r], J.woff[r] + M.out_nw[r]
        changed = False
        if M.i[r, I_TOUCH]:
            M.out_wdev[lo:hi] = np.sort(M.out_wdev[lo:hi])
            changed = bool(M.out_nw[r] != J.nw[r]
                           or np.any(M.out_wdev[lo:hi] != J.wdev[lo:hi]))
            if changed:
                touch(M, r)
        M.i[r, I_MOVED] = changed
        settled = settled and not changed
        M.i[r, I_FAILED] = hi == lo
        placed += hi > lo
        M.f[r, F_ATT0], M.f[r, F_SEEN] = J.att[r], now
    for d in range(D):
        if P.cnt[d] > 0:
            M.g[G_OPENED * D + d] = 1.0
    M.g[G_DECIDED * D] = now
    M.gi[HAVE_LAST], M.gi[N_PLACED], M.gi[SETTLED] = 1, placed, settled
    if M.params[BUDGET] <= 0:
        M.quiet[0] = _INF  # the same decision until a job arrives or finishes


@njit
def _dedicated(C: Any, J: Any, M: Any, E: Any, opening: Any) -> None:
    """Without sharing columns: waiting jobs in arrival order, each worker on an empty
    device of its own (those that hosted a job first)."""
    D = opening.shape[0]
    free = np.empty(D, dtype=np.int64)
    n = 0
    for d in opening:
        if E.dev_start[d + 1] == E.dev_start[d]:
            free[n] = d
            n += 1
    taken = 0
    for r in active_rows(E):
        g = J.demand[r]
        if M.out_nw[r] == 0 and g <= n - taken:
            M.out_nw[r] = g
            M.out_wdev[J.woff[r]:J.woff[r] + g] = np.sort(free[taken:taken + g])
            for d in free[taken:taken + g]:
                M.g[G_OPENED * D + d] = 1.0
            taken += g
            touch(M, r)
    M.quiet[0] = _INF


@njit_lazily(ROUND_KERNEL_SIG)
def _packing(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """One decision of any policy here: running jobs keep their devices (``ojpp`` may move
    some first), waiting jobs are placed in order. Devices that hosted a job are opened
    first (``PER_DEVICE.OPENED``)."""
    D = C.device_node.shape[0]
    for d in range(D):
        if E.dev_start[d + 1] > E.dev_start[d]:
            M.g[G_OPENED * D + d] = 1.0
    opened = M.g[G_OPENED * D:G_OPENED * D + D]
    opening = np.argsort((opened == 0.0).astype(np.int64), kind="mergesort")
    if C.has_sharing:
        _share(C, J, M, E, now, opening)
    else:
        _dedicated(C, J, M, E, opening)
    return PLAN


def _tau() -> Any:
    return param(0.1, low=0.0, high=1.0, help="collision probability bound tau-bar (eq. 14)")


def _theta() -> Any:
    return param(0.2, low=0.0, high=5.0, help="device interference bound theta-bar (eq. 15)")


def _balance() -> Any:
    return param(0.1, low=0.0, high=5.0,
                 help="max - min interference across a job's workers, theta' (eq. 16)")


@dataclass(frozen=True)
class _Packing(KernelRoundPolicy):
    """Shared by the policies here (module docstring); subclasses give bounds and order.

    A run is refused up front if a job's workers fit on fewer devices than it has workers,
    even alone (it would wait forever).
    """

    shares_gpus: ClassVar[bool] = True
    kernel = staticmethod(_packing)
    layouts: ClassVar[dict[str, Layout]] = {"f": F, "i": I, "g": G, "gi": GI}
    round_s: float = param(60.0, low=10.0, high=3600.0, searchable=False,
                           help="seconds between decisions besides arrivals and completions")

    @property
    def reacts(self) -> bool:
        """Decide at every arrival and completion."""
        return True

    def bounds(self) -> Bounds:
        """The checks each placement must pass."""
        return Bounds(rank_by_interference=False)

    def kernel_params(self) -> FloatArray:
        """The bounds vector, then :data:`GREG`, :data:`EWMA_A`, :data:`BUDGET`."""
        return np.concatenate([self.bounds().vector(), self.adjustment()])

    def adjustment(self) -> FloatArray:
        """Gregarious queue, EWMA weight, migration budget (BFD, no adjustment here)."""
        return np.zeros(3)

    def memory(self, cluster: ClusterArrays, jobs: JobView) -> PolicyMemory:
        """Parameters, per-row and per-device memory (module docstring), once every job is
        known to fit."""
        if cluster.has_sharing:
            _require_fit(cluster, jobs, self.bounds().alpha_cap)
        D = cluster.device_node.shape[0]
        return empty_memory(jobs, cluster.node_gpus.shape[0], params=self.kernel_params(),
                            f=F, i=I, g=PER_DEVICE.width * D + 1, gi=GI.width + D)


def _require_fit(cluster: ClusterArrays, jobs: JobView, alpha_cap: float) -> None:
    """Refuse a job whose workers fit on fewer devices than it has, even alone."""
    peak = jobs.mem + jobs.surge_gib
    fits = ((peak[:, None] <= cluster.device_mem[None, :] + EPS / 10)
            & (jobs.util <= alpha_cap + EPS)[:, None]).sum(axis=1)
    bad = np.flatnonzero(fits < jobs.demand)
    if bad.size:
        r = int(bad[0])
        raise InvalidWorkload(f"workload row {r}: {jobs.demand[r]} workers needing "
                              f"{peak[r]:g} GiB (base + surge) and compute {jobs.util[r]:g} "
                              f"fit on only {fits[r]} devices, even alone")


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
    """OJPP's Greedy (Algorithm 1): BFD queue, every bound, lowest interference first.

    ``balance_lone`` says what eq. 16 counts a worker alone on its device as, which the paper
    leaves open: ``"zero"`` its slowdown, 0, in the job's min and max (with Algorithm 2 line 11
    setting the min to 0 when new devices open); ``"excluded"`` nothing, the balance being
    taken over the job's co-located workers only (line 11 read as resetting the mapping).
    """

    name: ClassVar[str] = "ojpp-greedy"
    summary: ClassVar[str] = "OJPP greedy: best-fit decreasing within collision/interference bounds"
    tau_max: float = _tau()
    theta_max: float = _theta()
    theta_balance: float = _balance()
    balance_lone: str = param("zero", kind="choice", choices=("zero", "excluded"),
                              searchable=False,
                              help="a worker alone on its device in eq. 16: counted as "
                                   "interference 0, or excluded (co-located workers only)")

    def bounds(self) -> Bounds:
        """All of OJPP's bounds, ranking devices by the interference they would have."""
        return Bounds(tau_max=self.tau_max, theta_max=self.theta_max,
                      theta_balance=self.theta_balance,
                      lone_excluded=self.balance_lone == "excluded")


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

    def adjustment(self) -> FloatArray:
        """Gregariousness order (Algorithm 3), the EWMA weight and the budget (Algorithm 4)."""
        return np.array([1.0, self.ewma_a, self.migration_budget])
