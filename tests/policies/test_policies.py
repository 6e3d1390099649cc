"""The conformance suite every registered policy runs through (STYLE.md rule 4)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import (
    REGISTRY,
    WFQ,
    KernelPolicy,
    Policy,
    RoundPolicy,
    class_thresholds,
    get_policy,
    make_policy,
)
from simulator import (
    ClusterView,
    InvalidPolicyParams,
    Workload,
    generate,
    load_profile,
    parametric_table,
)
from simulator.inputs.generate import add_sharing, add_slos
from simulator.rounds import Cluster, RoundState
from simulator.rounds.sharing import SharingModel

TABLE = parametric_table(64)
NAMES = sorted(REGISTRY)
KERNEL_NAMES = [n for n in NAMES if issubclass(REGISTRY[n], KernelPolicy)]
ROUND_NAMES = [n for n in NAMES if issubclass(REGISTRY[n], RoundPolicy)]
SHARING_NAMES = [n for n in ROUND_NAMES if getattr(REGISTRY[n], "shares_gpus", False)]
NODE_NAMES = [n for n in ROUND_NAMES if n not in SHARING_NAMES]
WHOLE_GANGS = {"quota"}
"""Fluid-engine policies that run every job on its whole demand or not at all."""


def ready(name: str) -> Policy:
    return make_policy(name).fit(generate(200, seed=5, gpus=64))


def random_view(seed: int, n: int, gpus: int = 64) -> ClusterView:
    rng = np.random.default_rng(seed)
    size = np.exp(rng.normal(8, 2, n))
    done = rng.random(n) * size

    def ro(a: np.ndarray) -> np.ndarray:
        a.flags.writeable = False
        return a

    return ClusterView(
        now=1e5, total_gpus=gpus, job=ro(np.arange(n)),
        arrival_s=ro(np.sort(rng.random(n) * 1e5)),
        demand=ro(rng.choice([1, 2, 4, 8, 16, 32], n)), est_size=ro(size),
        est_remaining=ro(size - done), attained=ro(done), alloc=ro(np.zeros(n)),
        model=ro(rng.integers(0, len(TABLE.models), n)), scaling=TABLE)


@pytest.mark.parametrize("name", KERNEL_NAMES)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), gpus=st.sampled_from([1, 8, 64]))
def test_never_over_allocates(name: str, seed: int, n: int, gpus: int) -> None:
    view = random_view(seed, n, gpus)
    alloc = ready(name).allocate(view)
    assert alloc.shape == (n,)
    assert (alloc >= 0).all()
    assert (alloc <= view.demand + 1e-9).all()
    assert alloc.sum() <= gpus + 1e-9
    if name in WHOLE_GANGS:  # each job on all it asks for (at most the cluster) or on none,
        whole = np.minimum(view.demand, gpus)  # and idle GPUs fit no waiting gang
        assert ((alloc == 0) | (alloc == whole)).all()
        assert not (whole[alloc == 0] <= gpus - alloc.sum() + 1e-9).any()
    else:  # work-conserving: GPUs idle only when demand is met
        assert alloc.sum() == pytest.approx(min(gpus, view.demand.sum()), abs=1e-6)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_deterministic_and_view_untouched(name: str) -> None:
    view = random_view(1, 40)
    before = {f.name: np.array(getattr(view, f.name), copy=True)
              for f in dataclasses.fields(view) if isinstance(getattr(view, f.name), np.ndarray)}
    policy = ready(name)
    first, second = policy.allocate(view), policy.allocate(view)
    assert np.array_equal(first, second)
    for key, arr in before.items():
        assert np.array_equal(getattr(view, key), arr), key
        with pytest.raises(ValueError):
            getattr(view, key)[0] = 0  # the view is read-only


PROFILES = ("pcs-64", "gavel-hetero-60", "pcs-testbed-16")


def random_state(seed: int, n: int, profile: str) -> RoundState:
    """Active jobs mid-run: some SLO jobs, some holding a feasible placement already."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_profile(load_profile(profile))
    size = np.exp(rng.normal(8, 2, n))
    done = rng.random(n) * size
    demand = np.minimum(rng.choice([1, 2, 4, 8], n), cluster.node_gpus.sum())
    alloc = np.zeros((n, cluster.nodes), dtype=np.int64)
    free = cluster.node_gpus.copy()
    for j in np.flatnonzero(rng.random(n) < 0.3):  # an earlier plan: whole jobs, first fit
        fits = np.flatnonzero(free >= demand[j])
        if fits.size:
            alloc[j, fits[0]] = demand[j]
            free[fits[0]] -= demand[j]
    wl = add_slos(generate(n, seed=seed, gpus=64), "MIX2", seed=seed)
    slos = wl.slos
    assert slos is not None
    arrival = np.sort(rng.random(n) * 1e5)
    return RoundState(
        now=1e5, cluster=cluster, rows=np.arange(n), arrival_s=arrival, demand=demand,
        min_gpus=np.ones(n, dtype=np.int64), est_size=size, est_remaining=size - done,
        attained=done, alloc=alloc, model=rng.integers(0, len(TABLE.models), n),
        job_class=slos.job_class.copy(), deadlines_s=arrival[:, None] + slos.deadlines_s,
        rewards=slos.rewards.copy(), scaling=TABLE,
        speeds=np.tile([1.0, 0.5, 0.2][:len(cluster.types)], (len(TABLE.models), 1)), memo={})


