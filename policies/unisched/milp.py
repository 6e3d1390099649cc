"""UniSched's Selector: the reward-maximising MILP (papers/unisched.md §III-C4, eqs. 4-14).

A pure function over NumPy arrays, testable without a simulator. Jobs bring allocation
candidates made of buddy cells (:mod:`policies.cells`).

**The MILP** (one per BE lease boundary). Time is cut into slots: slot 0 is the SLO lease that
starts now, later slots double in length (a coarse plan ahead, like Chronus's). Variables:

- ``z0[c]`` binary: candidate ``c`` runs in slot 0 (eq. 9's ``y``, with eq. 13's "one per job");
- ``zk[c, k]`` in [0, 1]: the fraction of later slot ``k`` candidate ``c`` runs (time-shared);
- ``u[j, f]`` binary: job ``j`` meets deadline step ``f`` or an earlier one; eq. 4's
  ``sum_f s_f V_f`` is ``sum_f u_f (V_f - V_f+1)`` with ``u_f <= u_f+1`` (eqs. 5-6), an
  equivalent form (given ``work_s`` equal or falling along the steps) that HiGHS solved about
  twice as fast as the ``s`` form on the hardest soft-SLO cycles we measured.

Objective (eq. 4): ``sum_f s_f V_f + sum z0 phi v``, where ``v`` is a job's reward for running now
(best-effort and profiler rewards, and the same best-effort reward for SLO jobs, so capacity
their deadlines do not need goes by remaining time). Deadlines (eqs. 7, 12): the work done
before ``D_f``, ``sum phi * (time of each slot before D_f) * z``, must reach ``W_f u_f``.
Capacity (eqs. 10, 11, 14): the cells taken in each slot satisfy Proposition 1, so a
consolidated placement exists (:func:`policies.cells.place_cells` builds it).

Deviation from the paper: its ``x_{k,i}`` are binary per lease over the whole horizon; here only
the decision for the current lease is binary and the future is a fractional plan over doubling
slots, which keeps the model small (hundreds of jobs solve in well under the paper's 10 s).

**Solving** (:func:`solve_selector`): the answer is the MILP's exact optimum, ties broken by
the rule of :mod:`policies.unisched.exact` (the first optimal assignment in job order). That
module's knapsack method answers wherever it can certify the later slots; HiGHS on this MILP
(:func:`solve_milp`, relative gap 0) answers the rest, within a node limit rather than a time
limit, so that the machine's load never changes a decision (HiGHS's choice among tied optima
is its own).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import coo_array

from policies.cells import LEVELS, NEST, candidates, node_cells
from policies.unisched.exact import solve_knapsack
from simulator.jit import configure_cache, njit
from simulator.rounds.view import gang_spread

configure_cache()

__all__ = ["HIGHS_OPTIONS", "NODES_PER_JOB", "NODE_LIMIT", "NODE_VARIABLES", "USABLE_GAP",
           "Selection", "SelectorInput", "charge", "milp_variables", "node_cost",
           "selector_arrays", "selector_input", "solve_milp", "solve_selector"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

NODE_LIMIT = 100_000
"""HiGHS branch-and-bound nodes per MILP by default (none of the recorded instances needs it)."""
NODES_PER_JOB = 1.0
"""HiGHS work per job of a simulation run by default, in nodes of a MILP of up to
:data:`NODE_VARIABLES` variables (:func:`node_cost`), each solve counting at least one node:
past that run's budget it asks HiGHS no more (:mod:`policies.unisched.policy`), so the
fallback's work is bounded per run, in proportion to the run, as a work limit."""
NODE_VARIABLES = 1_000
"""The MILP size (variables) one node of the budget pays for; a node of a larger MILP costs
:func:`node_cost` of them (HiGHS's CPU a node grows with the size: measured, fidelity page)."""
HIGHS_OPTIONS = MappingProxyType({"mip_heuristic_run_rens": False,
                                  "mip_heuristic_run_root_reduced_cost": False})
"""HiGHS options beyond SciPy's own (``milp`` passes them to HiGHS as given): two root-node
heuristics off. Both solve sub-MIPs with full cut rounds, and on the MILPs of hundreds of
waiting jobs (P_MIX1 with spread gangs at full speed) they were most of a solve's CPU time
while the optimum came from elsewhere (the fidelity page has the profile); the optimum does
not change, only how long HiGHS takes to prove it."""
USABLE_GAP = 0.05
"""A solution cut short by the node limit counts only if within this gap of the bound (HiGHS
offers trivial starting points, such as running nothing, that are no answer at all)."""


