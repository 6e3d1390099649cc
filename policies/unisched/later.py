"""The later slots' plan that certifies the knapsack's answer of UniSched's exact selector
(:mod:`policies.unisched.exact`): consolidated candidates, slot by slot."""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.cells import LEVELS
from simulator.jit import configure_cache, njit

configure_cache()

__all__ = ["later_plan"]


@njit
def later_plan(weight: Any, avail: Any, need: Any, full: Any, deadline: Any, cap: Any
                ) -> bool:
    """Whether a plan of the later slots (consolidated candidates) runs every ``full`` job
    through each later slot before its last deadline and gets every other job ``need``
    seconds of work before each step's deadline. Built slot by slot: first what each job
    must run in this slot because the slots after it cannot give it enough, then earliest
    deadline first (a plan found certifies; none found sends the instance to HiGHS).

    Args:
        weight: ``(D, 4)`` each job's consolidated cells, as eq. 14's weights.
        avail: ``(D, F, K)`` seconds of each later slot before each step's deadline.
        need: ``(D, F)`` work each step needs (0: none).
        full: ``(D,)`` the job runs every later slot.
        deadline: ``(D, F)`` the steps' deadlines (inf: no step).
        cap: ``(4,)`` eq. 14's capacities of a later slot.
    """
    n_jobs, steps, slots = avail.shape
    done = np.zeros((n_jobs, steps))
    after = np.zeros((n_jobs, steps, slots))  # seconds of the slots after k before each step
    for k in range(slots - 2, -1, -1):
        after[:, :, k] = after[:, :, k + 1] + avail[:, :, k + 1]
    least = np.zeros(n_jobs)
    for k in range(slots):
        room = cap.astype(np.float64)
        for j in range(n_jobs):
            if full[j] and np.any(avail[j, :, k] > 0.0):
                room -= weight[j]
        key = np.full(n_jobs, np.inf)  # the earliest deadline a job still falls short of
        for j in range(n_jobs):
            least[j] = 0.0
            for f in range(steps):
                short = need[j, f] - done[j, f]
                if not full[j] and short > 0.0:
                    key[j] = min(key[j], deadline[j, f])
                    late = short - after[j, f, k]
                    if late > 0.0:
                        if avail[j, f, k] <= 0.0:
                            return False  # that deadline has passed
                        least[j] = max(least[j], late / avail[j, f, k])
            if least[j] > 1.0 + 1e-12:
                return False
            least[j] = min(least[j], 1.0)
            room -= least[j] * weight[j]
        if np.any(room < -1e-9):
            return False
        room = np.maximum(room, 0.0)
        for j in np.argsort(key, kind="mergesort"):
            if key[j] == np.inf:
                break
            x = least[j]
            for f in range(steps):
                short = need[j, f] - done[j, f]
                if short > 0.0 and avail[j, f, k] > 0.0:
                    x = max(x, short / avail[j, f, k])
            x = min(x, 1.0) - least[j]
            for i in range(LEVELS):
                if weight[j, i] > 0:
                    x = min(x, room[i] / weight[j, i])
            room -= x * weight[j]
            done[j] += (least[j] + x) * avail[j, :, k]
    return bool(np.all(need <= done * (1.0 + 1e-12) + 1e-9))
