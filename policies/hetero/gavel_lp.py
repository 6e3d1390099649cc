"""Gavel's allocations: its LP (max-min fairness or max-sum throughput), its finish-time
fairness program, its makespan search, and its FIFO.

Max-min fairness and max-sum throughput are solved with ECOS as Gavel's cvxpy hands them over
(:func:`cvxpy_max_min`, :func:`cvxpy_max_sum`), or with HiGHS's interior point. Finish-time fairness
is a second-order cone program: ECOS gets it as cvxpy hands it over. The makespan policy
(:func:`cvxpy_min_total_duration`) searches for the shortest feasible makespan, one ECOS
feasibility LP per try, each as cvxpy hands it over. "As cvxpy hands it over"
means the same variables, rows, cones and coefficients, each computed as Gavel computes it:
given Gavel's measured throughputs (:class:`simulator.inputs.scaling.TypeSpeeds`'s
``gang_steps_per_s``) ECOS gets Gavel's program to the last bit, so it returns Gavel's
allocations to the last bit (ECOS is deterministic). :mod:`policies.hetero.gavel` realises an
allocation in rounds. Python's ``random`` generators whose state the round kernel's memory
carries (:func:`rng`, :func:`save`) make Gavel's seeded draws reproducible.
"""

from __future__ import annotations

import functools
import random
import threading
from typing import Any

import ecos
import numpy as np
import numpy.typing as npt
from scipy import sparse

__all__ = ["allocation", "cvxpy_max_min", "cvxpy_max_sum", "cvxpy_min_total_duration", "fifo",
           "finish_time_allocation", "gavel_allocation", "isolated", "rng", "save"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_Csc = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], FloatArray]
"""A matrix as compressed columns: column starts, row indices, values."""
_THREAD = threading.local()


def _matrix(demand: IntArray, m: int, ratio: FloatArray | None = None) -> _Csc:
    """The LP's ``<=`` rows over the variables ``x[j, t]`` (column ``j m + t``): one per job
    for ``-ratio_j . x_j`` when ``ratio`` is given, then ``sum_t x[j, t] <= 1`` per job and
    ``sum_j demand_j x[j, t] <= gpus_t`` per type; each column lists its rows in order."""
    n = demand.shape[0]
    jobs = np.repeat(np.arange(n, dtype=np.int32), m)
    types = np.tile(np.arange(m, dtype=np.int32), n)
    top = 0 if ratio is None else n
    rows = [top + jobs, top + n + types]
    values = [np.ones(n * m), np.repeat(demand.astype(np.float64), m)]
    if ratio is not None:
        rows.insert(0, jobs)
        values.insert(0, -ratio.ravel())
    index = np.stack(rows, axis=1).ravel()
    return (np.arange(0, index.shape[0] + 1, len(rows), dtype=np.int32), index,
            np.stack(values, axis=1).ravel())