@dataclass(frozen=True, eq=False)
class SelectorInput:
    """One cycle's selection problem. Candidates are grouped by job, in job order.

    Attributes:
        cand_cells: ``(C, 4)`` cells of each candidate.
        cand_job: ``(C,)`` the job each candidate belongs to (non-decreasing).
        cand_phi: ``(C,)`` speed under the candidate relative to the consolidated one (eq. 8).
        now_value: ``(J,)`` reward for running in the current lease at full speed.
        may_start: ``(J,)`` the job is up for decision (False: it holds an SLO lease).
        work_s: ``(J, F)`` seconds at full speed the job needs before each deadline step
            (inf: out of reach; NaN: no such step); non-increasing along a job's steps, so
            meeting one step meets the later ones too.
        deadline_s: ``(J, F)`` each step's deadline, seconds from now.
        step_value: ``(J, F)`` reward for meeting each step.
        slot_s: ``(K,)`` slot lengths from now; slot 0 is the lease being decided.
        free_now: ``(4,)`` free cells in slot 0.
        free_later: ``(4,)`` cells in each later slot.
    """

    cand_cells: IntArray
    cand_job: IntArray
    cand_phi: FloatArray
    now_value: FloatArray
    may_start: BoolArray
    work_s: FloatArray
    deadline_s: FloatArray
    step_value: FloatArray
    slot_s: FloatArray
    free_now: IntArray
    free_later: IntArray


@dataclass(frozen=True, eq=False)
class Selection:
    """The selector's answer.

    Attributes:
        choice: ``(J,)`` candidate index (into ``cand_*``) run now, -1 for none.
        step: ``(J,)`` deadline step the plan meets, -1 for none.
        objective: total reward of the solution (NaN if there is none).
        status: HiGHS status (0 optimal, 1 node limit, ...; 0 from the exact method).
        usable: a solution came back, optimal or within :data:`USABLE_GAP` of the bound.
        solve_s: wall seconds in the solver.
        exact: answered by the exact knapsack method (:mod:`policies.unisched.exact`), not HiGHS.
        nodes: HiGHS's branch-and-bound nodes (0 from the exact method).
        variables: the MILP's variables (0 from the exact method).
    """

    choice: IntArray
    step: IntArray
    objective: float
    status: int
    usable: bool
    solve_s: float
    exact: bool = False
    nodes: int = 0
    variables: int = 0


@njit
def milp_variables(cand_job: Any, work_s: Any, deadline_s: Any, slots: int) -> int:
    """The variables of :func:`solve_milp`'s MILP for an instance (compiled, so a kernel can
    price a solve before asking for it): each candidate's slot-0 binary, its fractions of
    the later slots if its job has a deadline step in reach, and each such step's indicator."""
    n_jobs = work_s.shape[0]
    steps = np.zeros(n_jobs, dtype=np.int64)
    for j in range(n_jobs):
        for f in range(work_s.shape[1]):
            steps[j] += np.isfinite(work_s[j, f]) and deadline_s[j, f] > 0.0
    later = 0
    for c in range(cand_job.shape[0]):
        later += steps[cand_job[c]] > 0
    return int(cand_job.shape[0] + later * (slots - 1) + steps.sum())


def charge(sel: Selection) -> int:
    """Budget nodes a HiGHS solve costs: its nodes (at least one) at its MILP's
    :func:`node_cost`."""
    return max(sel.nodes, 1) * node_cost(sel.variables)


