"""A YARN capacity-scheduler-like baseline (Hadar's YARN-CS; papers/hadar.md §IV-A).

One queue, FIFO, non-preemptive, type-agnostic: it decides at every arrival and completion;
running jobs keep their placement until they end; waiting jobs start in arrival order when
``demand`` GPUs of any types are free (best-fit node, else the emptiest nodes first). The
first job that does not fit blocks every job behind it: head-of-line blocking, chosen over
skip-ahead because a YARN queue with FIFO ordering reserves the freed resources for its first
waiting application rather than letting later, smaller ones take them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numba as nb
import numpy as np

from policies.base import EventDriven, register
from policies.gangs import gang_row
from policies.round_kernel import KernelRoundPolicy
from simulator.round_arrays import PLAN, ROUND_KERNEL_SIG, active_rows, touch

__all__ = ["YarnCS"]


@nb.njit(ROUND_KERNEL_SIG, cache=True)
def _yarn_fifo(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Keep running jobs; start waiting ones in arrival order until the first that does not
    fit."""
    free = C.node_gpus - E.node_used
    none, row = np.zeros_like(free), np.zeros_like(free)
    for r in active_rows(E):
        if J.held[r] == 0:
            if not gang_row(free, J.demand[r], none, row):
                break
            M.out_alloc[r, :] = row
            touch(M, r)
            free -= row
    return PLAN


@register
@dataclass(frozen=True)
class YarnCS(KernelRoundPolicy, EventDriven):
    """Non-preemptive FIFO with head-of-line blocking, blind to GPU types."""

    name: ClassVar[str] = "yarn-cs"
    summary: ClassVar[str] = "non-preemptive FIFO capacity scheduler, type-agnostic (YARN-CS)"
    kernel = staticmethod(_yarn_fifo)
