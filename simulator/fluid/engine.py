"""The event-driven fluid engine, compiled with numba.

Between events every running job progresses at a constant rate (its speed-up at the GPUs it
holds), so the next completion is computed, not stepped. Events are arrivals (one job each),
completions (one job each; ties go to the earliest arrival, or for a policy whose history is
"rank" to the first in its kernel's last order), policy ticks (``tick_s`` after
the last event) and the ends of restart pauses. At equal times a completion is handled before
an arrival, and a tick before an arrival (as its own event); a tick due with a completion is
not taken (the completion's decision restarts the timer). After every event the policy's
kernel re-decides every allocation. These are the PCS simulator's semantics (PCS code,
``GenericScheduler``, ``ThemisScheduler``); PCS keeps times in whole microseconds and this
engine in float seconds, which moves JCTs by less than 1e-8 relative, or, for a policy that
sets ``pcs_clock`` (LAS, whose exact ties turn on PCS's rounding: ``docs/fidelity/pcs.md``),
in PCS's microseconds, rounded as ``datetime`` rounds.

State lives in two 2-D arrays (float and int rows x job columns, in arrival order), so a fork
for a JCT-prediction playout is a few array copies. The loop and the policy kernels are
compiled when first used, once per machine, then loaded from the cache (:mod:`simulator.jit`).

Between decisions only the *held* jobs (holding GPUs, in a restart pause, or with no work
left) change or can end, so progress and the next completion are computed over them alone; a
waiting job's terms would be exact zeros. The run keeps them in arrival order (the GPUs in use
are summed in one order); a playout does not sort them, as nothing it keeps depends on their
order (the next completion's ties are broken by column, that is by arrival).

numba takes and drops a reference on each array a compiled function is passed, inlined
(``inline="always"``) or not, an atomic operation; with a few dozen held jobs an event's
reference counting cost more than its arithmetic (``benchmarks/bench_simulate.py`` measures
the playouts). So a decision skips the jobs it leaves as they are (``_keeps``), and a
playout's event loop (:func:`_play`) is compiled without reference counting: it allocates
nothing, and the arrays it reads are owned by its caller. The decision itself takes one of
two paths:

* the full path: the policy's kernel re-decides every active job (all per-job arrays cover
  the active jobs only, in arrival order; a finished job's column is removed at once)::

    kernel(params, aux, now, gpus, arrival, demand, est_size, est_remaining, attained,
           alloc, model, speedup, out) -> None    # writes the new allocation into ``out``

* the queue path, for a policy that serves fixed classes, each in arrival order, from the
  classes' total demands (WFQ, FIFO): the engine keeps one linked queue per class (a job's
  class is given at arrival) and each class's demand, and the queue kernel walks the queues
  only as far as it hands out GPUs, writing (column, GPUs) pairs; a held job it does not
  name gets none::

    queue_kernel(params, aux, gpus, class_demand, head, next, demand, model, pos, val)
        -> int    # the number of pairs written into ``pos`` and ``val``

  A finished job's column is left dead and the columns are compacted when the dead ones
  outnumber the live ones, so a completion costs O(held jobs), amortised.
"""

from __future__ import annotations

import time
from collections import namedtuple
from typing import Any

import numba as nb
import numpy as np

from simulator.inputs.profile import ClusterProfile
from simulator.inputs.workload import Workload
from simulator.jit import compile_cpu_s, compiled, configure_cache, njit, njit_lazily
from simulator.order import stable_order
from simulator.result import SimulationResult
from simulator.view import Scheduler

configure_cache()  # before any @njit(cache=True) below, and before the policies' kernels

from simulator.fluid.columns import (  # noqa: E402
    ALLOC,
    ARR,
    CLASS,
    DEMAND,
    EST,
    HISTORIES,
    INF,
    JOB,
    MARK,
    MODEL,
    NEXT,
    REM,
    SEEN,
    SEEN_N,
    SIZE,
    _advance,
    _apply,
    _compact,
    _enqueue,
    _finish,
    _history,
    _holds,
    _keeps,
    _next_end,
    _scan_held,
    speed_at,
    us_after,
)

