"""The unified policy: each parameter family does what SPEC §3.7 says, on hand-computed runs.

Oracles: schedules worked out by hand on one GPU (shortest first, rewards, leases), the
bounds recomputed from scratch after every decision (the OJPP harness), and the dimensions a
workload cannot use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paretosearch.cli import main
from policies import Unified
from simulator import ClusterProfile, Workload, load_profile, simulate
from simulator.inputs.colocation import SlowdownCurve
from simulator.inputs.generate import add_sharing, add_slos, generate
from simulator.inputs.profile import NodeGroup
from simulator.rounds import RoundState
from tests.helpers.golden import CASES
from tests.helpers.sharing import Checked, ojpp_profile, random_workload

RTX2080 = SlowdownCurve((1.16664, -0.00302, 4e-5))


def one_gpu(restart_s: float = 0.0) -> ClusterProfile:
    return ClusterProfile("one", "one GPU", "test", (NodeGroup(1, 1, "rtx2080", 8.0),),
                          {"rtx2080": 1.0}, 1.0, restart_s, 0.0, {"rtx2080": RTX2080})


def run(frame: pd.DataFrame, **params: object) -> np.ndarray:
    wl = Workload.from_frame(frame)
    policy = Unified.from_params({"T": 1000.0, **params}).fit(wl)
    jct: np.ndarray = simulate(wl, one_gpu(), policy).jct_s
    return jct


def test_best_effort_jobs_run_shortest_first() -> None:
    """Best-effort worth ``lease / (remaining + lease)`` orders the queue shortest first;
    a completion hands the GPU on at once (100, 100 + 200, 300 + 300)."""
    frame = pd.DataFrame({"arrival_s": [0.0] * 3, "gpus": [1] * 3,
                          "service_s": [300.0, 100.0, 200.0]})
    np.testing.assert_allclose(run(frame, preempt=False), [600.0, 100.0, 300.0])


def test_a_job_past_its_estimate_counts_as_about_to_end() -> None:
    """Worth reads the estimated remaining time floored at 0: a job run past its estimate
    (1,000 s of work, 100 s estimated) keeps the top best-effort worth, so a waiting 300 s
    job does not displace it at a lease end (JCTs 1000, 1300). Left negative, the remainder
    sent its worth through infinity (at 200 s) to below the waiting job's (at 300 s)."""
    frame = pd.DataFrame({"arrival_s": [0.0, 0.0], "gpus": [1, 1],
                          "service_s": [1000.0, 300.0], "estimated_service_s": [100.0, 300.0]})
    np.testing.assert_allclose(run(frame, be_lease_s=100.0), [1000.0, 1300.0])


def slo_frame(reward: float = 100.0) -> pd.DataFrame:
    """A best-effort job of 100 s and a strict SLO job of 1000 s due at 1500 s."""
    return pd.DataFrame({"arrival_s": [0.0, 0.0], "gpus": [1, 1], "service_s": [100.0, 1000.0],
                         "job_class": ["best_effort", "strict"], "deadlines_s": ["", "1500"],
                         "rewards": ["", str(reward)]})


def test_reward_scalings_decide_whether_slo_jobs_go_first() -> None:
    """SLO worth ``slo_reward`` (100) beats best-effort worth ``1 x 300 / 400``: the SLO job
    runs first. With ``slo_reward`` 1 and ``be_reward_scale`` 100 (worth 75) the short
    best-effort job does."""
    np.testing.assert_allclose(run(slo_frame()), [1100.0, 1000.0])
    np.testing.assert_allclose(run(slo_frame(), slo_reward=1.0, be_reward_scale=100.0),
                               [100.0, 1100.0])


def lease_frame(first_class: str) -> pd.DataFrame:
    """Job 0 (3000 s) starts alone; job 1 (100 s, best-effort, worth more) arrives at 10 s."""
    slo = first_class == "strict"
    return pd.DataFrame({"arrival_s": [0.0, 10.0], "gpus": [1, 1],
                         "service_s": [3000.0, 100.0], "job_class": [first_class, "best_effort"],
                         "deadlines_s": ["100000" if slo else "", ""],
                         "rewards": ["50" if slo else "", ""]})


