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
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from policies.base import EventDriven, register
from policies.gangs import place_gang
from simulator.rounds import RoundState

__all__ = ["YarnCS", "yarn_fifo"]

IntArray = npt.NDArray[np.int64]


def yarn_fifo(alloc: IntArray, demand: IntArray, node_gpus: IntArray) -> IntArray:
    """Keep running jobs; start waiting ones in order until the first that does not fit.

    Args:
        alloc: ``(jobs, nodes)`` current placements, jobs in arrival order.
        demand: gang sizes.
        node_gpus: GPUs per node.
    """
    out = alloc.copy()
    free = node_gpus - out.sum(axis=0)
    for j in np.flatnonzero(out.sum(axis=1) == 0):
        row = place_gang(free, int(demand[j]))
        if row is None:
            break
        out[j] = row
        free -= row
    return out


@register
@dataclass(frozen=True)
class YarnCS(EventDriven):
    """Non-preemptive FIFO with head-of-line blocking, blind to GPU types."""

    name: ClassVar[str] = "yarn-cs"
    summary: ClassVar[str] = "non-preemptive FIFO capacity scheduler, type-agnostic (YARN-CS)"

    def plan(self, state: RoundState) -> IntArray:
        """Start what fits in arrival order; never move a running job."""
        return yarn_fifo(state.alloc, state.demand, state.cluster.node_gpus)
