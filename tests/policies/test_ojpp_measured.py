"""OJPP's measured inputs (simulator/inputs/ojpp_measured.json,
simulator/inputs/ojpp_workload.py) against the paper's text (papers/ojpp.md), and the bounds
OJPP keeps on them.

Oracles: the values the text quotes (Fig. 3's entries, Fig. 2's memory profile, the largest
slowdown), eq. 4 worked by hand, eq. 15 as a property of every placement, and Fig. 9's claim
that the balance bound keeps many-worker jobs from slowing down.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import make_policy
from simulator import load_profile, simulate
from simulator.errors import InvalidWorkload
from simulator.inputs.colocation import collision_probability
from simulator.inputs.ojpp_workload import KINDS, measured, ojpp_batch, ojpp_interference

MODELS = measured()["models"]["value"]


def entry(slowdown: np.ndarray, worker: str, partner: str) -> float:
    return float(slowdown[MODELS.index(worker), MODELS.index(partner), 0])


def test_every_value_says_where_in_the_paper_it_is_read() -> None:
    def sources(node: object) -> list[str]:
        if isinstance(node, dict):
            own = [node["source"]] if "source" in node else []
            return own + [s for k, v in node.items() if k != "source" for s in sources(v)]
        if isinstance(node, list):
            return [s for v in node for s in sources(v)]
        return []
    data = {k: v for k, v in measured().items() if k != "about"}
    for key, node in data.items():
        rows = node if isinstance(node, list) else [node]
        assert rows, key
        for row in rows:
            found = sources(row)
            assert len(found) == 1 and "§" in found[0], (key, row)


@given(st.floats(0.0, 0.5), st.floats(0.0, 0.5), st.floats(0.21, 1.22), st.integers(0, 99))
def test_the_quoted_entries_of_fig_3_survive_any_fill(a: float, b: float, resnet: float,
                                                      seed: int) -> None:
    s = ojpp_interference((min(a, b), max(a, b)), resnet, seed).slowdown
    assert entry(s, "ResNet", "VGG") == 1.22  # §1, §3.3
    assert entry(s, "VGG", "ResNet") == 0.187  # §3.3
    assert entry(s, "LeNet", "LSTM") == 0.18  # §1
    assert entry(s, "ResNet", "LeNet") == 1.13  # §1, Fig. 1(a)
    assert s.max() <= 1.22  # §5.3.2: 122 % at most
    assert s[MODELS.index("ResNet"), :, 0].min() > 0.2  # §5.3.1: ResNet ends alone at 0.2


def test_resnet_workers_carry_fig_2s_profile_and_two_collide_as_eq_4_says() -> None:
    wl = ojpp_batch("c-high", 0)
    rows = np.flatnonzero(np.array(wl.scaling.models)[wl.model] == "ResNet")
    assert rows.size
    sh = wl.sharing
    assert sh is not None
    np.testing.assert_allclose(sh.mem_gib[rows], 0.3 * 11.0)
    np.testing.assert_allclose(sh.surge_gib[rows], 0.62 * 11.0)
    np.testing.assert_allclose(sh.surge_p[rows], 0.2)
    # two workers surging with p = 0.2: 1 - 0.8^2 - 2 (0.2)(0.8) = 0.04 <= tau-bar 0.05
    assert collision_probability(np.array([0.2, 0.2])) == pytest.approx(0.04)


@pytest.mark.parametrize("kind", KINDS)
def test_no_worker_is_slowed_past_theta_bar_without_collisions(kind: str) -> None:
    wl = ojpp_batch(kind, 1)
    profile = replace(load_profile("ojpp-1080ti"), collision_slowdown=0.0)
    r = simulate(wl, profile, make_policy("ojpp", {"theta_max": 0.2,
                                                   "migration_budget": 0.0}), seed=0)
    assert np.isfinite(r.finish_s).all()
    assert r.slowdown.max() <= 0.2 + 1e-9


def test_the_balance_bound_keeps_ten_worker_jobs_faster_as_fig_9_shows() -> None:
    profile = load_profile("ojpp-1080ti")
    slow = {}
    for balance in (0.1, 5.0):
        pol = make_policy("ojpp", {"theta_balance": balance, "migration_budget": 0.0})
        slow[balance] = np.mean([simulate(ojpp_batch("mixed", s, workers=(10, 10)), profile,
                                          pol, seed=s).slowdown.mean() for s in range(2)])
    assert slow[0.1] < slow[5.0]


def test_surge_scale_scales_the_assumed_surges_and_lets_tau_bar_bind() -> None:
    # ResNet's p is Fig. 2's and stays; the assumed ones scale, at most 1
    c_high = ojpp_batch("c-high", 0, surge_scale=3.0)
    names = np.array(c_high.scaling.models)[c_high.model]
    assert c_high.sharing is not None
    np.testing.assert_allclose(c_high.sharing.surge_p[names == "ResNet"], 0.2)
    np.testing.assert_allclose(c_high.sharing.surge_p[names != "ResNet"], 0.6)
    capped = ojpp_batch("c-high", 0, surge_scale=30.0).sharing
    assert capped is not None and capped.surge_p.max() == 1.0
    # Average models surge with 0.05 x 3: two collide with 0.0225, three with
    # 1 - 0.85^3 - 3 (0.15)(0.85^2) = 0.06075, above tau-bar 0.05
    assert collision_probability(np.full(3, 0.15)) == pytest.approx(0.06075)
    profile = load_profile("ojpp-1080ti")
    used = {}
    for scale in (1.0, 3.0):
        wl = ojpp_batch("average", 0, surge_scale=scale)
        for tau in (0.05, 0.1):
            pol = make_policy("ojpp", {"tau_max": tau, "theta_max": 0.4, "theta_balance": 5.0,
                                       "migration_budget": 0.0})
            used[scale, tau] = simulate(wl, profile, pol, seed=0).gpus_used
    workers = int(ojpp_batch("average", 0).gpus.sum())
    assert used[1.0, 0.05] == used[1.0, 0.1]  # four at 0.05 collide with 0.014: never binds
    assert used[3.0, 0.05] >= workers / 2  # at most two workers a device
    assert used[3.0, 0.05] > used[3.0, 0.1]


@pytest.mark.parametrize(("name", "value"), [("mem_scale", 0.0), ("mem_scale", float("nan")),
                                             ("surge_scale", -0.5), ("surge_scale", float("nan"))])
def test_a_bad_scale_names_itself(name: str, value: float) -> None:
    with pytest.raises(InvalidWorkload, match=f"{name} must be a finite number"):
        ojpp_batch("average", 0, **{name: value})
