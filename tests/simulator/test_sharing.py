"""GPU sharing in the round engine: slowdowns, memory, collisions, and the sharing metrics.

Oracles: hand-computed rates from Horus's published fit and Gavel's measured pairs; OJPP
eq. 4 against the frequency of collisions the run actually draws.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policies.base import RoundPolicy
from simulator import load_profile, simulate, summary
from simulator.errors import InvalidProfile, InvalidWorkload
from simulator.inputs.colocation import Interference, JobSharing, collision_probability
from simulator.inputs.generate import add_sharing, generate
from simulator.inputs.profile import load_profile as load_yaml
from simulator.inputs.throughput import ThroughputTable, generate_gavel
from simulator.inputs.workload import Workload
from simulator.rounds import InvalidPlan, RoundState
from tests.helpers.data import ROOT, SHARED

GAVEL = SHARED / "data/gavel/simulation_throughputs.json"
RTX2080 = (1.16664, -0.00302, 4e-5)


@dataclass(frozen=True)
class Pinned(RoundPolicy):
    """Puts job i's workers on the devices listed for it (test fixture, not registered)."""

    devices: tuple[tuple[int, ...], ...] = ()
    round_s: float = 60.0  # type: ignore[assignment]
    shares_gpus = True

    def plan(self, state: RoundState) -> np.ndarray:
        out = np.zeros((len(state), state.placed.shape[1]), dtype=np.int64)
        for i, row in enumerate(state.rows):
            out[i, list(self.devices[row])] = 1
        return out


def jobs(util: list[float], mem: list[float], surge: list[float] | None = None,
         p: list[float] | None = None, gpus: list[int] | None = None,
         service: float = 1000.0, model: list[str] | None = None) -> pd.DataFrame:
    n = len(util)
    frame = pd.DataFrame({"arrival_s": np.zeros(n), "gpus": gpus or [1] * n,
                          "service_s": np.full(n, service), "gpu_util": util,
                          "gpu_mem_gib": mem, "mem_surge_gib": surge or [0.0] * n,
                          "mem_surge_p": p or [0.0] * n})
    if model is not None:
        frame["model"] = model
    return frame


def quad(u: float) -> float:
    """Horus's RTX 2080 fit read as a JCT ratio: the slowdown is f(u) - 1."""
    a, b, c = RTX2080
    return a * u * u + b * u + c - 1.0


def test_utilization_curve_slows_co_located_jobs_by_horus_fit() -> None:
    """Below 100 % the linear piece (0 to f(1) - 1); above, Horus's RTX 2080 quadratic."""
    profile = load_profile("horus-128x8")
    low = Workload.from_frame(jobs([0.3, 0.4], [2.0, 2.0]))
    r = simulate(low, profile, Pinned(devices=((0,), (0,))))
    np.testing.assert_allclose(r.jct_s, 1000.0 * (1.0 + quad(1.0) * 0.7))
    high = Workload.from_frame(jobs([0.7, 0.8], [2.0, 2.0]))
    r = simulate(high, profile, Pinned(devices=((0,), (0,))))
    np.testing.assert_allclose(r.jct_s, 1000.0 * (1.0 + quad(1.5)))
    np.testing.assert_allclose(r.slowdown, quad(1.5))
    alone = simulate(high, profile, Pinned(devices=((0,), (1,))))
    np.testing.assert_allclose(alone.jct_s, 1000.0)
    assert alone.slowdown.tolist() == [0.0, 0.0]