def gavel_allocation(throughput: FloatArray, demand: IntArray, type_gpus: IntArray,
                     objective: str = "max_min", solver: str = "ecos",
                     steps: FloatArray | None = None) -> FloatArray:
    """Gavel's LP: the time fraction ``x[j, t]`` each job should run on each type.

    Args:
        throughput: ``(jobs, types)`` rate of each job with its gang on each type (ones for
            the heterogeneity-agnostic policies).
        demand: gang sizes.
        type_gpus: GPUs of each type.
        objective: ``"max_min"``, ``"max_sum"`` or ``"makespan"`` (module docstring).
        solver: ``"ecos"`` (what Gavel's cvxpy calls: its allocations, module docstring) or
            ``"highs"`` (HiGHS's interior point, another optimum where there are several;
            not for ``"makespan"``, which is ECOS's alone).
        steps: ``"makespan"``: the work each job has left, in ``throughput``'s units times
            seconds.

    Raises:
        RuntimeError: the solver found no optimum (cannot happen: ``x = 0`` is feasible).
    """
    n, m = throughput.shape
    if n == 0:
        return np.zeros((0, m))
    if objective == "makespan":
        assert steps is not None
        return cvxpy_min_total_duration(throughput, demand, type_gpus, steps)
    if solver == "ecos":
        solved = cvxpy_max_min if objective == "max_min" else cvxpy_max_sum
        return solved(throughput, demand, type_gpus)
    b_cap = np.concatenate([np.ones(n), type_gpus.astype(np.float64)])
    if objective == "max_sum":
        return _solve(-throughput.ravel(), _matrix(demand, m), b_cap, False).reshape(n, m)
    # max z with z <= sum_t x[j, t] s_j X[j, t] / P_j (variables: x, then z)
    fair = throughput @ (type_gpus / type_gpus.sum())
    start, index, value = _matrix(demand, m, throughput * (demand / fair)[:, None])
    cost = np.zeros(n * m + 1)
    cost[-1] = -1.0
    with_z = (np.append(start, np.int32(index.shape[0] + n)),
              np.concatenate([index, np.arange(n, dtype=np.int32)]),
              np.concatenate([value, np.ones(n)]))
    x = _solve(cost, with_z, np.concatenate([np.zeros(n), b_cap]), True)
    return x[:-1].reshape(n, m)


def cvxpy_max_min(throughput: FloatArray, demand: IntArray, type_gpus: IntArray
                  ) -> FloatArray:
    """Gavel's max-min LP (``max_min_fairness`` and ``_perf``) solved by ECOS as cvxpy 1.x
    hands it over from Gavel's expression, so that ECOS does the same arithmetic: the
    allocation ``(jobs, types)``, types in the profile's order.

    Gavel's types are in name order (k80 < p100 < v100: the reverse of the profile's), its
    weights ``1 / P_j`` with ``P_j`` the job's throughput under ``x_prop = (gpus_t / n) /
    sum_t (gpus_t / n)``, and its coefficients ``(X[j, t] (1 / P_j)) s_j``, each rounded as
    numpy rounds them there. cvxpy's program: the variables ``z`` (minus the smallest
    weighted rate), then ``x`` column by column; the ``<=`` rows ``-z - coefficient_j . x_j``
    per job, ``-x`` per variable, ``sum_j s_j x[j, t]`` per type and ``sum_t x[j, t]`` per job.
    The answer is ``x`` clipped to ``[0, 1]``, whatever ECOS's exit (Gavel only warns).
    """
    X = throughput[:, ::-1]
    n, m = X.shape
    share = np.array([[g / n for g in type_gpus[::-1].tolist()]] * n)
    share = share / np.sum(share, axis=1).max()
    weight = 1.0 / np.sum(np.multiply(X, share), axis=1).reshape((n, 1))
    coef = np.multiply(X * weight, np.repeat(demand.astype(np.float64)[:, None], m, axis=1))
    rows, values = _base_rows(demand, m, first=-coef.T.ravel())
    indptr = np.concatenate([[0], n + 4 * np.arange(n * m + 1)]).astype(np.int32)
    indices = np.concatenate([np.arange(n), rows.ravel()]).astype(np.int32)
    data = np.concatenate([-np.ones(n), values.ravel()])
    g = sparse.csc_matrix((data, indices, indptr), shape=(n + n * m + m + n, 1 + n * m))
    g.eliminate_zeros()  # cvxpy leaves out a zero coefficient (a type a job cannot use)
    h = np.concatenate([np.zeros(n), _base_bounds(type_gpus, n)])
    cost = np.zeros(1 + n * m)
    cost[0] = 1.0
    sol = ecos.solve(cost, g, h, {"l": h.shape[0], "q": [], "e": 0}, verbose=False)
    x = np.asarray(sol["x"], dtype=np.float64)[1:].reshape(m, n).T
    return np.clip(x, 0.0, 1.0)[:, ::-1].copy()


