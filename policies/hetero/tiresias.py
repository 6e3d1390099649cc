"""Tiresias's two-dimensional LAS, discretised into two queues (Gu et al., NSDI 2019; Hadar's
Tiresias baseline, papers/hadar.md §V-A: "two priority queues and its PromoteKnob disabled"),
as Tiresias's public simulator runs it (``--schedule dlas-gpu`` with two queues).

A job's attained service is GPUs x seconds run. Jobs start in the first queue and move to the
second once their attained service reaches ``threshold_gpu_s``; they never come back (the
PromoteKnob is off). The first queue goes before the second; within a queue, jobs that ran
at the last decision go first, in their order, then the waiting ones, in theirs (a job joins
the end of its queue on arrival or demotion). Jobs are taken in that order while their whole
gang fits the free GPU count, skipping those that do not (a later, smaller gang may start);
a job not taken is preempted. Type-agnostic: only the GPU count matters, as in the
simulator, whose ``dlas-gpu`` counts GPUs and places nothing; here kept jobs keep their
nodes and started ones are placed on as few nodes as possible
(:func:`policies.gangs.priority_plan`).

It decides at every arrival and completion, and when a first-queue job may have crossed the
threshold. The simulator checks for demotion only at its events, and a running first-queue
job asks for one ``(threshold - seconds run) / GPUs`` seconds later, in whole seconds
(rounded down): for a gang that has run before this lands after its crossing, so it is
demoted at the first event after it crossed, not at the crossing. Those times are kept
here, on a one-second clock (``round_s``), so that runs match the simulator's job for job
(``tests/policies/test_tiresias_parity.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import param, register
from policies.gangs import priority_plan
from policies.round_kernel import KernelRoundPolicy
from simulator.jit import njit_lazily
from simulator.rounds.view import (
    PLAN,
    ROUND_KERNEL_SIG,
    Layout,
    active_rows,
    set_plan,
)

__all__ = ["Tiresias"]

FloatArray = npt.NDArray[np.float64]

I = Layout(queue=1, place=1, seen=1)
"""Per row: its queue (0, 1), its place in the queue (smaller first) and whether it has been
queued."""
GI = Layout(next=1)
"""The next place in a queue."""
QUEUE, PLACE, SEEN, NEXT = I.QUEUE, I.PLACE, I.SEEN, GI.NEXT


@njit_lazily(ROUND_KERNEL_SIG)
def _dlas(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Queue arrivals, demote, take gangs in queue order while they fit, requeue the waiting."""
    threshold = M.params[0]
    rows = active_rows(E).copy()
    n = rows.shape[0]
    for a in range(n):
        r = rows[a]
        if M.i[r, SEEN] == 0:  # an arrival joins the end of the first queue
            M.i[r, SEEN], M.i[r, QUEUE], M.i[r, PLACE] = 1, 0, M.gi[NEXT]
            M.gi[NEXT] += 1
    for a in range(n):  # running jobs past the threshold join the end of the second queue
        r = rows[a]
        if J.held[r] > 0 and M.i[r, QUEUE] == 0 and J.demand[r] * J.ran0[r] >= threshold:
            M.i[r, QUEUE], M.i[r, PLACE] = 1, M.gi[NEXT]
            M.gi[NEXT] += 1
    place, queue = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for a in range(n):
        place[a], queue[a] = M.i[rows[a], PLACE], M.i[rows[a], QUEUE]
    by_place = np.argsort(place, kind="mergesort")
    order = by_place[np.argsort(queue[by_place], kind="mergesort")]
    plan = priority_plan(order, J.demand[rows], J.alloc[rows], C.node_gpus,
                         np.zeros(n, dtype=np.bool_))
    check = np.inf
    for a in order:
        r = rows[a]
        if plan[a].sum() == 0:  # waiting jobs go behind the running ones, in their order
            M.i[r, PLACE] = M.gi[NEXT]
            M.gi[NEXT] += 1
        elif M.i[r, QUEUE] == 0:  # the simulator's next look at this job (module docstring)
            check = min(check, now + np.floor((threshold - J.ran0[r]) / J.demand[r]))
        set_plan(M, r, plan[a])
    M.quiet[0] = check  # nothing changes before then unless a job arrives or finishes
    return PLAN


@register
@dataclass(frozen=True)
class Tiresias(KernelRoundPolicy):
    """Two-queue discretised 2D-LAS, PromoteKnob off, gang-scheduled (module docstring)."""

    name: ClassVar[str] = "tiresias"
    summary: ClassVar[str] = "two-queue discretised least attained GPU-time, preemptive (Tiresias)"

    threshold_gpu_s: float = param(
        3250.0, low=60.0, high=1e7, log=True,
        help="attained GPU-seconds that move a job to the second queue (simulator's 3250)")
    kernel = staticmethod(_dlas)
    layouts: ClassVar[dict[str, Layout]] = {"i": I, "gi": GI}

    @property
    def reacts(self) -> bool:
        """Decide at arrivals and completions."""
        return True

    @property
    def round_s(self) -> float:
        """The clock demotion checks fall on (rounds between them are skipped)."""
        return 1.0

    def kernel_params(self) -> FloatArray:
        """The threshold."""
        return np.array([self.threshold_gpu_s])
