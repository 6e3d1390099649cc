"""Runs a round policy on the compiled loop (:mod:`simulator.rounds.engine`).

A policy with a compiled kernel (``round_kernel``) decides inside the loop; any other round
policy decides in Python: the loop stops at each of its decisions, :class:`_Run` hands it a
:class:`~simulator.rounds.RoundState` and applies the plan it returns. Both follow the
semantics in :mod:`simulator.rounds`; predictions play each arrival's snapshot out on a
workspace copy (:func:`simulator.rounds.engine.fork`).
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np

from simulator.errors import InvalidWorkload, located
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.scaling import TypeSpeeds
from simulator.inputs.workload import Workload
from simulator.jit import compile_cpu_s, compiled
from simulator.pcg64 import from_generator
from simulator.result import SimulationResult
from simulator.rounds import Cluster, InvalidPlan, RoundScheduler, RoundState, checked_plan
from simulator.rounds import engine as eng
from simulator.rounds import plan as rp
from simulator.rounds import view as rv
from simulator.rounds.arrays import (
    cluster_arrays,
    engine_state,
    host_kernel,
    job_arrays,
    job_view,
    state_view,
    workspace,
)
from simulator.rounds.sharing import SharingModel
from simulator.rounds.view import empty_memory

__all__ = ["run"]


def _sharing_model(wl: Workload, cluster: Cluster, profile: ClusterProfile) -> SharingModel | None:
    if wl.sharing is None:
        return None
    matrix = (wl.interference.columns(cluster.types, wl.source)
              if wl.interference is not None else None)
    return SharingModel(
        jobs=wl.sharing, model=wl.model, device_node=cluster.device_node,
        device_type=cluster.node_type[cluster.device_node],
        device_mem_gib=cluster.node_mem_gib[cluster.device_node], matrix=matrix,
        curves=tuple(profile.slowdown_curves.get(t) for t in cluster.types),
        collision_slowdown=profile.collision_slowdown)


def _check_runnable(wl: Workload, speeds: Any, types: tuple[str, ...]) -> None:
    """Reject a job whose model has speed 0 on every GPU type of the cluster."""
    stuck = np.flatnonzero(~(speeds[wl.model] > 0).any(axis=1))
    if stuck.size:
        i = int(stuck[0])
        raise InvalidWorkload(located(
            wl.source, row=i + 1, column="model", value=wl.scaling.models[wl.model[i]],
            problem=f"the job cannot run on any GPU type of the cluster ({', '.join(types)}): "
                    f"its model's speed is 0 on each"))


class _Run:
    """One run: the arrays, the policy, and what Python decisions need."""

    def __init__(self, wl: Workload, profile: ClusterProfile, policy: RoundScheduler,
                 seed: int) -> None:
        self.wl, self.policy = wl, policy
        self.cluster = Cluster.from_profile(profile)
        table = wl.type_speed or TypeSpeeds.uniform(profile.relative_speed,
                                                    len(wl.scaling.models))
        self.speeds = table.columns(self.cluster.types, wl.source)
        _check_runnable(wl, self.speeds, self.cluster.types)
        self.shares = bool(getattr(policy, "shares_gpus", False))
        self.sharing = _sharing_model(wl, self.cluster, profile)
        devices, nodes = int(self.cluster.node_gpus.sum()), self.cluster.nodes
        self.C = cluster_arrays(self.cluster, self.speeds, wl.scaling, self.sharing)
        self.J = job_arrays(wl, nodes, devices, self.shares)
        self.clairvoyant = bool(getattr(policy, "clairvoyant", False))
        self.views = {id(self.J): job_view(self.J, self.clairvoyant)}
        round_kernel = getattr(policy, "round_kernel", None)
        made = (round_kernel(self.C, self.view(self.J), wl) if round_kernel is not None
                else None)
        self.kernel: Any
        self.M: Any
        self.kernel, self.M = made or (host_kernel, empty_memory(self.view(self.J), nodes))
        self.handle = eng.kernel_handle(compiled(self.kernel))
        self.run_loop = compiled(eng.run_loop)
        self.E = engine_state(self.J, nodes, devices, from_generator(np.random.default_rng(seed)))
        self.memo: dict[str, Any] = {}
        self.round_s, self.reacts = float(policy.round_s), bool(policy.reacts)
        self.short = bool(getattr(policy, "short_rounds", False))
        self.pred = np.full((2, len(wl)), np.nan)
        self.playout_events = 0
        self._space: tuple[Any, Any, Any] | None = None

    def view(self, J: Any) -> Any:
        """The read-only view of ``J`` a policy sees (one per job arrays, kept)."""
        if id(J) not in self.views:
            self.views[id(J)] = job_view(J, self.clairvoyant)
        return self.views[id(J)]

    def loop(self, J: Any, M: Any, E: Any, memo: dict[str, Any], mode: int,
             target: int = -1) -> int:
        """Run the compiled loop, taking the Python decisions it asks for, until it ends,
        a prediction is due or the series is full."""
        V, S = self.view(J), state_view(E)
        while True:
            status = int(self.run_loop(self.handle, self.C, J, V, M, E, S, self.round_s,
                                       self.reacts, self.short, self.shares, mode, target))
            if status != eng.HOST_DUE:
                return status
            if self.kernel is host_kernel:
                self._decide(J, M, E, memo)
                E.cnt[rv.PHASE] = eng.APPLIED
            else:
                step = self.policy.host_step  # type: ignore[attr-defined]
                step(self.C, V, M, S, float(E.clk[rv.NOW]))
                E.cnt[rv.PHASE] = eng.REDECIDE

    def _decide(self, J: Any, M: Any, E: Any, memo: dict[str, Any]) -> None:
        state = self.state(J, E, memo)
        plan = checked_plan(self.policy.plan(state), state, self.policy, self.shares)
        for i, r in enumerate(state.rows):
            if self.shares:
                devices = np.flatnonzero(plan[i])
                M.out_nw[r] = devices.size
                M.out_wdev[J.woff[r]:J.woff[r] + devices.size] = devices
            else:
                M.out_alloc[r] = plan[i]
            M.touched[i] = r
        M.ntouched[0] = len(state)
        rp.apply_plan(self.C, J, M, E, self.shares)

    def state(self, J: Any, E: Any, memo: dict[str, Any]) -> RoundState:
        """What a Python policy sees at the loop's current decision."""
        wl, n = self.wl, int(E.cnt[rv.N_ACTIVE])
        rows = E.active[:n].copy()
        placed = np.zeros((n, self.C.device_node.shape[0] if self.shares else 0), dtype=bool)
        for i, r in enumerate(rows):
            placed[i, J.wdev[J.woff[r]:J.woff[r] + J.nw[r]]] = True
        return RoundState(
            now=float(E.clk[rv.NOW]), cluster=self.cluster, rows=rows,
            arrival_s=wl.arrival_s[rows], demand=wl.gpus[rows], min_gpus=wl.min_gpus[rows],
            est_size=wl.estimated_service_s[rows], est_remaining=J.est[rows],
            attained=J.att[rows], alloc=J.alloc[rows], model=wl.model[rows],
            job_class=J.job_class[rows], deadlines_s=J.deadlines[rows], rewards=J.rewards[rows],
            scaling=wl.scaling, speeds=self.speeds, memo=memo, placed=placed,
            sharing=self.sharing)

    def predict(self) -> None:
        """Play the snapshot out for each job that just arrived (SPEC §2)."""
        if self._space is None:
            self._space = workspace(self.J, self.M, self.E)
        J2, M2, E2 = self._space
        for r in range(int(self.E.cnt[rv.ARR_LO]), int(self.E.cnt[rv.ARR_HI])):
            eng.fork(self.J, self.M, self.E, J2, M2, E2, self.short)
            status = self.loop(J2, M2, E2, copy.deepcopy(self.memo), eng.PLAYOUT, r)
            self.pred[0, r] = J2.start[r]
            self.pred[1, r] = J2.finish[r] if status == eng.DONE else np.inf
            self.playout_events += int(E2.cnt[rv.EVENTS] - self.E.cnt[rv.EVENTS])

    def fail(self, status: int) -> InvalidPlan:
        """The error for a failed run's status."""
        E, name = self.E, type(self.policy).__name__
        n, now = int(E.cnt[rv.N_ACTIVE]), float(E.clk[rv.NOW])
        if status == eng.ERR_NO_DECISION:
            return InvalidPlan(f"policy {name} left {n} jobs without GPUs at t={now:g} s and "
                               f"no decision is due")
        if status == eng.ERR_IDLE:
            return InvalidPlan(f"policy {name} left {n} jobs waiting on an idle cluster at "
                               f"t={now:g} s with no arrival to come (can any of them ever be "
                               f"placed?)")
        where, code, at = f"policy {name} at t={now:g} s", E.cnt[rv.ERR_A], int(E.cnt[rv.ERR_B])
        amount = float(E.clk[rv.ERR_X])
        if code == rp.OVER_NODE:
            what = "device" if self.shares else "node"
            cap = 1 if self.shares else int(self.C.node_gpus[at])
            return InvalidPlan(f"{where}: {what} {at} given {amount:g} GPUs, it has {cap}")
        if code == rp.OVER_MEMORY:
            return InvalidPlan(f"{where}: device {at} cannot hold its workers (memory over by "
                               f"{amount:g} GiB, or no slowdown model for sharing its GPU "
                               f"type)")
        if code == rp.OVER_DEMAND:
            return InvalidPlan(f"{where}: job row {at} given {amount:g} GPUs, demand "
                               f"{self.wl.gpus[at]}")
        if code == rp.UNUSABLE_TYPE:
            model = self.wl.scaling.models[self.wl.model[at]]
            return InvalidPlan(f"{where}: job row {at} placed on GPU type "
                               f"{self.cluster.types[int(amount)]!r}, where its model {model!r} "
                               f"cannot run (speed 0)")
        return InvalidPlan(f"{where}: GPU counts must be non-negative integers"
                           + (" (0 or 1 per device)" if self.shares else ""))

    def result(self, cpu0: float) -> SimulationResult:
        J, E, wl = self.J, self.E, self.wl
        with np.errstate(invalid="ignore", divide="ignore"):
            slowdown = np.where(J.ran1 > 0, J.ran0 / J.ran1 - 1.0, 0.0)
        k = int(E.cnt[rv.SERIES_K])
        dropped = getattr(self.policy, "dropped", None)
        return SimulationResult(
            workload=wl, total_gpus=int(self.C.node_gpus.sum()), start_s=J.start,
            finish_s=J.finish, pred_start_s=self.pred[0], pred_finish_s=self.pred[1],
            seen_avg=J.seen0 / J.seen1, preemptions=J.preempt, busy_gpu_s=float(E.clk[rv.BUSY]),
            series_t=E.series_t[:k].copy(), series_busy=E.series_busy[:k].copy(),
            events=int(E.cnt[rv.EVENTS]), playout_events=self.playout_events,
            cpu_s=time.process_time() - compile_cpu_s() - cpu0, slowdown=np.maximum(slowdown, 0.0),
            gpus_used=float(J.used.sum()),
            util_gpu_s=float(E.clk[rv.UTIL]) if wl.sharing is not None else np.nan,
            decisions=int(E.cnt[rv.DECISIONS]), skipped_rounds=int(E.cnt[rv.SKIPPED]),
            dropped=dropped(self.M) if dropped is not None else None)