def test_synchronous_job_runs_at_its_slowest_worker_and_speeds_up_when_partner_leaves() -> None:
    """Job 0 has workers on devices 0 and 1; job 1 (short) shares device 1 only. While both
    run, job 0 moves at 1/(1+f(u)); after job 1 finishes it runs alone at full speed."""
    profile = load_profile("horus-128x8")
    frame = jobs([0.6, 0.6], [2.0, 2.0], gpus=[2, 1])
    frame["service_s"] = [2000.0, 300.0]
    wl = Workload.from_frame(frame)
    r = simulate(wl, profile, Pinned(devices=((0, 1), (1,))))
    s = quad(1.2)
    t1 = 300.0 * (1 + s)
    speed2 = wl.scaling.speed(wl.model[:1], np.array([2.0]))[0]
    done = t1 * speed2 / (1 + s)
    assert r.jct_s[1] == pytest.approx(t1)
    assert r.jct_s[0] == pytest.approx(t1 + (2000.0 - done) / speed2)
    assert 0 < r.slowdown[0] < s


def test_pairwise_matrix_from_gavel_measurements() -> None:
    """Two single-GPU Gavel jobs sharing a V100 progress at Gavel's measured throughputs."""
    table = ThroughputTable.from_gavel_json(GAVEL)
    wl = generate_gavel(table, 2, jobs_per_hr=1.0)
    a, b = (wl.scaling.models[m] for m in wl.model)
    frame = wl.to_frame().assign(arrival_s=0.0, gpus=1, gpu_util=0.5, gpu_mem_gib=1.0,
                                 mem_surge_gib=0.0, mem_surge_p=0.0, service_s=1000.0)
    shared = replace(Workload.from_frame(frame, scaling=wl.scaling), type_speed=wl.type_speed,
                     interference=wl.interference)
    profile = load_profile("gavel-hetero-60")
    v100 = next(int(d) for d in range(60) if _device_type(profile, d) == "v100")
    r = simulate(shared, profile, Pinned(devices=((v100,), (v100,))))
    col = table.gpu_types.index("v100")
    own = [table.colocated[table.index(x), table.index(y), col, 0] for x, y in ((a, b), (b, a))]
    iso = [table.isolated[table.index(x), col] for x in (a, b)]
    first = min(1000.0 * i / o for i, o in zip(iso, own, strict=True))
    assert r.jct_s.min() == pytest.approx(first, rel=1e-9)


def _device_type(profile, device: int) -> str:  # type: ignore[no-untyped-def]
    for g in profile.node_groups:
        if device < g.count * g.gpus_per_node:
            return g.gpu_type
        device -= g.count * g.gpus_per_node
    raise IndexError(device)


def test_memory_beyond_the_device_is_an_invalid_plan() -> None:
    """OJPP eq. 3: base memories plus the largest surge must fit the 8 GiB RTX 2080."""
    profile = load_profile("horus-128x8")
    fits = Workload.from_frame(jobs([0.2, 0.2], [3.0, 3.0], surge=[2.0, 1.0], p=[0.1, 0.1]))
    simulate(fits, profile, Pinned(devices=((0,), (0,))))
    over = Workload.from_frame(jobs([0.2, 0.2], [3.0, 3.0], surge=[2.5, 1.0], p=[0.1, 0.1]))
    with pytest.raises(InvalidPlan, match="device 0 cannot hold"):
        simulate(over, profile, Pinned(devices=((0,), (0,))))


def test_sharing_a_type_without_a_slowdown_model_is_refused() -> None:
    wl = Workload.from_frame(jobs([0.2, 0.2], [1.0, 1.0]))
    with pytest.raises(InvalidPlan, match="no slowdown model"):
        simulate(wl, load_profile("pcs-64"), Pinned(devices=((0,), (0,))))


def test_collisions_happen_as_often_as_ojpp_eq4_says() -> None:
    """Three jobs surge independently; each 60 s round, the device collides with probability
    tau (eq. 4), and a colliding round runs at 1 / (1 + f(u) + collision_slowdown)."""
    profile = load_profile("horus-128x8")
    p = [0.3, 0.2, 0.5]
    wl = Workload.from_frame(jobs([0.2, 0.2, 0.2], [1.0, 1.0, 1.0], surge=[1.0] * 3, p=p,
                                  service=600_000.0))
    r = simulate(wl, profile, Pinned(devices=((0,), (0,), (0,))), seed=7)
    base = quad(1.0) * 0.6
    rounds = r.jct_s[0] / 60.0
    # progress per round is 60/(1+base) without, 60/(1+base+1) with a collision
    clean, hit = 60.0 / (1 + base), 60.0 / (2 + base)
    share = (rounds * clean - 600_000.0) / (rounds * (clean - hit))
    tau = collision_probability(np.array(p))
    assert share == pytest.approx(tau, abs=0.03)
    again = simulate(wl, profile, Pinned(devices=((0,), (0,), (0,))), seed=7)
    np.testing.assert_array_equal(again.jct_s, r.jct_s)


