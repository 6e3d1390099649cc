"""Chronus, the scheduler UniSched extends (papers/unisched.md §I, §VI-C), on UniSched's nodes.

UniSched describes Chronus as "resource reservation, shortest remaining time first, and mixed
integer linear programming" for its job types: SLO jobs it accepts are guaranteed leases
before their deadlines (its MILP selects them), best-effort jobs take the GPUs left, shortest
remaining time first, and its "round-up technique" enforces consolidated placement. This is
that rule as a round policy deciding every ``lease_s``, on whole gangs placed on as few nodes
as possible (:func:`policies.gangs.priority_plan`), preemptive:

- **Admission**, every lease, as Chronus's MILP re-selects its SLO jobs every lease: an
  accepted job keeps its guarantee while it can still finish by its first deadline at its full
  gang (else it loses it). The other SLO jobs that can still finish are then judged least work
  first (the order that meets the most deadlines, as Chronus's selection maximises), each
  accepted if, with it, its own prefix of the accepted jobs in deadline order fits the GPUs
  Chronus may promise (``guarantee_share`` of the cluster) before its deadline, and no prefix
  that fitted stops fitting: the sum of ``width x remaining time`` over a prefix at most
  ``share x GPUs x (deadline - now)``, ``width`` the gang rounded up as Chronus rounds it (a
  power of two up to a node, whole nodes above). So no guarantee given is broken by a new
  one. This fluid test stands in for Chronus's MILP over lease plans.
- **Every lease**: accepted SLO jobs first, earliest deadline first; then best-effort jobs
  and the SLO jobs not accepted, least remaining GPU-seconds first. Ties in arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import param, register
from policies.round_kernel import FloatArray
from policies.unisched.baselines import _apply, _EveryLease, _remaining_s, _tiered
from simulator.inputs.slo import SOFT, STRICT
from simulator.jit import njit, njit_lazily
from simulator.rounds.view import ROUND_KERNEL_SIG, Layout, active_rows

__all__ = ["ChronusGang", "round_up"]

I = Layout(accepted=1)
"""Per row: whether it holds a deadline guarantee."""
ACCEPTED = I.ACCEPTED
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
def _fits(deadline: Any, work: Any, k: int, due: float, extra: float, cap: float,
          now: float) -> bool:
    """Whether ``extra`` GPU-seconds due at ``due`` join the ``k`` accepted jobs (``deadline``
    ascending, their ``work``) with its own prefix fitting and no fitting prefix broken."""
    before, own = 0.0, False
    for a in range(k):
        if deadline[a] > due and not own:  # the candidate's own prefix ends here
            if before + extra > cap * (due - now):
                return False
            own = True
        before += work[a]
        if deadline[a] >= due and before <= cap * (deadline[a] - now) < before + extra:
            return False
    return own or before + extra <= cap * (due - now)


@njit
def _insert(deadline: Any, work: Any, k: int, due: float, extra: float) -> None:
    """Put a job due at ``due`` into the first ``k`` entries, keeping deadline order."""
    p = k
    while p > 0 and deadline[p - 1] > due:
        deadline[p], work[p] = deadline[p - 1], work[p - 1]
        p -= 1
    deadline[p], work[p] = due, extra


@njit_lazily(ROUND_KERNEL_SIG)
def _chronus(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Keep the guarantees that can still hold, admit SLO jobs least work first, then run
    accepted jobs by deadline and the rest by least remaining GPU-seconds; preemptive."""
    rows = active_rows(E).copy()
    n = rows.shape[0]
    cap = M.params[P_SHARE] * float(C.node_gpus.sum())
    node = C.node_gpus.max()
    left, work, due = np.empty(n), np.empty(n), np.full(n, np.inf)
    open_ = np.zeros(n, dtype=np.bool_)  # an SLO job that can still finish by its deadline
    for a in range(n):
        r = rows[a]
        left[a] = _remaining_s(C, J, r)
        work[a] = round_up(J.demand[r], node) * left[a]
        if J.job_class[r] == STRICT or J.job_class[r] == SOFT:
            due[a] = J.deadlines[r, 0]
            open_[a] = now + left[a] <= due[a]
        if not open_[a]:
            M.i[r, ACCEPTED] = 0  # a guarantee that cannot hold any more is dropped
    held_due, held_work = np.empty(n), np.empty(n)
    k = 0
    for a in np.argsort(due, kind="mergesort"):
        if M.i[rows[a], ACCEPTED] == 1:
            held_due[k], held_work[k] = due[a], work[a]
            k += 1
    for a in np.argsort(work, kind="mergesort"):  # least work first: the most deadlines met
        r = rows[a]
        if open_[a] and M.i[r, ACCEPTED] == 0 and _fits(held_due, held_work, k, due[a],
                                                         work[a], cap, now):
            _insert(held_due, held_work, k, due[a], work[a])
            k += 1
            M.i[r, ACCEPTED] = 1
    tier, key = np.empty(n, dtype=np.int64), np.empty(n)
    for a in range(n):
        if M.i[rows[a], ACCEPTED] == 1:
            tier[a], key[a] = 0, due[a]
        else:
            tier[a], key[a] = 1, left[a] * J.demand[rows[a]]
    return _apply(C, J, M, rows, _tiered(tier, key), np.zeros(n, dtype=np.bool_))


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