def random_sharing_state(seed: int, n: int, profile: str) -> RoundState:
    """As :func:`random_state`, for policies that share GPUs: jobs with (synthetic) sharing
    columns, the placed ones alone on devices of the nodes they hold."""
    state = random_state(seed, n, profile)
    prof, cluster = load_profile(profile), state.cluster
    wl = add_sharing(generate(n, seed=seed, gpus=64),
                     device_memory_gib=float(cluster.node_mem_gib.min()), seed=seed)
    assert wl.sharing is not None
    placed = np.zeros((n, int(cluster.node_gpus.sum())), dtype=bool)
    for j, k in zip(*np.nonzero(state.alloc), strict=True):
        free = np.flatnonzero((cluster.device_node == k) & ~placed.any(axis=0))
        placed[j, free[:state.alloc[j, k]]] = True
    sharing = SharingModel(
        jobs=wl.sharing, model=state.model, device_node=cluster.device_node,
        device_type=cluster.node_type[cluster.device_node],
        device_mem_gib=cluster.node_mem_gib[cluster.device_node], matrix=None,
        curves=tuple(prof.slowdown_curves.get(t) for t in cluster.types),
        collision_slowdown=prof.collision_slowdown)
    return dataclasses.replace(state, placed=placed, sharing=sharing)


@pytest.mark.parametrize("name", NODE_NAMES)
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 80), profile=st.sampled_from(PROFILES))
def test_round_plans_fit_nodes_and_demands(name: str, seed: int, n: int, profile: str) -> None:
    state = random_state(seed, n, profile)
    plan = np.asarray(ready(name).plan(state))
    assert plan.shape == (n, state.cluster.nodes)
    assert np.issubdtype(plan.dtype, np.integer) and (plan >= 0).all()
    assert (plan.sum(axis=0) <= state.cluster.node_gpus).all()
    assert (plan.sum(axis=1) <= state.demand).all()


@pytest.mark.parametrize("name", SHARING_NAMES)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60),
       profile=st.sampled_from(("ojpp-1080ti", "horus-128x8")))
def test_sharing_plans_fit_device_memory_and_demands(name: str, seed: int, n: int,
                                                      profile: str) -> None:
    state = random_sharing_state(seed, n, profile)
    assert state.sharing is not None
    plan = np.asarray(ready(name).plan(state))
    assert plan.shape == state.placed.shape
    assert np.issubdtype(plan.dtype, np.integer) and ((plan == 0) | (plan == 1)).all()
    assert (state.sharing.memory_excess(state.rows, plan.astype(bool)) <= 1e-9).all()
    assert (plan.sum(axis=1) <= state.demand).all()


@pytest.mark.parametrize("name", ROUND_NAMES)
def test_round_plans_deterministic_and_state_untouched(name: str) -> None:
    state = (random_sharing_state(2, 50, "ojpp-1080ti") if name in SHARING_NAMES
             else random_state(2, 50, "gavel-hetero-60"))
    before = {f.name: np.array(getattr(state, f.name), copy=True)
              for f in dataclasses.fields(state) if isinstance(getattr(state, f.name), np.ndarray)}
    policy = ready(name)
    first = policy.plan(state)
    second = policy.plan(dataclasses.replace(state, memo={}))
    assert np.array_equal(first, second)
    for key, arr in before.items():
        assert np.array_equal(getattr(state, key), arr, equal_nan=arr.dtype.kind == "f"), key