@pytest.mark.parametrize(("first", "params", "expected"), [
    # best-effort, preemptible: displaced at the first lease boundary (300 s)
    ("best_effort", {"preempt": True}, [3100.0, 390.0]),
    # best-effort, not preemptible: job 1 waits for the end
    ("best_effort", {"preempt": False}, [3000.0, 3090.0]),
    # SLO job (worth 50 < 75) holding a lease of 2 BE leases: displaced at 600 s
    ("strict", {"slo_lease_multiple": 2, "be_reward_scale": 100.0}, [3100.0, 690.0]),
    # the same SLO job with a lease of 1: displaced at 300 s
    ("strict", {"slo_lease_multiple": 1, "be_reward_scale": 100.0}, [3100.0, 390.0]),
])
def test_leases_bound_when_allocations_change(first: str, params: dict[str, object],
                                              expected: list[float]) -> None:
    np.testing.assert_allclose(run(lease_frame(first), be_lease_s=300.0, **params), expected)


def test_idle_fast_gpus_pull_a_long_job_off_a_slow_one() -> None:
    """One fast GPU and one at a quarter speed. The short job (worth more) takes the fast GPU,
    the long one the slow GPU; the short job ends at 1000 s, and at the next lease boundary
    (1200 s) the long job, 300 s of work done, moves up: it ends at 1200 + 9700 s."""
    profile = ClusterProfile(
        "two", "fast + slow", "test", (NodeGroup(1, 1, "fast", 8.0), NodeGroup(1, 1, "slow", 8.0)),
        {"fast": 1.0, "slow": 0.25}, 1.0, 0.0, 0.0)
    wl = Workload.from_frame(pd.DataFrame({"arrival_s": [0.0, 0.0], "gpus": [1, 1],
                                           "service_s": [1000.0, 10_000.0]}))
    policy = Unified(T=1000.0, be_lease_s=300.0, preempt=False).fit(wl)
    np.testing.assert_allclose(simulate(wl, profile, policy).jct_s, [1000.0, 10_900.0])


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7), nodes=st.integers(1, 2),
       tau=st.sampled_from([0.0, 0.1, 1.0]), theta=st.sampled_from([0.0, 0.2, 2.0]),
       balance=st.sampled_from([0.0, 0.1, 1.0]), overcommit=st.sampled_from([0.5, 1.0, 2.0]))
def test_no_decision_breaks_its_interference_bounds(seed: int, n: int, nodes: int, tau: float,
                                                    theta: float, balance: float,
                                                    overcommit: float) -> None:
    """Memory, compute (overcommit), collision, interference and balance hold after every
    decision, recomputed from scratch by the OJPP harness; every job finishes."""
    wl = random_workload(seed, n, 4 * nodes, generate(1).scaling, None)
    policy = Unified(tau_max=tau, theta_max=theta, theta_balance=balance,
                     overcommit=overcommit, preempt=False, be_lease_s=120.0).fit(wl)
    checked = Checked(policy)
    r = simulate(wl, ojpp_profile(nodes), checked, seed=seed)
    assert checked.broken == []
    assert np.isfinite(r.finish_s).all()


def test_jobs_share_within_loose_bounds_and_never_without_sharing_data() -> None:
    """Light jobs on a small cluster share devices when the bounds allow it and finish sooner
    than exclusively; without sharing columns no device ever holds two jobs."""
    wl = add_sharing(generate(30, load=3.0, gpus=8, seed=2, median_service_s=600.0,
                              sigma=0.5), device_memory_gib=11.0, opportunistic=0.0, seed=3)
    profile = replace(ojpp_profile(2))
    loose = Unified(tau_max=1.0, theta_max=3.0, theta_balance=3.0, overcommit=1.0).fit(wl)
    shared = simulate(wl, profile, loose)
    alone = simulate(replace(wl, sharing=None), profile, Unified().fit(wl))
    assert shared.slowdown.max() > 0
    assert alone.slowdown.max() == 0
    assert shared.finish_s.max() < alone.finish_s.max()