def cvxpy_max_sum(throughput: FloatArray, demand: IntArray, type_gpus: IntArray
                  ) -> FloatArray:
    """Gavel's max-sum LP (``max_sum_throughput_perf``: maximize ``sum x[j, t] X[j, t]``,
    ``X`` its measured steps per second) solved by ECOS as cvxpy 1.x hands it over: the
    allocation ``(jobs, types)``, types in the profile's order. The variables ``x`` column by
    column over Gavel's name order of the types; the cost ``-X`` (cvxpy's ``0 - X``: no
    negative zeros); the rows of :func:`_base_rows`. ``x`` clipped to ``[0, 1]`` whatever
    ECOS's exit, as in Gavel."""
    X = throughput[:, ::-1]
    n, m = X.shape
    rows, values = _base_rows(demand, m)
    g = sparse.csc_matrix((values.ravel(), rows.ravel().astype(np.int32),
                           (3 * np.arange(n * m + 1)).astype(np.int32)),
                          shape=(n * m + m + n, n * m))
    h = _base_bounds(type_gpus, n)
    sol = ecos.solve(0.0 - X.T.ravel(), g, h, {"l": h.shape[0], "q": [], "e": 0},
                     verbose=False)
    x = np.asarray(sol["x"], dtype=np.float64).reshape(m, n).T
    return np.clip(x, 0.0, 1.0)[:, ::-1].copy()


def _base_rows(demand: IntArray, m: int, first: FloatArray | None = None,
               last: FloatArray | None = None) -> tuple[IntArray, FloatArray]:
    """Gavel's base constraints as cvxpy lays them out, for the variables ``x[j, t]`` column
    by column (``(type, job)``, ``m`` types in Gavel's name order): each column's rows and
    coefficients (``(n m, k)`` each): ``-x`` per variable, ``sum_j s_j x[j, t]`` per type,
    ``sum_t x[j, t]`` per job; with ``first`` (a coefficient per column), a row per job
    before them (max-min's epigraph rows), with ``last`` one after them (makespan's work
    rows)."""
    n = demand.shape[0]
    job = np.tile(np.arange(n), m)
    kind = np.repeat(np.arange(m), n)
    top = 0 if first is None else n
    rows = [top + np.arange(n * m), top + n * m + kind, top + n * m + m + job]
    values = [-np.ones(n * m), demand.astype(np.float64)[job], np.ones(n * m)]
    if first is not None:
        rows.insert(0, job)
        values.insert(0, first)
    if last is not None:
        rows.append(top + n * m + m + n + job)
        values.append(last)
    return np.stack(rows, axis=1), np.stack(values, axis=1)


def _base_bounds(type_gpus: IntArray, n: int) -> FloatArray:
    """The right-hand sides of :func:`_base_rows`' rows for ``n`` jobs."""
    m = type_gpus.shape[0]
    return np.concatenate([np.zeros(n * m), type_gpus[::-1].astype(np.float64), np.ones(n)])