@pytest.mark.parametrize("name", NAMES)
def test_json_round_trip(name: str) -> None:
    policy = ready(name)
    text = json.dumps(policy.to_dict())
    back = get_policy(json.loads(text)["policy"]).from_params(json.loads(text)["params"])
    assert back == policy


@pytest.mark.parametrize("name", NAMES)
def test_domain_boundaries(name: str) -> None:
    cls = get_policy(name)
    for param, dom in cls.domains().items():
        if dom.kind == "choice":
            continue
        for ok in (dom.low, dom.high):
            cls.from_params({param: int(ok) if dom.kind == "int" else ok})
        for bad in (dom.low - 1.0, dom.high * 2 + 1.0, float("nan"), "x"):
            with pytest.raises(InvalidPolicyParams, match=param):
                cls.from_params({param: bad})
    with pytest.raises(InvalidPolicyParams, match="no parameter"):
        cls.from_params({"no_such_knob": 1})


def test_unknown_policy_lists_known() -> None:
    with pytest.raises(InvalidPolicyParams, match="wfq"):
        get_policy("wfqq")


def test_wfq_classes_follow_cov_threshold() -> None:
    sizes = np.array([1.0, 1.0, 1.0, 100.0, 100.0, 10_000.0])
    th = WFQ(T=0.5).fit(generate(10, seed=0)).thresholds
    assert th[-1] == math.inf
    assert class_thresholds(sizes, 0.5) == (1.0, 100.0, math.inf)
    assert class_thresholds(sizes, 1e9) == (math.inf,)  # huge T: one class
    assert len(th) >= 1


def test_wfq_classes_on_tied_sizes_are_distinct(pcs_trace: Any) -> None:
    """The walk closes [16, 16, 17] when the next 17 breaks it, skips that 17, and closes
    [17, 17] when 19 breaks it: 17 twice. The second class could hold no job; WFQ refused the
    repeated threshold, which stopped a retune on a window of trace 6c71a0."""
    assert class_thresholds(np.array([16.0, 16, 17, 17, 17, 17, 19]), 0.0009) == (17.0, math.inf)
    window = pcs_trace("6c71a0", 13_500).to_frame().iloc[-2000:-1000]  # a window's training half
    train = Workload.from_frame(window, scaling=pcs_trace("6c71a0").scaling)
    sizes = train.estimated_service_s
    for T in np.logspace(-3, 0, 200):
        th = WFQ(T=T).fit(train).thresholds  # strictly increasing, or the constructor raises
        lower = (-math.inf, *th[:-1])  # and every class below the last holds a training job
        assert all(((sizes > lo) & (sizes <= hi)).any() for lo, hi in zip(lower[:-1], th[:-1],
                                                                           strict=True))


def test_wfq_weights_decay_with_w() -> None:
    wl = generate(500, seed=4)
    rates = WFQ(T=0.2, W=1.0).fit(wl).rates
    assert math.isclose(sum(rates), 1.0)
    assert all(a > b for a, b in itertools.pairwise(rates))
    ratios = [b / a for a, b in itertools.pairwise(rates)]
    assert np.allclose(ratios, math.exp(-1.0))


@pytest.mark.parametrize("W", [-3.0, 0.0, 3.0])
def test_class_weights_are_one_formula_that_never_overflows(W: float) -> None:
    from policies.pcs.wfq import class_weights

    w = class_weights(W, 400)  # exp(3 x 399) overflows a double: computed from the largest
    assert np.isfinite(w).all() and (w > 0).all() and math.isclose(w.sum(), 1.0)
    head = class_weights(W, 5)
    np.testing.assert_allclose(head[1:] / head[:-1], math.exp(-W), rtol=1e-12)
    # the tiered families and the export share it
    from policies import Unified

    np.testing.assert_array_equal(Unified(W_1=W).weights(0, 5), head)


def test_wfq_pcs_config_rates(pcs_configs: dict[str, object]) -> None:
    policy = WFQ.from_pcs_config(pcs_configs["0e4a51_bal"])  # type: ignore[arg-type]
    assert policy.rates == pytest.approx((313 / 333, 19 / 333, 1 / 333))
    assert policy.thresholds == (2139.0, 1533489.0, math.inf)
    with pytest.raises(InvalidPolicyParams, match="rates must be > 0 and sum to 1"):
        WFQ.explicit([10.0, None], [0.5, 0.6])
    with pytest.raises(InvalidPolicyParams, match="call fit"):
        WFQ().allocate(random_view(0, 3))