__all__ = ["HISTORIES", "KERNELS", "KERNEL_SIG", "PLAYOUTS", "QUEUE_SIG", "run", "speed_at"]


_f8, _i8 = nb.types.float64, nb.types.int64
_F1, _F2, _I1 = nb.types.float64[:], nb.types.float64[:, :], nb.types.int64[:]
# workload, scaling and policy tables are read-only (immutable values)
_RF2 = nb.types.Array(nb.types.float64, 2, "A", readonly=True)
KERNEL_SIG = nb.types.void(_F1, _RF2, _f8, _f8, _F1, _I1, _F1, _F1, _F1, _F1, _I1, _RF2, _F1)
"""Numba signature every policy kernel is compiled with (one engine serves them all)."""
_KERNEL = nb.types.FunctionType(KERNEL_SIG)
QUEUE_SIG = _i8(_F1, _RF2, _f8, _F1, _I1, _I1, _I1, _I1, _I1, _F1)
"""Numba signature of a queue kernel (the queue path, see the module's docstring)."""
_QUEUE = nb.types.FunctionType(QUEUE_SIG)
RANKED = HISTORIES.index("rank")

FluidCluster = namedtuple("FluidCluster", ["gpus", "tick_s", "restart_s", "speedup",
                                           "history", "clock_us", "playout"])
"""The cluster as the engine sees it: its GPUs, the policy's tick (0: none), the restart
overhead, the speed-up table (models x GPUs, read-only), what the kernel's history argument
carries (the policy's ``history`` as its index in ``HISTORIES``) and the clock: float seconds,
or (``clock_us``) PCS's whole microseconds, in which unit the tick, the restart overhead, the
arrivals and every time the engine keeps or writes are then given; and how a playout starts
(the policy's ``playout`` as its index in :data:`PLAYOUTS`)."""
PLAYOUTS = ("2024-06-03", "2024-05-31", "2024-05-30")
"""How a JCT-prediction playout starts, named by the state of PCS's code it follows:
``2024-06-03`` (PCS's 1abf4e4 to this day) plays the snapshot out with each job's estimated
size and remaining work, the pending tick kept; ``2024-05-31`` (PCS's 211245d) gives each
job its estimated remaining work as its size too (PCS's ``estimated_service`` was then the
work left, and a snapshot copies it as the size); ``2024-05-30`` (PCS's 06ba618) does that and
drops the pending tick until the playout's next event, its first completion where restarts
cost nothing as on PCS's clusters (PCS's snapshot then carried no re-division event). Only a
policy that reads job sizes or ticks (Themis) sees a difference. The two earlier states are
held to PCS's code with exact size estimates only (``tests/fixtures/pcs``)."""
FluidJobs = namedtuple("FluidJobs", ["arrival", "service", "est_service", "demand", "model",
                                     "job_class"])
"""The workload's columns the engine reads (read-only, C-ordered), each job's queue class
last (empty off the queue path)."""
FluidOut = namedtuple("FluidOut", ["start", "finish", "pred_start", "pred_finish", "seen_sum",
                                   "seen_cnt", "preempt"])
"""What the engine writes per job, in place: start and finish, the predicted ones (NaN
without prediction), the active jobs seen at its events (sum and count) and its
preemptions."""
_CF1 = nb.types.Array(nb.types.float64, 1, "C", readonly=True)
_CI1 = nb.types.Array(nb.types.int64, 1, "C", readonly=True)
_CLUSTER = nb.types.NamedTuple(
    (_f8, _f8, _f8, nb.types.Array(nb.types.float64, 2, "C", readonly=True), _i8,
     nb.types.boolean, _i8), FluidCluster)
_JOBS = nb.types.NamedTuple((_CF1, _CF1, _CF1, _CI1, _CI1, _CI1), FluidJobs)
_OUT = nb.types.NamedTuple((*[nb.types.float64[::1]] * 6, nb.types.int64[::1]), FluidOut)


