"""WFQ with per-GPU-type weights: weight exponents steer classes between GPU types."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import WFQHetero
from policies.hetero.wfq_hetero import share_by_weight
from simulator import generate, load_profile, simulate
from simulator.inputs.generate import add_slos
from simulator.inputs.scaling import parametric_table
from simulator.rounds import Cluster, RoundState


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 100), st.lists(st.floats(0.01, 10), min_size=1, max_size=6),
       st.lists(st.floats(0, 50), min_size=6, max_size=6))
def test_share_by_weight_is_work_conserving_and_capped(cap: float, w: list[float],
                                                       d: list[float]) -> None:
    weights, demand = np.array(w), np.array(d[:len(w)])
    share = share_by_weight(cap, weights, demand)
    assert (share <= demand + 1e-9).all() and (share >= 0).all()
    assert share.sum() == pytest.approx(min(cap, demand.sum()), abs=1e-6)


def test_share_by_weight_splits_by_weight_when_all_want_more() -> None:
    assert share_by_weight(30, np.array([2.0, 1.0]), np.array([100.0, 100.0])) == \
        pytest.approx([20.0, 10.0])
    # a class needing less hands the rest over
    assert share_by_weight(30, np.array([2.0, 1.0]), np.array([5.0, 100.0])) == \
        pytest.approx([5.0, 25.0])


def _state(n_small: int, n_large: int) -> RoundState:
    """Waiting 1-GPU jobs on gavel-hetero-60: sizes 100 (class 0) and 1e6 (class 1)."""
    cluster = Cluster.from_profile(load_profile("gavel-hetero-60"))
    n = n_small + n_large
    size = np.r_[np.full(n_small, 100.0), np.full(n_large, 1e6)]
    table = parametric_table(8)
    return RoundState(
        now=0.0, cluster=cluster, rows=np.arange(n), arrival_s=np.arange(n, dtype=float),
        demand=np.ones(n, dtype=np.int64), min_gpus=np.ones(n, dtype=np.int64), est_size=size,
        est_remaining=size, attained=np.zeros(n), alloc=np.zeros((n, cluster.nodes), np.int64),
        model=np.zeros(n, dtype=np.int64), job_class=np.zeros(n, dtype=np.int64),
        deadlines_s=np.zeros((n, 0)), rewards=np.zeros((n, 0)), scaling=table,
        speeds=np.tile([1.0, 0.5, 0.2], (len(table.models), 1)), memo={})


@pytest.mark.parametrize(("W_1", "small_on_v100"), [(3.0, 19), (-3.0, 1), (0.0, 10)])
def test_fast_type_weights_decide_which_class_gets_the_v100s(W_1: float,
                                                              small_on_v100: int) -> None:
    # 30 small + 30 large waiting 1-GPU jobs; 20 V100s split by exp(-W_1 i): e^3 ≈ 20:1 gives
    # the small class round(20 · 20.09/21.09) = 19; -3 mirrors it; 0 splits evenly
    policy = WFQHetero(T=0.01, W_1=W_1, W_2=0.0, W_3=0.0, thresholds=(100.0, math.inf))
    state = _state(30, 30)
    plan = policy.plan(state)
    v100 = state.cluster.node_type == 0
    assert plan[:30, v100].sum() == small_on_v100
    assert plan[:, v100].sum() == 20  # no fast GPU left idle
    assert plan.sum() == 60  # every job placed: 60 GPUs, 60 one-GPU jobs


def test_runs_end_to_end_and_never_preempts() -> None:
    prof = load_profile("gavel-hetero-60")
    wl = add_slos(generate(150, gpus=60, load=1.0, seed=2, median_service_s=600.0), "MIX1")
    res = simulate(wl, prof, WFQHetero(round_s=120.0).fit(wl))
    assert np.isfinite(res.finish_s).all()
    assert (res.preemptions == 0).all()
