"""Chronus, the scheduler UniSched extends (papers/unisched.md §I, §VI-C), on UniSched's nodes.

UniSched describes Chronus as "resource reservation, shortest remaining time first, and mixed
integer linear programming" for its job types: SLO jobs it accepts are guaranteed leases
before their deadlines (its MILP selects them), best-effort jobs take the GPUs left, shortest
remaining time first, and its "round-up technique" enforces consolidated placement. This is
that rule as a round policy deciding every ``lease_s``, on whole gangs placed on as few nodes
as possible (:func:`policies.gangs.priority_plan`), preemptive:

- **Admission**, once, at the first decision after a job arrives: an SLO job is accepted if it
  can finish by its first deadline at its full gang, and if, with it, every prefix of the
  accepted jobs in deadline order whose work fitted the GPUs Chronus may promise
  (``guarantee_share`` of the cluster) before its deadline still does: the sum of ``width x
  remaining time`` over the prefix at most ``share x GPUs x (deadline - now)``, ``width`` the
  gang rounded up as Chronus rounds it (a power of two up to a node, whole nodes above). So
  no guarantee given earlier is broken. This fluid test stands in for Chronus's MILP over
  lease plans.
- **Every lease**: accepted SLO jobs first, earliest deadline first; then best-effort jobs
  and the SLO jobs not accepted, least remaining GPU-seconds first. Ties in arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import param, register
from policies.round_kernel import FloatArray
from policies.unisched.baselines import _apply, _EveryLease, _remaining_s
from simulator.inputs.slo import SOFT, STRICT
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import ROUND_KERNEL_SIG, Layout, active_rows

__all__ = ["ChronusGang", "round_up"]

I = Layout(seen=1, accepted=1)
"""Per row: whether admission has judged it, and whether it was accepted."""
SEEN, ACCEPTED = I.SEEN, I.ACCEPTED
P_SHARE = 0


@njit
def round_up(gpus: int, node: int) -> int:
    """Chronus's round-up: a gang's width as a power of two up to ``node`` GPUs, whole nodes
    above."""
    if gpus > node:
        return -(-gpus // node) * node
    width = 1
    while width < gpus:
        width *= 2
    return width


@njit
def _admit(C: Any, J: Any, M: Any, rows: Any, cand: int, now: float, gpus: float) -> bool:
    """Whether SLO row ``cand`` is accepted beside the accepted ``rows`` (module docstring)."""
    left = _remaining_s(C, J, cand)
    due = J.deadlines[cand, 0]
    if now + left > due:
        return False
    node = C.node_gpus.max()
    n = rows.shape[0]
    deadline, work = np.empty(n), np.empty(n)
    for a in range(n):
        r = rows[a]
        deadline[a] = J.deadlines[r, 0]
        work[a] = round_up(J.demand[r], node) * _remaining_s(C, J, r)
    extra = round_up(J.demand[cand], node) * left
    cap = M.params[P_SHARE] * gpus
    before = 0.0  # the prefix's work without the candidate
    for a in np.argsort(deadline, kind="mergesort"):
        before += work[a]
        if deadline[a] < due:
            continue
        room = cap * (deadline[a] - now)
        if before <= room < before + extra:
            return False
    ahead = 0.0  # the candidate's own prefix: accepted jobs due no later than it
    for a in range(n):
        if deadline[a] <= due:
            ahead += work[a]
    return ahead + extra <= cap * (due - now)


@njit_lazily(ROUND_KERNEL_SIG)
def _chronus(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Admit arrivals, then accepted SLO jobs by deadline, the rest by least remaining
    GPU-seconds; preemptive."""
    rows = active_rows(E).copy()
    n = rows.shape[0]
    gpus = float(C.node_gpus.sum())
    for a in range(n):  # arrival order: earlier arrivals are judged first
        r = rows[a]
        if M.i[r, SEEN] == 0:
            M.i[r, SEEN] = 1
            M.i[r, ACCEPTED] = 0
            if J.job_class[r] == STRICT or J.job_class[r] == SOFT:
                accepted = rows[M.i[rows, ACCEPTED] == 1]
                M.i[r, ACCEPTED] = 1 if _admit(C, J, M, accepted, r, now, gpus) else 0
    tier, key = np.empty(n, dtype=np.int64), np.empty(n)
    for a in range(n):
        r = rows[a]
        if M.i[r, ACCEPTED] == 1:
            tier[a], key[a] = 0, J.deadlines[r, 0]
        else:
            tier[a], key[a] = 1, _remaining_s(C, J, r) * J.demand[r]
    by_key = np.argsort(key, kind="mergesort")  # rows are in arrival order
    order = by_key[np.argsort(tier[by_key], kind="mergesort")]
    return _apply(C, J, M, rows, order, np.zeros(n, dtype=np.bool_))


@register
@dataclass(frozen=True)
class ChronusGang(_EveryLease):
    """Chronus: SLO jobs admitted with guarantees, best-effort jobs fill the rest
    (module docstring)."""

    name: ClassVar[str] = "chronus-gang"
    summary: ClassVar[str] = ("SLO jobs admitted with deadline guarantees first, the rest "
                              "shortest remaining time first (Chronus), every lease")
    kernel = staticmethod(_chronus)
    layouts: ClassVar[dict[str, Layout]] = {"i": I}

    guarantee_share: float = param(1.0, low=0.1, high=1.0,
                                   help="share of the GPUs admission may promise to SLO jobs")

    def kernel_params(self) -> FloatArray:
        return np.array([self.guarantee_share])
