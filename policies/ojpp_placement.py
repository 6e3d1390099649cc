"""OJPP's placement step (papers/ojpp.md Algorithm 2) and online adjustment (Algorithm 4).

Pure functions over arrays, shared by every policy that packs workers onto shared GPUs. A
placement is a ``(jobs, devices)`` boolean array, at most one worker of a job per device; job
requirements and the slowdown predictor come from a :class:`~simulator.sharing.SharingModel`,
so the interference bounded here is the interference the run applies (collisions aside).

Per device ``k`` after a worker is added (each bound off when None):

- compute ``sum alpha <= alpha_cap`` (eq. 1/11; 1 for OJPP, more for an overcommitting
  policy) and memory ``sum gamma + max delta <= device memory`` (eq. 3/12, in GiB: the paper's
  normalized capacity 1 times the device's memory); always checked;
- collision ``tau(D_k) <= tau_max`` (eq. 4/14);
- interference ``theta_k <= theta_max`` for every worker on ``k``, the new one included
  (eq. 6/15), predicted with :meth:`SharingModel.worker_slowdowns`;
- balance (eq. 8/16): ``max - min`` of the placed job's worker slowdowns ``<= theta_balance``,
  and no other job on ``k`` pushed past ``max(theta_balance, its imbalance before)``
  (departures can leave a job unbalanced; a placement must not make that worse).

The worker goes to the feasible device with the lowest resulting ``theta_k`` (ties: least
remaining capacity, i.e. best fit), or with ``rank_by_interference=False`` to the best fit
alone (the baselines). Algorithm 2's two passes: all workers on active devices; if one does not
fit, reset and place again allowing new devices, each worker preferring an active device; in
that pass the job's minimum interference counts as 0 (its line 11), so workers on active
devices stay within ``theta_balance`` of a worker alone on a new device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulator.colocation import collision_probability
from simulator.sharing import SharingModel

__all__ = ["Bounds", "DeviceLoad", "adjust", "bfd_order", "device_collision", "gregarious_order",
           "imbalance", "place_workers"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

EPS = 1e-9
"""Slack on the bounds; memory uses a tenth of it (the engine rejects excess > 1e-9 GiB)."""


@dataclass(frozen=True)
class Bounds:
    """What a placement must respect; None switches a check off.

    Attributes:
        alpha_cap: compute bound per device (1: no overcommit).
        tau_max: collision probability bound tau-bar (eq. 14).
        theta_max: device interference bound theta-bar (eq. 15).
        theta_balance: per-job ``max - min`` worker interference bound theta' (eq. 16).
        rank_by_interference: prefer the device with the lowest resulting interference
            (Algorithm 2); False: best fit only.
    """

    alpha_cap: float = 1.0
    tau_max: float | None = None
    theta_max: float | None = None
    theta_balance: float | None = None
    rank_by_interference: bool = True


def device_collision(sh: SharingModel, rows: IntArray, placed: BoolArray) -> FloatArray:
    """``(devices,)`` collision probability (eq. 4) of the workers on each device."""
    p = sh.jobs.surge_p[rows]
    surging = placed & (p[:, None] > 0)
    out = np.zeros(placed.shape[1])
    for k in np.flatnonzero(surging.sum(axis=0) >= 2):
        out[k] = collision_probability(p[surging[:, k]])
    return out


def imbalance(w: FloatArray, placed: BoolArray) -> FloatArray:
    """``(jobs,)`` max - min of each job's worker slowdowns ``w`` (0 with under two workers)."""
    hi = np.where(placed, w, -np.inf).max(axis=1, initial=-np.inf)
    lo = np.where(placed, w, np.inf).min(axis=1, initial=np.inf)
    out: FloatArray = np.where(placed.sum(axis=1) >= 2, hi - lo, 0.0)
    return out


def _excluding(w: FloatArray, placed: BoolArray) -> tuple[FloatArray, FloatArray]:
    """``(jobs, devices)`` max and min of each job's worker slowdowns on devices other than the
    column's (-inf / +inf when none)."""
    d = placed.shape[1]
    cols = np.arange(d)[None, :]
    out = []
    for sign in (1.0, -1.0):
        v = np.where(placed, sign * w, -np.inf)
        top = np.sort(v, axis=1)[:, ::-1]
        first, second = top[:, 0], (top[:, 1] if d >= 2 else np.full(len(v), -np.inf))
        at = np.argmax(v, axis=1)[:, None]
        out.append(sign * np.where(cols == at, second[:, None], first[:, None]))
    return out[0], out[1]


