"""The round engine: oracles from the fluid engine, hand-computed timelines and invariants."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numba
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import FIFO, RoundPolicy, YarnCS, param
from simulator import Workload, generate, load_profile, simulate
from simulator.inputs.profile import ClusterProfile, NodeGroup
from simulator.inputs.scaling import TypeSpeeds, parametric_table
from simulator.rounds import Cluster, InvalidPlan, RoundState
from simulator.rounds.view import ROUND_KERNEL_SIG


@dataclass(frozen=True)
class FirstFit(RoundPolicy):
    """Test policy: jobs in arrival (or shortest-remaining) order get their full demand,
    first fit over nodes; ``keep`` leaves running jobs where they are (non-preemptive)."""

    name: ClassVar[str] = "test-first-fit"
    round_s: float = param(60.0, low=1.0, high=1e9)
    keep: bool = param(True, kind="choice", choices=(True, False))
    reacts_to_events: bool = param(False, kind="choice", choices=(True, False))
    shortest_first: bool = param(False, kind="choice", choices=(True, False))

    @property
    def reacts(self) -> bool:
        return self.reacts_to_events

    def plan(self, state: RoundState) -> np.ndarray:
        held = state.alloc.sum(axis=1) > 0
        out = state.alloc.copy() if self.keep else np.zeros_like(state.alloc)
        free = state.cluster.node_gpus - out.sum(axis=0)
        order = (np.argsort(state.est_remaining, kind="stable") if self.shortest_first
                 else range(len(state)))
        for j in order:
            if self.keep and held[j]:
                continue
            need = int(state.demand[j])
            if need > free.sum():
                continue
            for node in np.argsort(-free, kind="stable"):
                take = min(need, int(free[node]))
                out[j, node] += take
                free[node] -= take
                need -= take
                if need == 0:
                    break
        return out


def _profile(groups: list[tuple[int, int, str]], *, restart: float = 0.0,
             inter: float = 1.0, speed: dict[str, float] | None = None) -> ClusterProfile:
    types = {t for _, _, t in groups}
    return ClusterProfile(
        name="test", description="", provenance="test",
        node_groups=tuple(NodeGroup(c, g, t, 16.0) for c, g, t in groups),
        relative_speed=speed or dict.fromkeys(types, 1.0), inter_node_factor=inter,
        restart_overhead_s=restart, suspend_overhead_s=0.0)


def _jobs(rows: list[tuple[float, int, float]], model: str = "linear") -> Workload:
    frame = pd.DataFrame(rows, columns=["arrival_s", "gpus", "service_s"]).assign(model=model)
    return Workload.from_frame(frame, scaling=parametric_table(8))


def test_one_gpu_jobs_match_the_fluid_fifo_engine() -> None:
    # oracle: with 1-GPU jobs, elastic FIFO is non-preemptive FIFO; the round engine deciding
    # at every arrival and completion must reproduce the compiled engine job for job
    base = generate(400, gpus=16, load=0.9, seed=3)
    wl = Workload.from_frame(base.to_frame().assign(gpus=1, min_gpus=1), scaling=base.scaling)
    profile = load_profile("pcs-testbed-16")
    fluid = simulate(wl, profile, FIFO())
    rounds = simulate(wl, profile, FirstFit(round_s=1e9, reacts_to_events=True))
    np.testing.assert_allclose(rounds.finish_s, fluid.finish_s, rtol=1e-9)
    np.testing.assert_allclose(rounds.start_s, fluid.start_s, rtol=1e-9)
    assert rounds.busy_gpu_s == pytest.approx(fluid.busy_gpu_s, rel=1e-9)


def test_round_timeline_by_hand() -> None:
    # 4 GPUs on one node, rounds of 60 s from t=0. A (4 GPUs, 400 s of work, linear) runs at
    # rate 4 from 0 to 100. B arrives at 30 and waits for the round at 60, where all GPUs
    # are taken; the round at 120 starts it (A's GPUs sat idle from 100 to 120).
    wl = _jobs([(0.0, 4, 400.0), (30.0, 2, 100.0)])
    res = simulate(wl, _profile([(1, 4, "v100")]), FirstFit(round_s=60.0))
    np.testing.assert_allclose(res.start_s, [0.0, 120.0])
    np.testing.assert_allclose(res.finish_s, [100.0, 170.0])
    assert res.busy_gpu_s == pytest.approx(4 * 100 + 2 * 50)


def test_restart_pause_and_preemption_count() -> None:
    # 1 GPU, rounds of 30 s, shortest remaining first, 5 s restart. A (100 s) runs from 0;
    # B (30 s) arrives at 50 and takes the GPU at the round at 60 (A has 40 s left). B ends
    # at 90, where A resumes, pauses 5 s and ends at 135. A changed twice after starting.
    wl = _jobs([(0.0, 1, 100.0), (50.0, 1, 30.0)])
    res = simulate(wl, _profile([(1, 1, "v100")], restart=5.0),
                   FirstFit(round_s=30.0, keep=False, shortest_first=True))
    np.testing.assert_allclose(res.start_s, [0.0, 60.0])
    np.testing.assert_allclose(res.finish_s, [135.0, 90.0])
    assert res.preemptions.tolist() == [2, 0]
    assert res.busy_gpu_s == pytest.approx(135.0)  # the pause holds the GPU


def test_slowest_type_and_spread_factor_set_the_rate() -> None:
    # one 2-GPU job spread over a fast and a slow node runs at the slow type's speed, times
    # the inter-node factor: 2 GPUs x 0.25 x 0.8 = 0.4 work-s per s
    prof = _profile([(1, 1, "v100"), (1, 1, "k80")], inter=0.8,
                    speed={"v100": 1.0, "k80": 0.25})
    wl = _jobs([(0.0, 2, 40.0)])
    res = simulate(wl, prof, FirstFit())
    assert res.finish_s[0] == pytest.approx(100.0)
    # a workload's own per-model table overrides the profile's speeds
    own = replace(wl, type_speed=TypeSpeeds(("v100", "k80"), np.full((len(
        wl.scaling.models), 2), 0.5)))
    assert simulate(own, prof, FirstFit()).finish_s[0] == pytest.approx(40 / (2 * 0.5 * 0.8))


def test_cluster_expands_node_groups() -> None:
    c = Cluster.from_profile(load_profile("gavel-hetero-60"))
    assert c.types == ("v100", "p100", "k80")
    assert c.nodes == 15 and c.type_gpus.tolist() == [20, 20, 20]


@dataclass(frozen=True)
class Greedy(RoundPolicy):
    name: ClassVar[str] = "test-greedy"
    round_s: float = param(60.0, low=1.0, high=1e9)

    def plan(self, state: RoundState) -> np.ndarray:
        out = np.zeros_like(state.alloc)
        out[:, 0] = state.demand  # everyone on node 0, whatever it holds
        return out


def test_over_allocation_is_refused_with_the_culprit_named() -> None:
    wl = _jobs([(0.0, 3, 10.0), (0.0, 3, 10.0)])
    with pytest.raises(InvalidPlan, match="node 0 given 6 GPUs, it has 4"):
        simulate(wl, _profile([(2, 4, "v100")]), Greedy())


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([20.0, 300.0]), st.booleans())
def test_work_is_conserved_and_every_job_finishes(seed: int, round_s: float,
                                                  keep: bool) -> None:
    wl = generate(60, gpus=8, load=1.2, seed=seed, median_service_s=300.0, sigma=1.0)
    prof = _profile([(2, 4, "v100")], restart=3.0)
    res = simulate(wl, prof, FirstFit(round_s=round_s, keep=keep))
    assert np.isfinite(res.finish_s).all()
    assert (res.start_s >= wl.arrival_s).all() and (res.finish_s > res.start_s).all()
    # a job never beats its full-demand, never-paused run time
    fastest = wl.service_s / wl.scaling.speed(wl.model, wl.gpus.astype(float))
    assert (res.finish_s - res.start_s >= fastest * (1 - 1e-9)).all()
    assert 0 < res.busy_gpu_s <= 8 * (res.finish_s.max() - wl.arrival_s.min()) + 1e-6


def test_a_remainder_below_the_clock_resolution_still_finishes() -> None:
    # at t = 1e8 s a double resolves 1.5e-8 s: a job 5e-9 s from its end kept the clock at t
    # (dt = 0, never within 1e-9 of done) and the run never ended; now it ends at t
    wl = _jobs([(1e8, 1, 5e-9), (1e8, 1, 100.0)])
    r = simulate(wl, _profile([(1, 4, "v100")]), YarnCS())
    assert r.finish_s[0] == 1e8
    assert r.finish_s[1] == pytest.approx(1e8 + 100.0)


def _writes_a_view(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    J.est[0] = 0.0
    return 0


def _writes_the_state(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    E.clk[1] = now
    return 0


def _reads_rem(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    return int(J.rem[0])


def _writes_its_memory(C: Any, J: Any, M: Any, E: Any, now: float) -> int:
    M.out_stop[0] = now + J.est[0]
    return 0


@pytest.mark.parametrize("kernel", [_writes_a_view, _writes_the_state, _reads_rem])
def test_a_round_kernel_cannot_write_what_it_reads_nor_read_the_true_size(kernel: Any) -> None:
    """The contract of ``simulator.rounds.view`` is enforced by the types: a kernel that writes
    the job or state view, or reads the true remaining work, does not compile."""
    with pytest.raises(numba.core.errors.TypingError):
        numba.njit(ROUND_KERNEL_SIG)(kernel)
    numba.njit(ROUND_KERNEL_SIG)(_writes_its_memory)  # its own memory it may write

