"""The event-driven fluid engine.

Between events every running job progresses at a constant rate (its speed-up at the GPUs it
holds), so the next completion is computed, not stepped. Events are arrivals (one job each),
completions (one job each; ties go to the earliest arrival), policy ticks and restart-overhead
ends. At equal times a completion is handled before an arrival. After every event the policy
re-decides every allocation. This reproduces the PCS simulator's semantics (PCS code,
``GenericScheduler``); PCS keeps times in whole microseconds, this engine in float seconds,
which moves JCTs by less than 1e-8 relative.

State lives in two small 2-D arrays (float and int rows x active jobs, in arrival order), so
progress updates and decisions are vector operations and a fork for a JCT-prediction playout
is two array copies.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from simulator.view import ClusterView, Scheduler
from simulator.workload import Workload

__all__ = ["Engine"]

FloatArray = npt.NDArray[np.float64]

# float rows: true remaining work, estimated remaining, attained work, allocation, progress
# rate, end of a restart pause, arrival time, estimated size, started (0/1)
REM, EST, ATT, ALLOC, RATE, PAUSE, ARR, SIZE, STARTED = range(9)
# int rows: workload row, model, GPU demand
JOB, MODEL, DEMAND = range(3)
INF = math.inf


class Engine:
    """One simulation run (or one prediction playout forked from a run).

    Args:
        workload: the jobs; their rows index every per-job record.
        total_gpus: cluster size.
        policy: the scheduler deciding allocations.
        restart_overhead_s: seconds of no progress after a started job's allocation changes.
        record: keep per-job records (off in playouts).
    """

    def __init__(self, workload: Workload, total_gpus: int, policy: Scheduler, *,
                 restart_overhead_s: float = 0.0, record: bool = True) -> None:
        self.wl = workload
        self.gpus = total_gpus
        self.policy = policy
        self.tick_s = policy.tick_s
        self.restart_s = restart_overhead_s
        self.record = record
        self.F = np.empty((9, 0))
        self.I = np.empty((3, 0), dtype=np.int64)
        self.now = 0.0
        self.next_arrival = 0
        self.n_arrivals = len(workload) if record else 0
        self.end_at, self.end_pos = INF, -1
        self.tick_at = INF
        self.pause_at = INF
        self.events = 0
        self.playout_events = 0
        self.watch, self.watch_start = -1, INF  # a playout's target job and its first start
        if record:
            n = len(workload)
            self.start = np.full(n, np.nan)
            self.finish = np.full(n, np.nan)
            self.preemptions = np.zeros(n, dtype=np.int64)
            self.seen_sum = np.zeros(n)
            self.seen_cnt = np.zeros(n)
            self.busy_gpu_s = 0.0
            self.series_t: list[float] = []
            self.series_busy: list[float] = []
            self._seen_total = 0.0
            self._seen_events = 0

    # --- the loop -------------------------------------------------------------------------

    def run(self, *, until_job: int = -1, on_arrival: object = None) -> float:
        """Process events until every job finished, or until job ``until_job`` finished.

        Args:
            until_job: workload row whose completion ends the run (-1: run to the end).
            on_arrival: called as ``on_arrival(engine, row)`` after each arrival's decision.

        Returns:
            The time of the last completion processed.
        """
        wl_arrival = self.wl.arrival_s
        while True:
            t_arr = wl_arrival[self.next_arrival] if self.next_arrival < self.n_arrivals else INF
            t = min(self.end_at, t_arr, self.tick_at, self.pause_at)
            if t == INF:
                return self.now
            self._advance(t)
            self.events += 1
            if self.end_at == t:
                row = self._complete(self.end_pos)
                if row == until_job:
                    return t
            elif t_arr == t:
                row = self._admit(self.next_arrival)
                self.next_arrival += 1
                self._decide()
                if on_arrival is not None:
                    on_arrival(self, row)  # type: ignore[operator]
                continue
            self._decide()

    def _advance(self, t: float) -> None:
        dt = t - self.now
        F = self.F
        if self.record:
            n = F.shape[1]
            self._seen_total += n
            self._seen_events += 1
            if dt > 0:
                busy = float(F[ALLOC].sum())
                self.busy_gpu_s += busy * dt
                self.series_t.append(self.now)
                self.series_busy.append(busy)
        if dt > 0:
            work = F[RATE] * dt
            F[REM] -= work
            F[EST] -= work
            F[ATT] += work
        self.now = t

    def _admit(self, row: int) -> int:
        wl = self.wl
        col = np.array([wl.service_s[row], wl.estimated_service_s[row], 0.0, 0.0, 0.0, 0.0,
                        wl.arrival_s[row], wl.estimated_service_s[row], 0.0])
        self.F = np.concatenate([self.F, col[:, None]], axis=1)
        icol = np.array([row, wl.model[row], wl.gpus[row]], dtype=np.int64)
        self.I = np.concatenate([self.I, icol[:, None]], axis=1)
        if self.record:
            # PCS counts the newcomer's own arrival as one sample of the active count
            self.seen_sum[row] = self.F.shape[1] - self._seen_total
            self.seen_cnt[row] = 1 - self._seen_events
        return row

    def _complete(self, pos: int) -> int:
        row = int(self.I[JOB, pos])
        if self.record:
            self.finish[row] = self.now
            self.seen_sum[row] += self._seen_total
            self.seen_cnt[row] += self._seen_events
        self.F = np.delete(self.F, pos, axis=1)
        self.I = np.delete(self.I, pos, axis=1)
        return row

    # --- decisions ------------------------------------------------------------------------

    def view(self) -> ClusterView:
        """A read-only view of the active jobs for the policy."""
        F = self.F.view()
        F.flags.writeable = False
        I = self.I.view()
        I.flags.writeable = False
        return ClusterView(self.now, self.gpus, I[JOB], F[ARR], I[DEMAND], F[SIZE], F[EST],
                           F[ATT], F[ALLOC], I[MODEL], self.wl.scaling)

    def _decide(self) -> None:
        F = self.F
        if F.shape[1] == 0:
            self.end_at, self.end_pos, self.tick_at, self.pause_at = INF, -1, INF, INF
            return
        alloc = np.asarray(self.policy.allocate(self.view()), dtype=np.float64)
        old = F[ALLOC]
        started = F[STARTED] > 0
        if self.record or self.restart_s > 0:
            changed = (alloc != old) & started
            if self.record:
                self.preemptions[self.I[JOB, changed]] += 1
            if self.restart_s > 0:
                F[PAUSE, changed & (alloc > 0)] = self.now + self.restart_s
        F[ALLOC] = alloc
        running = alloc > 0
        fresh = running & ~started
        if fresh.any():
            F[STARTED, fresh] = 1.0
            if self.record:
                self.start[self.I[JOB, fresh]] = self.now
            elif self.watch >= 0 and (self.I[JOB, fresh] == self.watch).any():
                self.watch_start = self.now
        rate = self.wl.scaling.speed(self.I[MODEL], alloc)
        if self.restart_s > 0:
            paused = F[PAUSE] > self.now
            rate[paused] = 0.0
            self.pause_at = float(F[PAUSE, paused].min()) if paused.any() else INF
        F[RATE] = rate
        self._project()
        self.tick_at = self.now + self.tick_s if self.tick_s else INF

    # --- prediction -----------------------------------------------------------------------

    def predict(self, row: int) -> tuple[float, float]:
        """Play the current state out until job ``row`` finishes (SPEC §2).

        The playout starts from a snapshot taken after the job's first allocation, uses every
        job's *estimated* remaining work and the same policy, and sees no future arrivals.

        Returns:
            ``(predicted start, predicted finish)`` of the job.
        """
        twin = self._fork()
        twin.watch = row
        pos = int(np.flatnonzero(twin.I[JOB] == row)[0])
        twin.watch_start = self.now if twin.F[ALLOC, pos] > 0 else INF
        finish = twin.run(until_job=row)
        self.playout_events += twin.events
        return twin.watch_start, finish

    def _fork(self) -> Engine:
        twin = Engine(self.wl, self.gpus, self.policy, restart_overhead_s=self.restart_s,
                      record=False)
        twin.F = self.F.copy()
        twin.F[REM] = twin.F[EST]
        twin.I = self.I.copy()
        twin.now = self.now
        twin.end_at, twin.tick_at, twin.pause_at = self.end_at, self.tick_at, self.pause_at
        # the true remaining work may differ from the estimate: re-project the next completion
        twin._project()
        return twin

    def _project(self) -> None:
        F = self.F
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(F[RATE] > 0, F[REM] / F[RATE], INF)
        left[F[REM] <= 0] = 0.0
        pos = int(np.argmin(left)) if left.size else -1
        self.end_pos = pos
        self.end_at = self.now + float(left[pos]) if pos >= 0 and left[pos] < INF else INF