@njit
def node_cost(variables: int) -> int:
    """Budget nodes one HiGHS node of a MILP of ``variables`` variables costs: one per
    :data:`NODE_VARIABLES` started."""
    return max(1, -(-variables // NODE_VARIABLES))


def selector_input(cluster: Any, *, gpus: IntArray, model: IntArray, profiling: BoolArray,
                   now_value: FloatArray, may_start: BoolArray, work_s: FloatArray,
                   deadline_s: FloatArray, step_value: FloatArray, node_free: IntArray,
                   lease_s: float, slots: int) -> SelectorInput:
    """The MILP of one cycle for its member jobs (per-job arrays as :class:`SelectorInput`).

    Each job brings its buddy-cell candidates (only the consolidated one while profiling),
    a spread one running at its ``model``'s speed over 2 nodes where it has 2 cells and over
    3 or more where it has more (``gang_spread``: the most nodes its cells may span, each
    speed at most the one over fewer nodes, so never faster than it runs); a gang larger
    than a node, whose work is priced over the fewest nodes it fits, runs relative to that
    speed. Slots are one SLO lease (``lease_s``), then doubling, the last reaching the latest
    deadline still reachable.
    """
    cand_cells, cand_job, cand_phi, slot_s, free_now, free_later = selector_arrays(
        cluster.node_gpus, gang_spread(cluster, model, gpus), gpus, profiling, work_s,
        deadline_s, node_free, lease_s, slots)
    return SelectorInput(
        cand_cells=cand_cells, cand_job=cand_job, cand_phi=cand_phi, now_value=now_value,
        may_start=may_start, work_s=work_s, deadline_s=deadline_s, step_value=step_value,
        slot_s=slot_s, free_now=free_now, free_later=free_later)


@njit
def selector_arrays(node_gpus: Any, spread: Any, gpus: Any, profiling: Any,
                    work_s: Any, deadline_s: Any, node_free: Any, lease_s: float,
                    slots: int) -> tuple[Any, Any, Any, Any, Any, Any]:
    """:func:`selector_input`'s derived arrays (compiled, so a kernel builds them too):
    ``cand_cells``, ``cand_job``, ``cand_phi``, ``slot_s``, ``free_now``, ``free_later``."""
    top = int(min(3, np.floor(np.log2(node_gpus.max()))))
    cand_cells, cand_job, whole = _candidate_rows(gpus, profiling, top)
    horizon = 0.0  # the latest reachable deadline (NaN if one is NaN, as ndarray.max)
    for j in range(work_s.shape[0]):
        for f in range(work_s.shape[1]):
            v = deadline_s[j, f] if np.isfinite(work_s[j, f]) else 0.0
            if np.isnan(v) or v > horizon:
                horizon = v
    phi = np.ones(cand_job.shape[0])
    for c in range(phi.shape[0]):  # a candidate's cells may span as many nodes as it has
        j, cells = cand_job[c], cand_cells[c].sum()
        if not whole[c]:
            phi[c] = spread[j, 0 if cells == 2 else 1]
        elif cells > 2 and -(-gpus[j] // 2 ** top) == 2:  # work priced over 2 nodes
            phi[c] = spread[j, 1] / spread[j, 0]
    return (cand_cells, cand_job, phi, _slots(lease_s, horizon, slots),
            node_cells(node_free).sum(axis=0), node_cells(node_gpus).sum(axis=0))


@njit
def _candidate_rows(gpus: Any, profiling: Any, top: int) -> tuple[Any, Any, Any]:
    """Every job's buddy-cell candidates in job order (only the consolidated one while it
    profiles): their cells, their job, and whether each runs whole (consolidated, or a gang
    larger than a node that spans nodes anyway)."""
    n = gpus.shape[0]
    count = np.ones(n, dtype=np.int64)
    for j in range(n):
        if not profiling[j]:
            count[j] = candidates(gpus[j], top).shape[0]
    cells = np.zeros((count.sum(), LEVELS), dtype=np.int64)
    job, whole = np.zeros(count.sum(), dtype=np.int64), np.zeros(count.sum(), dtype=np.bool_)
    c = 0
    for j in range(n):
        rows = candidates(gpus[j], top)
        for k in range(count[j]):
            cells[c], job[c], whole[c] = rows[k], j, k == 0 or gpus[j] > 2 ** top
            c += 1
    return cells, job, whole


@njit
def _slots(lease_s: float, horizon_s: float, most: int) -> Any:
    """Slot lengths: one SLO lease, then doubling, the last reaching ``horizon_s`` (each
    partial sum is ``lease_s`` times a power of 2, so the order of adding does not matter)."""
    slots = np.zeros(max(most, 1))
    slots[0], n, total = lease_s, 1, lease_s
    while total < horizon_s and n < most:
        slots[n] = lease_s * 2.0 ** (n - 1)
        total += slots[n]
        n += 1
    rest = horizon_s - (total - slots[n - 1])
    if rest > slots[n - 1]:
        slots[n - 1] = rest
    return slots[:n].copy()


def solve_selector(inp: SelectorInput, *, node_limit: int = NODE_LIMIT,
                   rel_gap: float = 0.0) -> Selection:
    """The selector's answer: the exact knapsack method where it certifies the instance
    (:mod:`policies.unisched.exact`), else HiGHS on the MILP."""
    t0 = time.perf_counter()
    fast = solve_knapsack(inp)
    sel = (Selection(*fast, status=0, usable=True, solve_s=0.0, exact=True) if fast is not None
           else solve_milp(inp, node_limit=node_limit, rel_gap=rel_gap))
    return replace(sel, solve_s=time.perf_counter() - t0)


def solve_milp(inp: SelectorInput, *, node_limit: int = NODE_LIMIT,
               rel_gap: float = 0.0) -> Selection:
    """Build the MILP of eqs. 4-14 and solve it with HiGHS, within ``node_limit``
    branch-and-bound nodes (a work limit: the answer does not depend on the machine's load).
    """
    n_jobs, n_cand = inp.now_value.shape[0], inp.cand_job.shape[0]
    n_slots = inp.slot_s.shape[0]
    start = np.searchsorted(inp.cand_job, np.arange(n_jobs))
    count = np.bincount(inp.cand_job, minlength=n_jobs)
    step_ok = np.isfinite(inp.work_s) & (inp.deadline_s > 0)
    vj, vf = np.nonzero(step_ok)
    dl_job = np.flatnonzero(step_ok.any(axis=1))
    later = np.concatenate([np.arange(start[j], start[j] + count[j]) for j in dl_job]
                           ).astype(np.int64) if dl_job.size else np.zeros(0, dtype=np.int64)
    pos = np.full(n_cand, -1, dtype=np.int64)
    pos[later] = np.arange(later.size)
    n_later = later.size * (n_slots - 1)
    n_var = n_cand + n_later + vj.size
    s0 = n_cand + n_later

    cost = np.zeros(n_var)
    cost[:n_cand] = -inp.now_value[inp.cand_job] * inp.cand_phi
    # u[v] = "meets step v or an earlier one": the reward telescopes, V_f s_f = sum (V_f - V_f+1) u
    after = np.flatnonzero(vj[1:] == vj[:-1])  # steps v whose job has a next valid step v + 1
    gain = inp.step_value[vj, vf].copy()
    gain[after] -= inp.step_value[vj[after + 1], vf[after + 1]]
    cost[s0:] = -gain
    upper = np.ones(n_var)
    upper[:n_cand] = inp.may_start[inp.cand_job]
    integral = np.ones(n_var)
    integral[n_cand:s0] = 0.0

    rows: list[IntArray] = []
    cols: list[IntArray] = []
    vals: list[FloatArray] = []
    lo: list[FloatArray] = []
    hi: list[FloatArray] = []
    r = 0

    def add(row: IntArray, col: IntArray, val: FloatArray, n_rows: int, low: FloatArray,
            high: FloatArray) -> None:
        nonlocal r
        rows.append(row + r)
        cols.append(col)
        vals.append(val)
        lo.append(low)
        hi.append(high)
        r += n_rows

    ones = np.ones
    # eq. 13 in each slot: one candidate per job (slot 0), at most the whole slot (later)
    add(inp.cand_job, np.arange(n_cand), ones(n_cand), n_jobs, np.full(n_jobs, -np.inf),
        ones(n_jobs))
    later_job = np.searchsorted(dl_job, inp.cand_job[later])
    for k in range(1, n_slots):
        add(later_job, n_cand + (k - 1) * later.size + np.arange(later.size), ones(later.size),
            dl_job.size, np.full(dl_job.size, -np.inf), ones(dl_job.size))
    # eq. 6 (one step per job) as monotone cumulative indicators: u[v] <= u[v + 1]
    add(np.repeat(np.arange(after.size), 2), np.stack([s0 + after, s0 + after + 1]).T.ravel(),
        np.tile([1.0, -1.0], after.size), after.size, np.full(after.size, -np.inf),
        np.zeros(after.size))
    # eqs. 7 and 12: work before the deadline covers what the job needs
    if vj.size:
        reps = count[vj]
        which = np.repeat(np.arange(vj.size), reps)
        cand = np.repeat(start[vj], reps) + np.arange(reps.sum()) - np.repeat(
            np.cumsum(reps) - reps, reps)
        edges = np.concatenate([[0.0], np.cumsum(inp.slot_s)])
        avail = np.clip(inp.deadline_s[vj, vf][:, None] - edges[None, :-1], 0.0,
                        inp.slot_s[None, :])  # (steps, K)
        # each row divided by the work it asks for: coefficients near 1 keep HiGHS's numerics
        scale = 1.0 / np.maximum(inp.work_s[vj, vf], 1.0)
        avail *= scale[:, None]
        row_parts = [which, np.arange(vj.size)]
        col_parts = [cand, s0 + np.arange(vj.size)]
        val_parts = [inp.cand_phi[cand] * avail[which, 0], -inp.work_s[vj, vf] * scale]
        for k in range(1, n_slots):
            row_parts.append(which)
            col_parts.append(n_cand + (k - 1) * later.size + pos[cand])
            val_parts.append(inp.cand_phi[cand] * avail[which, k])
        add(np.concatenate(row_parts), np.concatenate(col_parts), np.concatenate(val_parts),
            vj.size, np.zeros(vj.size), np.full(vj.size, np.inf))
    # eqs. 10, 11, 14: the cells taken in each slot leave a consolidated placement
    weight = inp.cand_cells @ NEST  # (C, 4): level-i cells each candidate uses
    for k in range(n_slots):
        take = np.arange(n_cand) if k == 0 else later
        base = 0 if k == 0 else n_cand + (k - 1) * later.size
        col_of = np.arange(take.size) + base if k else take
        cap = (inp.free_now if k == 0 else inp.free_later) @ NEST
        lvl = np.repeat(np.arange(LEVELS)[None, :], take.size, axis=0).ravel()
        add(lvl, np.repeat(col_of, LEVELS), weight[take].ravel(), LEVELS,
            np.full(LEVELS, -np.inf), cap.astype(np.float64))

    from scipy.optimize import Bounds, LinearConstraint, milp  # slow to import: when used

    matrix = coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                       shape=(r, n_var)).tocsr()
    t0 = time.perf_counter()
    with _quiet_stdout(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unrecognized options", RuntimeWarning)  # HIGHS_OPTIONS
        res = milp(cost, integrality=integral, bounds=Bounds(np.zeros(n_var), upper),
                   constraints=LinearConstraint(matrix, np.concatenate(lo), np.concatenate(hi)),
                   options={"node_limit": node_limit, "mip_rel_gap": rel_gap, "disp": False,
                            **HIGHS_OPTIONS})
    solve_s = time.perf_counter() - t0
    choice = np.full(n_jobs, -1, dtype=np.int64)
    step = np.full(n_jobs, -1, dtype=np.int64)
    gap = getattr(res, "mip_gap", None)
    nodes = int(getattr(res, "mip_node_count", 0) or 0)
    if res.x is None or (res.status != 0 and (gap is None or gap > USABLE_GAP)):
        return Selection(choice, step, float("nan"), int(res.status), False, solve_s,
                         nodes=nodes, variables=n_var)
    on = np.flatnonzero(res.x[:n_cand] > 0.5)
    choice[inp.cand_job[on]] = on
    hit = np.flatnonzero(res.x[s0:] > 0.5)[::-1]  # the earliest step met wins
    step[vj[hit]] = vf[hit]
    return Selection(choice, step, float(-res.fun), int(res.status), True, solve_s, nodes=nodes,
                     variables=n_var)


_STDOUT_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence file descriptor 1 while HiGHS runs.

    The HiGHS bundled with SciPy 1.17 prints a stray debugging line
    ("HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();") straight to
    the C stdout whenever it repairs an incumbent, whatever ``disp`` says (fixed upstream in
    ERGO-Code/HiGHS#2783). Python's own ``sys.stdout`` is flushed first and restored after.
    """
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else -1
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        yield
        return
    with _STDOUT_LOCK:
        sys.stdout.flush()
        saved = os.dup(fd)
        try:
            with open(os.devnull, "wb") as sink:
                os.dup2(sink.fileno(), fd)
                try:
                    yield
                finally:
                    _flush_c_stdout()
                    os.dup2(saved, fd)
        finally:
            os.close(saved)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # no C library handle on this platform
        return None


def _flush_c_stdout() -> None:
    """Flush the C library's stdout buffer, so HiGHS's text lands in the sink, not later."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):
            libc.fflush(None)
