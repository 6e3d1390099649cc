"""JCT predictions of round-engine policies (SPEC §2): oracles that hold for every policy.

A prediction plays the state after the arrival's decision out with estimated sizes and no later
arrivals. So with exact estimates, a job after which nothing arrives is predicted exactly by
any deterministic policy: the playout *is* the future. That only holds if the fork copies all
of the run's state (the policy's memory, restart pauses, the memory-surge generator), which is
what these tests check. A non-preemptive FIFO never lets a later arrival delay an earlier job,
so it predicts every job exactly.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import REGISTRY, RoundPolicy, make_policy
from simulator import ClusterProfile, Workload, generate, load_profile, simulate
from simulator.inputs.generate import add_sharing, add_slos
from tests.helpers.golden import CASES


def _profile(policy: str) -> ClusterProfile:
    return CASES[policy][0].profile()


def _workload(policy: str, seed: int, n: int) -> Workload:
    profile = _profile(policy)
    gpus = min(8, min(g.gpus_per_node * g.count for g in profile.node_groups))
    memory = min(g.gpu_memory_gib for g in profile.node_groups)
    base = generate(n, load=1.5, gpus=gpus, seed=seed, median_service_s=900.0, sigma=1.0)
    return add_slos(add_sharing(base, device_memory_gib=memory, seed=seed), "MIX2", seed=seed)


ROUND_POLICIES = sorted(name for name, cls in REGISTRY.items() if issubclass(cls, RoundPolicy))


def test_every_round_policy_has_golden_cases_here() -> None:
    assert set(ROUND_POLICIES) == set(CASES) - {n for n in CASES
                                                if not issubclass(REGISTRY[n], RoundPolicy)}


@pytest.mark.parametrize("policy", ROUND_POLICIES)
def test_a_static_batch_is_predicted_exactly(policy: str) -> None:
    wl = _workload(policy, seed=7, n=24)
    batch = Workload.from_frame(wl.to_frame().assign(arrival_s=0.0), scaling=wl.scaling)
    r = simulate(batch, _profile(policy), make_policy(policy).fit(batch), predict=True)
    assert np.isfinite(r.pred_finish_s).all()
    np.testing.assert_allclose(r.pred_finish_s, r.finish_s, rtol=1e-9)
    np.testing.assert_allclose(r.pred_start_s, r.start_s, rtol=1e-9)


@pytest.mark.parametrize("policy", ROUND_POLICIES)
def test_the_last_arrivals_are_predicted_exactly(policy: str) -> None:
    wl = _workload(policy, seed=11, n=40)
    r = simulate(wl, _profile(policy), make_policy(policy).fit(wl), predict=True)
    last = wl.arrival_s == wl.arrival_s.max()
    np.testing.assert_allclose(r.pred_finish_s[last], r.finish_s[last], rtol=1e-9)
    assert np.isfinite(r.pred_finish_s).all() and r.playout_events > 0


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["yarn-cs", "fifo-exclusive"]))
def test_non_preemptive_fifo_predicts_every_job_exactly(seed: int, policy: str) -> None:
    wl = _workload(policy, seed=seed, n=60)
    r = simulate(wl, _profile(policy), make_policy(policy), predict=True)
    np.testing.assert_allclose(r.pred_finish_s, r.finish_s, rtol=1e-9)


def test_predictions_follow_the_estimates() -> None:
    # estimates twice the truth: a job alone on the cluster is predicted to take twice as long
    wl = generate(5, load=0.05, gpus=4, seed=3)
    frame = wl.to_frame().assign(estimated_service_s=2 * wl.service_s)
    doubled = Workload.from_frame(frame, scaling=wl.scaling)
    profile = replace(load_profile("gavel-hetero-60"), node_groups=(
        replace(load_profile("gavel-hetero-60").node_groups[0], count=1),))
    r = simulate(doubled, profile, make_policy("yarn-cs"), predict=True)
    alone = r.start_s == wl.arrival_s  # started at once, nobody else in the way
    assert alone.any()
    np.testing.assert_allclose((r.pred_finish_s - r.start_s)[alone],
                               2 * (r.finish_s - r.start_s)[alone], rtol=1e-9)