@njit_lazily(QUEUE_SIG)
def no_queue(params: Any, aux: Any, gpus: float, class_demand: Any, head: Any, nxt: Any,
             demand: Any, model: Any, pos: Any, val: Any) -> int:
    """The queue kernel passed for a policy that takes the full path (never called)."""
    return 0


@njit_lazily(KERNEL_SIG)
def no_kernel(params: Any, aux: Any, now: float, gpus: float, arrival: Any, demand: Any,
              est_size: Any, est_rem: Any, attained: Any, alloc: Any, model: Any,
              speedup: Any, out: Any) -> None:
    """The full-path kernel passed when a policy takes the queue path (never called): its
    own kernel need not compile for a run that never calls it."""


@njit(inline="always")
def _decide(kernel: Any, qkernel: Any, params: Any, aux: Any, gpus: float, restart_s: float,
            speedup: Any, F: Any, I: Any, cols: int, Q: Any, queued: bool, held: Any, h: int,
            now: float, S: Any, preempt: Any, start: Any, record: bool, watch: int,
            hist: Any) -> tuple[float, bool, int]:
    """Ask the policy (the full path's kernel gets ``hist``, see :func:`_history`), apply
    the allocation, set rates.

    Returns:
        (next pause end, watch started, held count).
    """
    out, pos, val = S
    pause_at = INF
    hit = False
    if not queued:
        kernel(params, aux, now, gpus, F[ARR, :cols], I[DEMAND, :cols], F[SIZE, :cols],
               F[EST, :cols], hist, F[ALLOC, :cols], I[MODEL, :cols], speedup,
               out[:cols])
        k = 0
        for i in range(cols):
            p = INF  # what _apply returns for a job it would leave as it is
            if not _keeps(F, i, out[i], now):
                p, w = _apply(F, I, i, out[i], now, restart_s, speedup, record, preempt, start,
                              watch)
                pause_at, hit = min(pause_at, p), hit or w
            if out[i] > 0.0 or p < INF or F[REM, i] <= 0.0:  # _holds, from what was just set
                held[k] = i
                k += 1
        return pause_at, hit, k
    head, _, class_demand = Q
    m = qkernel(params, aux, gpus, class_demand, head, I[NEXT], I[DEMAND], I[MODEL], pos, val)
    for j in range(m):
        I[MARK, pos[j]] = 1
    k = 0  # held jobs the kernel did not name get nothing; keep those still held
    for j in range(h):
        i = held[j]
        if I[MARK, i] == 0:
            p, w = _apply(F, I, i, 0.0, now, restart_s, speedup, record, preempt, start, watch)
            pause_at, hit = min(pause_at, p), hit or w
            if _holds(F, i, now):
                held[k] = i
                k += 1
    for j in range(m):
        i = pos[j]
        I[MARK, i] = 0
        if not _keeps(F, i, val[j], now):
            p, w = _apply(F, I, i, val[j], now, restart_s, speedup, record, preempt, start,
                          watch)
            pause_at, hit = min(pause_at, p), hit or w
        if _holds(F, i, now):
            held[k] = i
            k += 1
    return pause_at, hit, k


