"""Placing gang jobs on nodes: whole-demand allocations for the round policies.

The round engine takes a ``(jobs, nodes)`` plan. These helpers build one: keep the rows of
jobs that continue (so they pay no restart), place new gangs on as few nodes as possible, and
fill GPUs in a priority order. Used by UniSched's work-conserving fill and by the SLO
baselines (least laxity first, Hydra).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

__all__ = ["fill_in_order", "place_gang", "priority_plan"]

IntArray = npt.NDArray[np.int64]


def place_gang(free: IntArray, gpus: int, *, prev: IntArray | None = None) -> IntArray | None:
    """GPUs per node for a gang of ``gpus``, or None if the nodes cannot hold it.

    The job's previous placement ``prev`` if it is a whole gang on GPUs still free (no
    restart); else one node if any can hold it (best fit: the fullest node with room); else
    the nodes with the most free GPUs first, so the gang spans as few nodes as possible.
    Restrict the nodes by zeroing the others in ``free``.

    Args:
        free: ``(nodes,)`` free GPUs on each node.
        gpus: the gang size (>= 1).
        prev: ``(nodes,)`` what the job holds now.
    """
    if gpus <= 0 or free.sum() < gpus:
        return None
    if prev is not None and prev.sum() == gpus and (prev <= free).all():
        return prev.copy()
    row = np.zeros_like(free)
    fits = np.flatnonzero(free >= gpus)
    if fits.size:
        row[fits[np.argmin(free[fits])]] = gpus
        return row
    order = np.argsort(-free, kind="stable")
    before = np.cumsum(free[order]) - free[order]
    row[order] = np.clip(gpus - before, 0, free[order])
    return row


def fill_in_order(plan: IntArray, free: IntArray, order: Iterable[int], gpus: IntArray,
                  current: IntArray) -> None:
    """Give jobs their gang in ``order`` wherever it fits (backfilling past those that do not).

    A job that already holds exactly ``gpus[i]`` GPUs on nodes that are still free keeps
    that row; otherwise it is placed by :func:`place_gang`. ``plan`` and ``free`` are
    updated in place; rows already non-zero in ``plan`` are skipped.

    Args:
        plan: ``(jobs, nodes)`` the plan being built.
        free: ``(nodes,)`` GPUs not yet in ``plan``.
        order: job indices, most deserving first.
        gpus: GPUs each job should get.
        current: ``(jobs, nodes)`` what each job holds now.
    """
    for i in order:
        g = int(gpus[i])
        if g <= 0 or plan[i].any():
            continue
        row = place_gang(free, g, prev=current[i])
        if row is not None:
            plan[i] = row
            free -= row


def priority_plan(order: Iterable[int], gpus: IntArray, current: IntArray, node_gpus: IntArray,
                  keep: npt.NDArray[np.bool_] | None = None) -> IntArray:
    """A plan giving whole gangs to jobs in ``order``, keeping running jobs where they are.

    Jobs are chosen greedily by GPU count (backfilling past gangs that do not fit); chosen
    jobs that already hold their gang keep its nodes, the others are placed with
    :func:`place_gang`, and GPUs that fragmentation leaves over are backfilled in order.

    Args:
        order: job indices, most deserving first.
        gpus: each job's gang size.
        current: ``(jobs, nodes)`` what each job holds now.
        node_gpus: ``(nodes,)`` GPUs of each node.
        keep: ``(jobs,)`` mask of jobs whose current rows are fixed (non-preemptive).
    """
    plan = np.zeros_like(current)
    if keep is not None:
        plan[keep] = current[keep]
    free = node_gpus - plan.sum(axis=0)
    order = [i for i in order if not plan[i].any()]
    left = int(free.sum())
    chosen = []
    for i in order:
        if 0 < gpus[i] <= left:
            chosen.append(i)
            left -= int(gpus[i])
    stay = [i for i in chosen if int(current[i].sum()) == gpus[i]]
    fill_in_order(plan, free, stay, gpus, current)
    fill_in_order(plan, free, chosen, gpus, current)
    fill_in_order(plan, free, order, gpus, current)
    return plan