@dataclass(frozen=True, eq=False)
class DeviceLoad:
    """What is on each device: the jobs placed and the sums the bounds read.

    Attributes:
        rows: workload row of each job (rows of ``placed``).
        placed: ``(jobs, devices)`` placement, at most one worker of a job per device.
        alpha: ``(devices,)`` summed compute need of the workers there.
        gamma_gib: ``(devices,)`` summed base memory.
        surge_gib: ``(devices,)`` largest memory surge.
    """

    rows: IntArray
    placed: BoolArray
    alpha: FloatArray
    gamma_gib: FloatArray
    surge_gib: FloatArray

    @classmethod
    def of(cls, sh: SharingModel, rows: IntArray, placed: BoolArray) -> DeviceLoad:
        """The loads of ``placed`` (copied), jobs at workload ``rows``."""
        J = sh.jobs
        return cls(np.asarray(rows, dtype=np.int64).copy(), np.array(placed, dtype=bool),
                   J.gpu_util[rows] @ placed, J.mem_gib[rows] @ placed,
                   np.where(placed, J.surge_gib[rows][:, None], 0.0).max(axis=0, initial=0.0))

    def index(self, row: int) -> int:
        """Row of ``placed`` holding workload row ``row`` (``len(rows)`` if absent: where
        :meth:`with_job` appends it)."""
        hit = np.flatnonzero(self.rows == row)
        return int(hit[0]) if hit.size else len(self.rows)

    def with_job(self, row: int) -> DeviceLoad:
        """The same loads with workload row ``row`` present (as an unplaced job if new)."""
        if self.index(row) < len(self.rows):
            return self
        empty = np.zeros((1, self.placed.shape[1]), dtype=bool)
        return DeviceLoad(np.append(self.rows, row), np.vstack([self.placed, empty]),
                          self.alpha, self.gamma_gib, self.surge_gib)

    def add(self, sh: SharingModel, i: int, k: int) -> DeviceLoad:
        """The loads after a worker of job ``i`` (row of ``placed``) joins device ``k``."""
        r, placed = self.rows[i], self.placed.copy()
        placed[i, k] = True
        alpha, gamma, surge = self.alpha.copy(), self.gamma_gib.copy(), self.surge_gib.copy()
        alpha[k] += sh.jobs.gpu_util[r]
        gamma[k] += sh.jobs.mem_gib[r]
        surge[k] = max(surge[k], sh.jobs.surge_gib[r])
        return DeviceLoad(self.rows, placed, alpha, gamma, surge)


def _fits(sh: SharingModel, load: DeviceLoad, job: int, bounds: Bounds, allowed: BoolArray
          ) -> tuple[BoolArray, FloatArray, FloatArray]:
    """Devices with compute and memory (eq. 1, 3) for one more worker of ``job``, and the
    compute and memory (GiB) they would then hold. Unshareable devices only when empty."""
    J, r = sh.jobs, load.rows[job]
    alpha = load.alpha + J.gpu_util[r]
    mem = load.gamma_gib + J.mem_gib[r] + np.maximum(load.surge_gib, J.surge_gib[r])
    empty = ~load.placed.any(axis=0)  # the compute cap bounds sharing, not a lone worker
    ok = (allowed & ~load.placed[job] & ((alpha <= bounds.alpha_cap + EPS) | empty)
          & (mem - sh.device_mem_gib <= EPS / 10) & (sh.shareable | empty))
    return ok, alpha, mem