def cvxpy_min_total_duration(throughput: FloatArray, demand: IntArray, type_gpus: IntArray,
                             steps: FloatArray) -> FloatArray:
    """Gavel's makespan policy (``min_total_duration`` and ``_perf``): the allocation
    ``(jobs, types)``, types in the profile's order, under which every job can finish its
    ``steps`` left within the shortest makespan ``T`` Gavel's search finds.

    Gavel searches ``T`` in seconds: halving ``[100, 1e6]`` while its upper end is more than
    1.05 times its lower, keeping the upper end at every ``T`` that is feasible (ECOS says
    optimal: exit 0; any other answer counts as infeasible), and, if none was, the next
    decade ``[1e6, 1e7]`` likewise, and so on. The answer is the ``x`` of the last feasible
    ``T``, clipped to ``[0, 1]``. Each try is the feasibility LP (a constant objective) cvxpy
    1.x hands ECOS from Gavel's expression, over the types in Gavel's name order (k80 < p100
    < v100): the variables ``x`` column by column; the ``<=`` rows ``-x`` per variable,
    ``sum_j s_j x[j, t]`` per type, ``sum_t x[j, t]`` per job, then ``-X_j . x_j <=
    -steps_j / T`` per job (exact zeros left out).

    Raises:
        RuntimeError: ECOS failed (Gavel's cvxpy raises then too), or no ``T`` up to 1e30 s
            is feasible (a job that can run nowhere).
    """
    X = throughput[:, ::-1]
    n, m = X.shape
    rows, values = _base_rows(demand, m, last=-X.T.ravel())
    g = sparse.csc_matrix((values.ravel(), rows.ravel().astype(np.int32),
                           (4 * np.arange(n * m + 1)).astype(np.int32)),
                          shape=(n * m + m + 2 * n, n * m))
    g.eliminate_zeros()
    fixed = _base_bounds(type_gpus, n)
    cost = np.zeros(n * m)
    dims = {"l": g.shape[0], "q": [], "e": 0}

    def feasible(T: float) -> FloatArray | None:
        sol = ecos.solve(cost, g.copy(), np.concatenate([fixed, -(steps / T)]), dims,
                         verbose=False)
        flag = sol["info"]["exitFlag"]
        if flag in (-2, -3, -4, -7):
            raise RuntimeError(f"Gavel makespan LP: ECOS returned {sol['info']['infostring']}")
        return np.asarray(sol["x"], dtype=np.float64) if flag == 0 else None

    low, high, found = 100.0, 1e6, None
    while found is None:
        if high > 1e30:
            raise RuntimeError("Gavel makespan LP: no makespan up to 1e30 s is feasible")
        top = high
        while 1.05 * low < high:
            T = (low + high) / 2.0
            x = feasible(T)
            if x is None:
                low = T
            else:
                found, high = x, T
        low, high = top, top * 10.0
    return np.clip(found.reshape(m, n).T, 0.0, 1.0)[:, ::-1].copy()


def isolated(demand: IntArray, type_gpus: IntArray) -> FloatArray:
    """Gavel's isolated shares ``(jobs, types)``: every type's GPUs split evenly over the
    jobs, scaled down where that is more than all of a job's time."""
    n = demand.shape[0]
    x = np.array([[g / n for g in type_gpus.tolist()]] * n) / demand.astype(np.float64)[:, None]
    out: FloatArray = x / np.maximum(np.sum(x, axis=1), 1.0)[:, None]
    return out