def test_sharing_metrics() -> None:
    """gpus_used counts devices that ever hosted a job; gpu_util_sum caps each device at 1."""
    profile = load_profile("horus-128x8")
    wl = Workload.from_frame(jobs([0.7, 0.8, 0.5], [1.0, 1.0, 1.0]))
    r = simulate(wl, profile, Pinned(devices=((0,), (0,), (5,))))
    s = summary(r, ("avg",))
    assert s["gpus_used"]["avg"] == 2
    t_shared, t_alone = 1000.0 * (1 + quad(1.5)), 1000.0
    util_integral = 1.0 * t_shared + 0.5 * t_alone
    assert s["gpu_util_sum"]["avg"] == pytest.approx(util_integral / (1024 * t_shared))
    assert s["slowdown"]["avg"] == pytest.approx(2 * quad(1.5) / 3)
    assert s["perf_guaranteed"]["avg"] == pytest.approx(1 - 2 * quad(1.5) / 3)


def test_sharing_columns_are_validated_and_round_trip() -> None:
    frame = jobs([0.5, 1.2], [1.0, 1.0])
    with pytest.raises(InvalidWorkload, match=r"row 2, column 'gpu_util'.*\(0, 1\]"):
        Workload.from_frame(frame, source="jobs.csv")
    with pytest.raises(InvalidWorkload, match="come together"):
        Workload.from_frame(frame.drop(columns="mem_surge_p"))
    wl = add_sharing(generate(50, load=0.8, gpus=64, seed=1), seed=2)
    back = Workload.from_frame(wl.to_frame(), scaling=wl.scaling)
    assert back.sharing is not None and wl.sharing is not None
    for x, y in zip(back.sharing.columns().values(), wl.sharing.columns().values(), strict=True):
        np.testing.assert_array_equal(x, y)
    assert back.digest() == wl.digest()


def test_synthetic_sharing_fits_the_device_alone() -> None:
    wl = add_sharing(generate(400, load=0.8, gpus=64, seed=3), device_memory_gib=11.0, seed=4)
    sh = wl.sharing
    assert isinstance(sh, JobSharing)
    assert ((sh.mem_gib + sh.surge_gib) <= 11.0 + 1e-9).all()
    assert 0.3 < (sh.surge_p > 0).mean() < 0.7
    assert ((sh.gpu_util > 0) & (sh.gpu_util <= 1)).all()


def test_gavel_interference_is_its_measured_slowdown() -> None:
    table = ThroughputTable.from_gavel_json(GAVEL)
    scaling = table.scaling()
    inter = table.interference(scaling)
    assert isinstance(inter, Interference)
    a, b = scaling.models[0], scaling.models[3]
    t = table.gpu_types.index("v100")
    expect = table.isolated[table.index(a), t] / table.colocated[
        table.index(a), table.index(b), t, 0] - 1
    assert inter.slowdown[0, 3, t] == pytest.approx(max(expect, 0.0))
    assert np.isfinite(inter.slowdown).all() and (inter.slowdown >= 0).all()


def test_profile_slowdown_fit_is_validated(tmp_path: Path) -> None:
    text = (ROOT / "cluster_profiles/horus-128x8.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("slowdown_fit: [1.16664, -0.00302, 4.0e-5]",
                                "slowdown_fit: [1.16664, -0.00302]"))
    with pytest.raises(InvalidProfile, match=r"slowdown_fit.*list of 3 numbers"):
        load_yaml(bad)