def _candidates(sh: SharingModel, load: DeviceLoad, job: int, bounds: Bounds, fallback: bool,
                allowed: BoolArray) -> tuple[BoolArray, FloatArray, FloatArray]:
    """For one more worker of ``job``: which devices are feasible, the interference ``theta_k``
    each would have, and the capacity each would have left (normalized, summed over the two
    dimensions)."""
    rows, placed, J = load.rows, load.placed, sh.jobs
    r = rows[job]
    ok, alpha, mem = _fits(sh, load, job, bounds, allowed)
    if bounds.tau_max is not None and J.surge_p[r] > 0:
        trial = placed.copy()
        trial[job] |= ok
        ok &= device_collision(sh, rows, trial) <= bounds.tau_max + EPS
    trial = placed.copy()
    trial[job] |= ok
    w = sh.worker_slowdowns(rows, trial)
    theta = np.where(trial, w, 0.0).max(axis=0, initial=0.0)
    if bounds.theta_max is not None:
        ok &= theta <= bounds.theta_max + EPS
    if bounds.theta_balance is not None:
        ok &= _balanced(sh, rows, placed, job, w, bounds.theta_balance, fallback)
    residual = ((bounds.alpha_cap - alpha) / bounds.alpha_cap
                + (sh.device_mem_gib - mem) / sh.device_mem_gib)
    return ok, theta, residual


def _balanced(sh: SharingModel, rows: IntArray, placed: BoolArray, job: int, w: FloatArray,
              limit: float, fallback: bool) -> BoolArray:
    """Devices where the new worker keeps ``job`` and every co-located job balanced (eq. 16);
    ``w`` holds the slowdowns with the new worker on every candidate device at once (each
    device's slowdowns depend on its own workers only)."""
    now = sh.worker_slowdowns(rows, placed)
    own = now[job, placed[job]]
    hi = max(own.max(initial=-np.inf), 0.0 if fallback else -np.inf)
    lo = min(own.min(initial=np.inf), 0.0 if fallback else np.inf)
    x = w[job]
    ok: BoolArray = np.maximum(hi, x) - np.minimum(lo, x) <= limit + EPS
    others = placed.copy()
    others[job] = False
    hi_x, lo_x = _excluding(now, others)
    after = np.maximum(hi_x, w) - np.minimum(lo_x, w)
    allowed = np.maximum(limit, imbalance(now, others))[:, None] + EPS
    ok &= ~(others & (after > allowed)).any(axis=0)
    return ok


def place_workers(sh: SharingModel, load: DeviceLoad, row: int, workers: int, bounds: Bounds,
                  *, active: BoolArray | None = None, new_order: IntArray | None = None,
                  allowed: BoolArray | None = None,
                  prefer: IntArray | None = None) -> IntArray | None:
    """Devices for ``workers`` more workers of the job at workload ``row`` (Algorithm 2).

    Args:
        sh: requirements (by workload row), devices and the slowdown predictor.
        load: what is on the devices now. If the job is in it with workers placed, those
            count for its balance and it gets no second worker on their devices. Not modified.
        row: the job's workload row.
        workers: how many workers to add, one per device.
        bounds: the checks (:class:`Bounds`).
        active: devices open in the first pass (default: those hosting a worker).
        new_order: order in which other devices are opened in the second pass (default: by
            index); devices not listed are never opened.
        allowed: devices the job may use at all (default: every device).
        prefer: devices taken first whenever feasible, in this order, in both passes (e.g.
            the job's current devices, so that a job that still fits is not moved).

    Returns:
        The chosen devices in the order the workers were assigned, or None if the workers do
        not fit even with new devices opened.
    """
    load = load.with_job(row)
    job, d = load.index(row), load.placed.shape[1]
    act: BoolArray = np.array(load.placed.any(axis=0) if active is None else active, dtype=bool)
    first = np.zeros(0, np.int64) if prefer is None else np.asarray(prefer, dtype=np.int64)
    act[first] = True
    may = np.ones(d, dtype=bool) if allowed is None else allowed
    if _fits(sh, load, job, bounds, may)[0].sum() < workers:
        return None  # cheap: the other checks only take devices away
    opening = np.arange(d) if new_order is None else np.asarray(new_order, dtype=np.int64)
    for fallback in (False, True):
        cur, chosen = load, []
        for _ in range(workers):
            ok, theta, residual = _candidates(sh, cur, job, bounds, fallback, may)
            hit = np.flatnonzero(ok & act)
            keys = (residual[hit], theta[hit]) if bounds.rank_by_interference \
                else (residual[hit],)
            if (mine := first[ok[first]]).size:
                k = int(mine[0])
            elif hit.size:
                k = int(hit[np.lexsort(keys)[0]])
            elif fallback and (fresh := opening[ok[opening] & ~act[opening]]).size:
                k = int(fresh[0])
            else:
                break
            cur = cur.add(sh, job, k)
            chosen.append(k)
        if len(chosen) == workers:
            return np.array(chosen, dtype=np.int64)
    return None