def finish_time_allocation(throughput: FloatArray, demand: IntArray, type_gpus: IntArray,
                           remaining: FloatArray, since: FloatArray, cumulative: FloatArray
                           ) -> tuple[FloatArray, FloatArray]:
    """Gavel's finish-time fairness (``finish_time_fairness_perf``): the allocation that
    minimizes the largest ``(since_j + remaining_j / (X_j . x_j)) / (cumulative_j + remaining_j
    / I_j)``, ``I_j = X_j . isolated_j`` (:func:`isolated`), and the rates ``I``.

    Args:
        throughput: ``(jobs, types)`` steps per second of each job's gang on each type.
        demand: gang sizes; ``type_gpus``: GPUs of each type.
        remaining: steps each job has left; ``since``: seconds since it arrived.
        cumulative: the time each job would have needed so far at its isolated rates.

    ECOS gets the cone program cvxpy builds from Gavel's expression: the variables ``t``
    (the epigraph of the largest ratio, absent for one job), ``x`` column by column, then
    ``s_j >= 1 / (X_j . x_j)`` (for one job cvxpy puts its ``s`` first); the rows ``t >=
    ratio_j``, ``x >= 0``, the types' GPUs, each job's time, then per job the cone ``(X_j .
    x_j + s_j, X_j . x_j - s_j, 2)``. Where it finds no solution, the isolated shares are
    the answer, as in Gavel. Given Gavel's throughputs (steps per second, as measured) it
    hands ECOS Gavel's program to the last bit.
    """
    n, m = throughput.shape
    if n == 0:
        return np.zeros((0, m)), np.zeros(0)
    share = isolated(demand, type_gpus)
    rate = np.sum(np.multiply(throughput, share), axis=1)
    inverse = 1.0 / (cumulative + remaining / rate)  # cvxpy divides by multiplying
    top = 1 if n > 1 else 0  # t's column; one job has its ratio as the objective
    xcol = 1 + (np.arange(m)[None, :] * n + np.arange(n)[:, None])  # x[j, t]'s column
    scol = top + n * m + np.arange(n) if top else np.zeros(1, dtype=np.int64)
    cols = top + n * m + n
    rows, vals, where = [], [], []

    def put(r: Any, c: Any, v: Any) -> None:
        r, c, v = np.broadcast_arrays(r, c, v)
        rows.append(r.ravel())
        where.append(c.ravel())
        vals.append(np.asarray(v, dtype=np.float64).ravel())

    h = []
    at = 0
    if top:  # -t + remaining_j / alone_j s_j <= -since_j / alone_j
        put(np.arange(n), 0, -1.0)
        put(np.arange(n), scol, remaining * inverse)
        h.append(-(since * inverse))
        at = n
    order = np.argsort(xcol.ravel())  # x >= 0, in column order
    put(at + np.arange(n * m), xcol.ravel()[order], -1.0)
    h.append(np.zeros(n * m))
    at += n * m
    put(at + np.arange(m)[None, :], xcol, demand.astype(np.float64)[:, None])
    h.append(type_gpus.astype(np.float64))
    at += m
    put(at + np.arange(n)[:, None], xcol, 1.0)
    h.append(np.ones(n))
    at += n
    linear = at
    cone = at + 3 * np.arange(n)
    put(cone[:, None], xcol, -throughput)
    put(cone[:, None] + 1, xcol, -throughput)
    put(cone, scol, -1.0)
    put(cone + 1, scol, 1.0)
    h.append(np.tile([0.0, 0.0, 2.0], n))
    g = sparse.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(where))),
                          shape=(linear + 3 * n, cols)).tocsc()
    g.eliminate_zeros()
    g.sort_indices()
    cost = np.zeros(cols)
    if top:
        cost[0] = 1.0
    else:
        cost[scol[0]] = remaining[0] * inverse[0]
    sol = ecos.solve(cost, g, np.concatenate(h), {"l": linear, "q": [3] * n, "e": 0},
                     verbose=False)
    if sol["info"]["exitFlag"] not in (0, 10, -1):  # cvxpy keeps these solutions
        return share, rate
    return np.clip(np.asarray(sol["x"])[xcol], 0.0, 1.0), rate


def _solve(cost: FloatArray, a_ub: _Csc, b_ub: FloatArray, free_last: bool) -> FloatArray:
    """HiGHS on ``min cost.x, a_ub x <= b_ub, x >= 0`` (the last column free if
    ``free_last``: Gavel's epigraph variable): the model SciPy's ``milp`` passes it, handed
    over directly (its checks and conversions cost more than the solve)."""
    start, index, value = a_ub
    n, rows = cost.shape[0], b_ub.shape[0]
    lower = np.zeros(n)
    lower[-1] = -np.inf if free_last else 0.0
    highs, h = _highs()
    h.passModel(n, rows, index.shape[0], int(highs.MatrixFormat.kColwise),
                int(highs.ObjSense.kMinimize), 0.0, cost, lower,
                np.full(n, np.inf), np.full(rows, -np.inf), b_ub, start, index, value,
                np.zeros(n, dtype=np.int32))
    h.run()
    status = h.getModelStatus()
    if status != highs.HighsModelStatus.kOptimal:
        raise RuntimeError(f"Gavel LP: HiGHS returned {h.modelStatusToString(status)}")
    return np.clip(np.asarray(h.getSolution().col_value, dtype=np.float64), 0.0, 1.0)