@njit
def _playout(kernel: Any, qkernel: Any, params: Any, aux: Any, gpus: float, tick_s: float,
             restart_s: float, speedup: Any, F0: Any, I0: Any, cols: int, n: int, Q0: Any,
             queued: bool, now: float, target: int, pause_at: float, history: int,
             clock_us: bool, seen: tuple[float, float], playout: int
             ) -> tuple[float, float, int]:
    """Play a snapshot out with estimated sizes and no arrivals until ``target`` finishes;
    ``seen`` carries the run's active-jobs totals on (as PCS's snapshots do); ``playout``
    indexes :data:`PLAYOUTS`.

    Returns:
        (predicted first start, predicted finish, events processed).
    """
    F = F0[:, :cols].copy()
    I = I0[:, :cols].copy()
    Q = (Q0[0].copy(), Q0[1].copy(), Q0[2].copy())
    F[REM] = F[EST]
    if playout > 0:
        F[SIZE] = F[EST]
    held = np.empty(cols, dtype=np.int64)
    S = (np.empty(cols), np.empty(cols, dtype=np.int64), np.empty(cols))
    return _play(kernel, qkernel, params, aux, gpus, tick_s, restart_s, speedup, F, I, cols, n,
                 Q, queued, now, target, pause_at, history, clock_us, seen, held, S,
                 np.empty(0), np.empty(0, dtype=np.int64), playout < 2)


@njit(_nrt=False)
def _play(kernel: Any, qkernel: Any, params: Any, aux: Any, gpus: float, tick_s: float,
          restart_s: float, speedup: Any, F: Any, I: Any, cols: int, n: int, Q: Any,
          queued: bool, now: float, target: int, pause_at: float, history: int,
          clock_us: bool, seen: tuple[float, float], held: Any, S: Any, dummy_f: Any,
          dummy_i: Any, first_tick: bool) -> tuple[float, float, int]:
    """:func:`_playout`'s event loop, on the arrays it owns; compiled without numba's
    reference counting (it allocates nothing), which cost more than an event's arithmetic.
    ``first_tick``: whether the snapshot's pending tick is kept."""
    h = _scan_held(F, I, cols, now, held)  # a job whose estimate ran out now holds too
    pred_start = INF
    for i in range(cols):
        if I[JOB, i] == target and F[ALLOC, i] > 0.0:
            pred_start = now
    end_at, end_pos = _next_end(F, held, h, now, clock_us, history == RANKED)
    tick_at = now + tick_s if tick_s > 0.0 and first_tick else INF
    events = 0
    while True:
        t = min(end_at, tick_at, pause_at)
        if t == INF:
            return pred_start, INF, events
        _advance(F, held, h, (t - now) / 1e6 if clock_us else t - now)
        now = t
        events += 1
        seen = (seen[0] + n, seen[1] + 1.0)
        if end_at == t:
            done = I[JOB, end_pos]
            h = _finish(F, I, cols, Q, queued, held, h, end_pos)
            n -= 1
            if not queued:
                cols -= 1
            if done == target:
                return pred_start, now, events
        pause_at, started, h = _decide(kernel, qkernel, params, aux, gpus, restart_s, speedup,
                                       F, I, cols, Q, queued, held, h, now, S, dummy_i,
                                       dummy_f, False, target,
                                       _history(F, cols, seen, history))
        if started:
            pred_start = now
        end_at, end_pos = _next_end(F, held, h, now, clock_us, history == RANKED)
        tick_at = now + tick_s if tick_s > 0.0 and n > 0 else INF


@njit
def _grow(a: Any) -> Any:
    b = np.empty(2 * a.shape[0])
    for i in range(a.shape[0]):
        b[i] = a[i]
    return b


@njit_lazily(nb.types.Tuple((_i8, _i8, _f8, nb.types.float64[::1], nb.types.float64[::1]))(
    _KERNEL, _QUEUE, _F1, _RF2, _i8, nb.types.boolean, _CLUSTER, _JOBS, _OUT))
