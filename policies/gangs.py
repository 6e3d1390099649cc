"""Placing gang jobs on nodes: whole-demand allocations for the round policies (compiled).

The round engine takes a ``(jobs, nodes)`` plan. These helpers build one: keep the rows of
jobs that continue (so they pay no restart), place new gangs on as few nodes as possible, and
fill GPUs in a priority order (:func:`gang_row`), or place them as YARN does
(:func:`yarn_row`: YARN-CS and Horus's FIFO). Used by WFQ-hetero, Gavel's rounding, UniSched's
work-conserving fill and the SLO baselines (least laxity first, Hydra); callable from Python
and from compiled kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from simulator.jit import configure_cache, njit
from simulator.order import stable_order

configure_cache()

__all__ = ["fill_in_order", "gang_row", "place_gang", "priority_plan", "yarn_row"]

IntArray = npt.NDArray[np.int64]


@njit
def gang_row(free: Any, gpus: int, prev: Any, out: Any) -> bool:
    """GPUs per node for a gang of ``gpus`` into ``out``; False if the nodes cannot hold it.

    The job's previous placement ``prev`` if it is a whole gang on GPUs still free (no
    restart); else one node if any can hold it (best fit: the fullest node with room, the
    lowest-numbered on ties); else the nodes with the most free GPUs first (ties: lower
    number), so the gang spans as few nodes as possible. Restrict the nodes by zeroing the
    others in ``free``; a ``prev`` of zeros means none.
    """
    if gpus <= 0 or free.sum() < gpus:
        return False
    if prev.sum() == gpus and np.all(prev <= free):
        out[:] = prev
        return True
    out[:] = 0
    best = -1
    for k in range(free.shape[0]):
        if free[k] >= gpus and (best < 0 or free[k] < free[best]):
            best = k
    if best >= 0:
        out[best] = gpus
        return True
    left = gpus
    for k in stable_order(-free):
        take = min(left, free[k])
        out[k] = take
        left -= take
    return True


@njit
def yarn_row(free: Any, size: Any, gpus: int, out: Any) -> bool:
    """YARN's placement of a gang of ``gpus`` into ``out`` (GPUs per node); False if none.

    A gang that fits a node goes on one node: the first, in node order, with ``gpus`` free.
    A larger gang takes whole idle nodes in node order while at least a node's worth is left,
    then the rest on the first other node with that many free; it never spans busy nodes.
    """
    out[:] = 0
    if gpus <= size.max():
        for k in range(free.shape[0]):
            if free[k] >= gpus:
                out[k] = gpus
                return True
        return False
    left = gpus
    for k in range(free.shape[0]):
        if free[k] == size[k] and size[k] <= left:
            out[k] = size[k]
            left -= size[k]
    if left == 0:
        return True
    for k in range(free.shape[0]):  # a node with a node's worth free was idle: taken above
        if out[k] == 0 and free[k] >= left:
            out[k] = left
            return True
    out[:] = 0
    return False


def place_gang(free: IntArray, gpus: int, *, prev: IntArray | None = None) -> IntArray | None:
    """:func:`gang_row` for Python callers: the row, or None if the nodes cannot hold it."""
    free = np.ascontiguousarray(free, dtype=np.int64)
    out = np.zeros_like(free)
    before = np.zeros_like(free) if prev is None else np.ascontiguousarray(prev, np.int64)
    return out if gang_row(free, int(gpus), before, out) else None


@njit
def fill_in_order(plan: Any, free: Any, order: Any, gpus: Any, current: Any) -> Any:
    """Give jobs their gang in ``order`` wherever it fits (backfilling past those that do not).

    A job that already holds exactly ``gpus[i]`` GPUs on nodes that are still free keeps
    that row; otherwise it is placed by :func:`gang_row`. ``plan`` and ``free`` are
    updated in place; rows already non-zero in ``plan`` are skipped.

    Args:
        plan: ``(jobs, nodes)`` the plan being built.
        free: ``(nodes,)`` GPUs not yet in ``plan``.
        order: job indices, most deserving first.
        gpus: GPUs each job should get.
        current: ``(jobs, nodes)`` what each job holds now.

    Returns:
        The indices placed, in order.
    """
    row = np.zeros(free.shape[0], dtype=np.int64)
    placed = np.zeros(len(order), dtype=np.int64)
    k = 0
    for i in order:
        if gpus[i] <= 0 or np.any(plan[i] != 0):
            continue
        if gang_row(free, gpus[i], current[i], row):
            plan[i, :] = row
            free -= row
            placed[k] = i
            k += 1
    return placed[:k]


@njit
def priority_plan(order: Any, gpus: Any, current: Any, node_gpus: Any, keep: Any) -> Any:
    """A plan giving whole gangs to jobs in ``order``, keeping running jobs where they are.

    Jobs are chosen greedily by GPU count (backfilling past gangs that do not fit); chosen
    jobs that already hold their gang keep its nodes, the others are placed with
    :func:`gang_row`, and GPUs that fragmentation leaves over are backfilled in order.

    Args:
        order: job indices, most deserving first.
        gpus: each job's gang size.
        current: ``(jobs, nodes)`` what each job holds now.
        node_gpus: ``(nodes,)`` GPUs of each node.
        keep: ``(jobs,)`` mask of jobs whose current rows are fixed (non-preemptive).
    """
    plan = np.zeros_like(current)
    for i in range(current.shape[0]):
        if keep[i]:
            for c in range(current.shape[1]):
                plan[i, c] = current[i, c]
    free = node_gpus - plan.sum(axis=0)
    waiting = np.array([i for i in order if not np.any(plan[i] != 0)], dtype=np.int64)
    left = free.sum()
    chosen = np.zeros(waiting.shape[0], dtype=np.int64)
    k = 0
    for i in waiting:
        if 0 < gpus[i] <= left:
            chosen[k] = i
            k += 1
            left -= gpus[i]
    chosen = chosen[:k]
    stay = np.array([i for i in chosen if current[i].sum() == gpus[i]], dtype=np.int64)
    fill_in_order(plan, free, stay, gpus, current)
    fill_in_order(plan, free, chosen, gpus, current)
    fill_in_order(plan, free, waiting, gpus, current)
    return plan