def _highs() -> tuple[Any, Any]:
    """SciPy's HiGHS module (highspy's API; imported when first solving, scipy.optimize is
    slow to import) and this thread's HiGHS, kept between solves (passing a model drops the
    last one's basis and solution), quiet and without presolve: on these LPs of a few dozen
    columns presolve costs more than it saves."""
    from scipy.optimize._highspy import _core as highs

    h = getattr(_THREAD, "highs", None)
    if h is None:
        h = _THREAD.highs = highs._Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "off")
    return highs, h


@functools.lru_cache(maxsize=4096)
def allocation(throughput: bytes, demand: bytes, type_gpus: bytes, objective: str,
                solver: str, steps: bytes = b"") -> FloatArray:
    """:func:`gavel_allocation` of the float64 rates (and work left, for ``"makespan"``) and
    int64 gang sizes and GPUs these bytes hold, read-only. The same inputs hand the solver
    the same model, hence get the same answer, so each is solved once (playouts meet the
    active sets the run met)."""
    gpus = np.frombuffer(type_gpus, dtype=np.int64)
    x = gavel_allocation(np.frombuffer(throughput).reshape(-1, gpus.shape[0]),
                         np.frombuffer(demand, dtype=np.int64), gpus, objective, solver,
                         np.frombuffer(steps) if steps else None)
    x.flags.writeable = False
    return x


def rng(words: IntArray) -> random.Random:
    """A Python ``random.Random`` in the state ``words`` hold (:func:`save`)."""
    out = random.Random()
    out.setstate((3, tuple(int(w) for w in words), None))
    return out


def save(generator: random.Random, words: IntArray) -> None:
    """Keep ``generator``'s state in ``words`` (625 of them)."""
    words[:] = generator.getstate()[1]


def fifo(rows: IntArray, rate: FloatArray, demand: IntArray, type_gpus: IntArray,
         kept: dict[int, int], aware: bool, draws: random.Random) -> dict[int, int]:
    """Gavel's FIFO allocation: workload row -> type, for the active ``rows`` (in arrival
    order, with their ``rate`` and ``demand``).

    ``kept``: the agnostic policy's choices from its last call, finished rows included (a
    finished job's type goes to the head of the queue if it has room there, room counted
    before the jobs after it, as in Gavel). Types are tried in the reverse of the profile's
    order: Gavel sorts their names, and k80 < p100 < v100."""
    pos = {int(r): a for a, r in enumerate(rows)}
    alloc = {} if aware else dict(kept)
    free = [int(g) for g in type_gpus]
    queue = [int(r) for r in rows if int(r) not in alloc]
    for r in sorted(alloc):
        t = alloc[r]
        if r in pos:
            free[t] -= int(demand[pos[r]])
            continue
        head = pos[queue[0]] if queue else -1
        if head >= 0 and demand[head] <= free[t] and rate[head, t] > 0:
            alloc[queue.pop(0)] = t
            free[t] -= int(demand[head])
        del alloc[r]
    open_types = [t for t in reversed(range(len(free))) if free[t] > 0]
    while queue and open_types:
        j = pos[queue[0]]
        where = [i for i, t in enumerate(open_types) if free[t] >= demand[j]]
        if not where:
            break
        row = queue.pop(0)
        if aware:
            pick, idx, best = -1, -1, -1.0
            for k, i in enumerate(where):
                if rate[j, open_types[i]] > best:
                    pick, idx, best = open_types[i], k, rate[j, open_types[i]]
        else:
            idx, pick = draws.randrange(len(where)), open_types[-1]
        if rate[j, pick] > 0:
            alloc[row] = pick
            free[pick] -= int(demand[j])
            if free[pick] == 0:
                open_types.pop(where[idx])
    return alloc
