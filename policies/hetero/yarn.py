"""A YARN capacity-scheduler baseline (Hadar's YARN-CS; papers/hadar.md §IV-A), as Tiresias's
simulator runs it (its ``--scheme yarn --schedule fifo``; the YARN-CS of the Tiresias paper).

One queue, FIFO, non-preemptive, type-agnostic: it decides at every arrival and completion
(completions first); running jobs keep their GPUs until they end; waiting jobs start in
arrival order, each with YARN's placement (:func:`policies.gangs.yarn_row`). The first job
that cannot be placed blocks every job behind it (head-of-line blocking: Tiresias's
``fifo``; its ``fjf`` would skip ahead). ``tests/policies/test_yarn_parity.py`` holds it to
Tiresias's own runs, job for job. Tiresias also asks a node for CPUs and memory per GPU,
which never bind on the clusters of those runs (or here: profiles give GPUs only), and puts
a job's nodes under one switch (a profile has no switches: one switch, as in those runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import EventDriven, register
from policies.gangs import yarn_row
from policies.round_kernel import KernelRoundPolicy
from simulator.jit import njit_lazily
from simulator.rounds.view import PLAN, ROUND_KERNEL_SIG, active_rows, touch

__all__ = ["YarnCS"]


@njit_lazily(ROUND_KERNEL_SIG)
def _yarn_fifo(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    """Keep running jobs; start waiting ones in arrival order until the first that cannot be
    placed."""
    free = C.node_gpus - E.node_used
    row = np.zeros_like(free)
    for r in active_rows(E):
        if J.held[r] == 0:
            if not yarn_row(free, C.node_gpus, J.demand[r], row):
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