def run_engine(kernel: Any, qkernel: Any, params: Any, aux: Any, n_classes: int,
               predict: bool, cluster: Any, jobs: Any,
               out: Any) -> tuple[int, int, float, Any, Any]:
    """Simulate every job of a workload (:class:`FluidJobs`) on ``cluster``
    (:class:`FluidCluster`) under the policy's kernels and their ``params`` and ``aux``;
    fill ``out`` (:class:`FluidOut`) in place.

    ``n_classes > 0`` takes the queue path with ``qkernel``, job ``j`` in class
    ``jobs.job_class[j]``; 0 takes the full path with ``kernel``.

    Returns:
        (events, playout events, busy GPU-seconds, series times, series busy GPUs).
    """
    gpus, tick_s, restart_s, speedup, history, clock_us, playout = cluster
    arrival, service, est_service, demand, model, job_class = jobs
    start, finish, pred_start, pred_finish, seen_sum, seen_cnt, preempt = out
    N = arrival.shape[0]
    queued = n_classes > 0
    F = np.zeros((12, N))
    I = np.zeros((7, N), dtype=np.int64)
    Q = (np.full(max(n_classes, 1), -1, dtype=np.int64),
         np.full(max(n_classes, 1), -1, dtype=np.int64), np.zeros(max(n_classes, 1)))
    S = (np.empty(N), np.empty(N, dtype=np.int64), np.empty(N))
    held = np.empty(N, dtype=np.int64)
    h = 0
    n = 0  # active jobs
    cols = 0  # columns in use: the active jobs and, on the queue path, dead ones among them
    now = 0.0
    nxt = 0
    end_at, end_pos, tick_at, pause_at = INF, -1, INF, INF
    seen_total, seen_events = 0.0, 0.0
    events, playout_events, busy_s = 0, 0, 0.0
    ts = np.empty(max(16, 2 * N))
    busy = np.empty(max(16, 2 * N))
    k = 0
    while True:
        t_arr = arrival[nxt] if nxt < N else INF
        t = min(min(end_at, t_arr), min(tick_at, pause_at))
        if t == INF:
            break
        dt = (t - now) / 1e6 if clock_us else t - now  # seconds
        seen_total += n
        seen_events += 1.0
        if dt > 0.0:
            used = _advance(F, held, h, dt)
            busy_s += used * dt
            if k == ts.shape[0]:
                ts, busy = _grow(ts), _grow(busy)
            ts[k], busy[k] = now, used
            k += 1
        now = t
        events += 1
        arrived = -1
        if end_at == t:
            row = I[JOB, end_pos]
            finish[row] = now
            seen_sum[row] += seen_total
            seen_cnt[row] += seen_events
            h = _finish(F, I, cols, Q, queued, held, h, end_pos)
            n -= 1
            if not queued:
                cols -= 1
            elif cols - n > n:
                cols, h = _compact(F, I, cols, Q, held, now)
        elif t_arr == t and tick_at != t:  # a tick due with an arrival goes first (PCS)
            arrived = nxt
            F[:, cols] = 0.0
            F[REM, cols] = service[nxt]
            F[EST, cols] = est_service[nxt]
            F[ARR, cols] = arrival[nxt]
            F[SIZE, cols] = est_service[nxt]
            I[JOB, cols], I[MODEL, cols], I[DEMAND, cols] = nxt, model[nxt], demand[nxt]
            I[MARK, cols] = 0
            if queued:
                I[CLASS, cols] = job_class[nxt]
                _enqueue(I, Q, cols)
            cols += 1
            n += 1
            # PCS samples the active count at the newcomer's own arrival, itself included
            seen_sum[nxt] = F[SEEN, cols - 1] = n - seen_total
            seen_cnt[nxt] = F[SEEN_N, cols - 1] = 1.0 - seen_events
            nxt += 1
        if n == 0:
            end_at, end_pos, tick_at, pause_at = INF, -1, INF, INF
            continue
        pause_at, _, h = _decide(kernel, qkernel, params, aux, gpus, restart_s, speedup, F, I,
                                 cols, Q, queued, held, h, now, S, preempt, start, True, -1,
                                 _history(F, cols, (seen_total, seen_events), history))
        order = stable_order(held[:h])  # arrival order: the GPUs in use summed in one order
        kept = held[:h].copy()
        for j in range(h):
            held[j] = kept[order[j]]
        end_at, end_pos = _next_end(F, held, h, now, clock_us, history == RANKED)
        tick_at = now + tick_s if tick_s > 0.0 else INF
        if predict and arrived >= 0:
            s, f, e = _playout(kernel, qkernel, params, aux, gpus, tick_s, restart_s, speedup,
                               F, I, cols, n, Q, queued, now, arrived, pause_at,
                               history, clock_us, (seen_total, seen_events), playout)
            pred_start[arrived], pred_finish[arrived] = s, f
            playout_events += e
    return events, playout_events, busy_s, ts[:k].copy(), busy[:k].copy()