def test_dimensions_the_workload_cannot_use_are_dropped() -> None:
    plain = generate(20, seed=1)
    dropped = Unified.inapplicable(plain, load_profile("pcs-64"))
    assert set(dropped) == {*Unified.SLO_ONLY, *Unified.SHARING_ONLY, "W_2", "W_3"}
    rich = add_slos(add_sharing(plain, seed=1), "MIX2", seed=1)
    assert Unified.inapplicable(rich, load_profile("ojpp-1080ti")) == {
        "W_2": "the cluster has no second GPU type", "W_3": "the cluster has no third GPU type"}
    # sharing data, but neither a matrix nor a fitted curve for the cluster's GPUs
    assert set(Unified.inapplicable(rich, load_profile("pcs-64"))) == {
        *Unified.SHARING_ONLY, "W_2", "W_3"}


@pytest.mark.slow
def test_cli_searches_unified_with_three_objectives(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """End to end: three objectives, mixed (choice) dimensions, dropped ones reported, and a
    front plot with one panel per pair of objectives and a parallel-coordinates panel."""
    run_dir = tmp_path / "run"
    main(["search", "--policy", "unified", "--sharing", "--slo-mix", "MIX2", "--profile",
          "ojpp-1080ti", "--generate", "40", "--budget", "8", "--pop-size", "4", "--offspring",
          "4", "--workers", "0", "--objective", "jct:avg", "--objective", "slo_miss:avg",
          "--objective", "gpu_util_sum:avg", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    doc = json.loads((run_dir / "front.json").read_text())
    assert doc["done"] and doc["front"]
    assert list(doc["front"][0]["objectives"]) == ["jct:avg", "slo_miss:avg", "gpu_util_sum:avg"]
    assert set(doc["dropped"]) == {"W_2", "W_3"}
    assert {"preempt", "tau_max", "slo_reward"} <= set(doc["front"][0]["params"])
    assert "W_2: dropped from the search" in out
    from matplotlib.image import imread

    image = imread(run_dir / "front.png")
    assert 1.1 < image.shape[1] / image.shape[0] < 1.4  # four panels, two by two


@dataclass(frozen=True)
class EveryBoundary:
    """The policy through its ``plan`` (the Python driver decides at every boundary, skipping
    none): a test harness, not a policy."""

    inner: Unified
    shares_gpus = True

    @property
    def round_s(self) -> float:
        return self.inner.round_s

    @property
    def reacts(self) -> bool:
        return True

    def plan(self, state: RoundState) -> np.ndarray:
        return self.inner.plan(state)


@pytest.mark.parametrize(("case", "params"), [
    (0, {}), (0, {"preempt": False, "slo_lease_multiple": 3}),
    (2, {"be_lease_s": 120.0, "zeta_min": 0.6}),
])
def test_skipped_lease_boundaries_would_have_decided_nothing(case: int,
                                                            params: dict[str, object]) -> None:
    """The engine skips the boundaries the kernel declares quiet; deciding at every one of
    them instead (and in every prediction playout) gives the same run (to 1e-9 as the golden
    runs: the clock crosses a skipped stretch in one step, not one per boundary). A sparse
    tail empties the cluster between arrivals, so the kernel also catches up on boundaries
    skipped before the cluster emptied."""
    golden = CASES["unified"][case]
    wl = golden.workload()
    frame = wl.to_frame()
    tail = frame.tail(5).assign(arrival_s=frame.arrival_s.max() + 1e6 * np.arange(1, 6))
    wl = Workload.from_frame(pd.concat([frame, tail]), scaling=wl.scaling)
    policy = Unified(**params).fit(wl)  # type: ignore[arg-type]
    fast = simulate(wl, golden.profile(), policy, predict=True, seed=3)
    slow = simulate(wl, golden.profile(), EveryBoundary(policy), predict=True, seed=3)
    assert fast.skipped_rounds > 0 and slow.skipped_rounds == 0
    for key in ("start_s", "finish_s", "slowdown", "pred_start_s", "pred_finish_s"):
        np.testing.assert_allclose(getattr(fast, key), getattr(slow, key), rtol=1e-9,
                                   atol=1e-12, err_msg=key)
    np.testing.assert_array_equal(fast.preemptions, slow.preemptions)