def bfd_order(sh: SharingModel, rows: IntArray, jobs: IntArray) -> IntArray:
    """Algorithm 1's queue: ``jobs`` by their workers' compute need, descending (ties: peak
    memory share, descending; then the given order)."""
    r = rows[jobs]
    peak = sh.jobs.mem_gib[r] + sh.jobs.surge_gib[r]
    out: IntArray = jobs[np.lexsort((-peak, -sh.jobs.gpu_util[r]))]
    return out


def gregarious_order(p: FloatArray, queue: IntArray) -> IntArray:
    """Algorithm 3's order: before each pick, re-sort the remaining ``queue`` by gregariousness
    ``tau(i, V) = max_q p_i p_q`` (eq. 20: two workers collide with probability ``p_i p_q``)
    over the others still queued, ascending; ties keep the queue's order.

    Args:
        p: surge probability of each job (indexed by the entries of ``queue``).
        queue: the initial queue (Algorithm 3 line 1: resource requirement, descending).
    """
    left = list(int(j) for j in queue)
    out = []
    while left:
        q = p[left]
        partner = np.array([np.delete(q, i).max(initial=0.0) for i in range(len(left))])
        out.append(left.pop(int(np.argsort(q * partner, kind="stable")[0])))
    return np.array(out, dtype=np.int64)


def adjust(sh: SharingModel, rows: IntArray, placed: BoolArray, score: FloatArray,
           bounds: Bounds, budget: float, *, new_order: IntArray | None = None
           ) -> tuple[BoolArray, list[tuple[int, int, int]], float]:
    """Algorithm 4: migrate workers off the most interfered devices within ``budget``.

    The priority queue is the first half (rounded up) of the active devices by ``score``
    (observed interference), descending. From each one that holds two or more workers, the
    cheapest worker to move (cost: its base memory ``gamma`` in GiB, what a checkpoint moves)
    whose job stays balanced without it goes to the device :func:`place_workers` chooses under
    ``bounds`` (any device but its own), while the costs moved stay within ``budget``.

    Returns:
        The new placement, the moves ``(job row, from device, to device)``, the cost spent.
    """
    out = placed.copy()
    on = np.flatnonzero(out.any(axis=0))
    queue = on[np.argsort(-score[on], kind="stable")][:math.ceil(on.size / 2)]
    cost = sh.jobs.mem_gib[rows]
    spent, moves = 0.0, []
    for k in queue:
        members = np.flatnonzero(out[:, k])
        if members.size < 2:
            continue
        for q in members[np.argsort(cost[members], kind="stable")]:
            if spent + cost[q] > budget + EPS:
                break
            trial = out.copy()
            trial[q, k] = False
            if bounds.theta_balance is not None and not _removal_balanced(
                    sh, rows, out, trial, k, bounds.theta_balance):
                continue
            may = np.ones(out.shape[1], dtype=bool)
            may[k] = False
            dest = place_workers(sh, DeviceLoad.of(sh, rows, trial), int(rows[q]), 1, bounds,
                                 new_order=new_order, allowed=may)
            if dest is None:
                continue
            trial[q, dest[0]] = True
            out, spent = trial, spent + float(cost[q])
            moves.append((int(q), int(k), int(dest[0])))
            break
    return out, moves, spent


def _removal_balanced(sh: SharingModel, rows: IntArray, before: BoolArray, after: BoolArray,
                      k: int, limit: float) -> bool:
    """Whether taking a worker off device ``k`` leaves the other jobs there balanced."""
    stay = after[:, k]
    old = imbalance(sh.worker_slowdowns(rows, before), before)[stay]
    new = imbalance(sh.worker_slowdowns(rows, after), after)[stay]
    return bool((new <= np.maximum(limit, old) + EPS).all())