KERNELS = (run_engine, no_kernel, no_queue)
"""The engine's own lazily compiled functions (:func:`simulator.jit.compiled`)."""
_NO_CLASSES = np.zeros(0, dtype=np.int64)


def _frozen(values: Any, dtype: Any) -> Any:
    """``values`` as the engine reads them: C-ordered, of ``dtype``, read-only (a view: the
    caller's array keeps its flags)."""
    out = np.ascontiguousarray(values, dtype=dtype).view()
    out.flags.writeable = False
    return out


def run(workload: Workload, profile: ClusterProfile, policy: Scheduler, *,
        predict: bool = False, seed: int | None = None) -> SimulationResult:
    """The fluid engine: replay ``workload`` on ``profile`` under a kernel policy; the
    contract every engine behind :func:`simulator.simulate` keeps.

    Args:
        workload, profile, policy: what to run (the profile's size and restart overhead).
        predict: make a JCT prediction at each arrival by playout (SPEC §2).
        seed: unused: this engine draws nothing at random (jobs never share a GPU, so every
            job's co-location slowdown is exactly 0).
    """
    cpu0 = time.process_time() - compile_cpu_s()  # compiling is not the run's own time
    n = len(workload)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    pred_start, pred_finish = np.full(n, np.nan), np.full(n, np.nan)
    seen_sum, seen_cnt = np.zeros(n), np.zeros(n)
    preemptions = np.zeros(n, dtype=np.int64)
    params, aux = policy.kernel_args(workload.scaling)
    queues = policy.queue_classes(workload) if policy.queue_kernel is not None else None
    classes, n_classes = queues if queues is not None else (_NO_CLASSES, 0)
    unit = 1e6 if policy.pcs_clock else 1.0  # the engine's time unit, in seconds^-1
    arrival = (np.array([us_after(0.0, float(a)) for a in workload.arrival_s])
               if policy.pcs_clock else workload.arrival_s)
    cluster = FluidCluster(float(profile.total_gpus), float(policy.tick_s or 0.0) * unit,
                           float(profile.restart_overhead_s) * unit,
                           _frozen(workload.scaling.speedup, np.float64),
                           HISTORIES.index(policy.history), policy.pcs_clock,
                           PLAYOUTS.index(policy.playout))
    jobs = FluidJobs(*(_frozen(a, np.float64) for a in (
        arrival, workload.service_s, workload.estimated_service_s)),
        *(_frozen(a, np.int64) for a in (workload.gpus, workload.model, classes)))
    events, playout_events, busy_s, series_t, series_busy = compiled(run_engine)(
        compiled(policy.kernel if queues is None else no_kernel),
        compiled(policy.queue_kernel if queues is not None else no_queue), params, aux,
        n_classes, predict, cluster, jobs,
        FluidOut(start, finish, pred_start, pred_finish, seen_sum, seen_cnt, preemptions))
    for times in (start, finish, pred_start, pred_finish, series_t):
        times /= unit
    return SimulationResult(
        workload=workload, total_gpus=profile.total_gpus, start_s=start, finish_s=finish,
        pred_start_s=pred_start, pred_finish_s=pred_finish, seen_avg=seen_sum / seen_cnt,
        preemptions=preemptions, busy_gpu_s=busy_s, series_t=series_t,
        series_busy=series_busy, events=events, playout_events=playout_events,
        cpu_s=time.process_time() - compile_cpu_s() - cpu0, slowdown=np.zeros(n),
        gpus_used=float(np.ceil(series_busy.max(initial=0.0) - 1e-9)),
        util_gpu_s=float("nan"))