def run(workload: Workload, profile: ClusterProfile, policy: RoundScheduler, *,
        predict: bool = False, seed: int | None = None) -> SimulationResult:
    """The round engine (:mod:`simulator.rounds`): replay ``workload`` on ``profile`` under
    a round policy; the contract every engine behind :func:`simulator.simulate` keeps.

    Args:
        workload, profile, policy: what to run.
        predict: predict each job's JCT at its arrival by playout (SPEC §2).
        seed: seeds the memory-surge draws of jobs sharing GPUs; default: from the
            workload's digest, so every policy faces the same draws.

    Raises:
        InvalidPlan: the policy over-allocated, or left jobs waiting with no decision due.
        InvalidWorkload: the workload has no speed for one of the profile's GPU types.
    """
    cpu0 = time.process_time() - compile_cpu_s()  # compiling is not the run's own time
    state = _Run(workload, profile, policy,
                 seed if seed is not None else int(workload.digest()[:8], 16))
    mode = eng.PREDICT if predict else eng.MAIN
    while True:
        status = state.loop(state.J, state.M, state.E, state.memo, mode)
        if status == eng.DONE:
            return state.result(cpu0)
        if status == eng.ARRIVED:
            state.predict()
        elif status == eng.GROW:
            E = state.E
            state.E = E._replace(series_t=np.concatenate([E.series_t,
                                                          np.zeros_like(E.series_t)]),
                                 series_busy=np.concatenate([E.series_busy,
                                                             np.zeros_like(E.series_busy)]))
        else:
            raise state.fail(status)
