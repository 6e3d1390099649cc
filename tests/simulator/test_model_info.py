"""Chronus's ``model_info.json``: each model's speed when its gang spans nodes, read as
Chronus's progress function reads it, and applied by the round engine, UniSched's selector
and Hadar's search."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policies import make_policy
from policies.unisched.milp import selector_arrays
from simulator import ScalingTable, parametric_table, read_chronus, simulate
from simulator.errors import InvalidWorkload
from simulator.inputs.model_info import load_scaling, read_model_info
from simulator.inputs.profile import ClusterProfile, NodeGroup
from simulator.rounds import Cluster, job_rates
from tests.helpers.data import SHARED

MODEL_INFO = SHARED / "data" / "chronus" / "model_info.json"
INFO = json.loads(MODEL_INFO.read_text())


def chronus_progress(model: str, gpus: int, nodes: int) -> float | None:
    """Chronus's ``compute_progress`` with its ``convert_to_bin`` (ChronusArtifact bc7e15f,
    ``code/alg/scheduler/time_aware_with_lease.py``), written out again from its text; None
    where it returns 1.0 without an entry (the cluster's factor applies here)."""
    if gpus > 8 or gpus < 2:
        return None
    size = 8 if gpus in (5, 6, 7) else 4 if gpus in (3, 4) else gpus
    entry = INFO[model][str(size)]
    if nodes == 1:
        return 1.0
    if nodes == 2:
        return min(float(entry["2"]), 1.0)  # above 1 (measurement noise) read as 1
    return min(float(entry["4"] if "4" in entry else entry["2"]), 1.0)


def table() -> ScalingTable:
    return read_model_info(MODEL_INFO).merged(parametric_table(64))


def chronus_csv(path: Path, rows: list[tuple[str, int, int, int]]) -> Path:
    """A best-effort Chronus trace: (model, GPUs, submit minute, duration in minutes)."""
    pd.DataFrame({
        "job_id": range(len(rows)), "user": "u", "num_gpu": [r[1] for r in rows],
        "submit_time": [r[2] for r in rows], "iterations": 1,
        "model_name": [r[0] for r in rows], "duration": [r[3] for r in rows], "interval": 1,
        "expect_time_list": "", "expect_value_list": "", "best_effort": 1,
        "job_type": "best"}).to_csv(path, index=False)
    return path


def profile(nodes: int, gpus_per_node: int, inter: float) -> ClusterProfile:
    return ClusterProfile(
        name="test", description="", provenance="test",
        node_groups=(NodeGroup(nodes, gpus_per_node, "v100", 32.0),),
        relative_speed={"v100": 1.0}, inter_node_factor=inter, restart_overhead_s=0.0,
        suspend_overhead_s=0.0)


@pytest.mark.parametrize("model", sorted(INFO))
def test_spread_speeds_follow_chronus_progress_function(model: str) -> None:
    spread = table().spread_factors(0.9)
    m = table().index(model)
    for gpus in range(1, 17):
        for k, nodes in enumerate((2, 3)):
            want = chronus_progress(model, gpus, nodes)
            assert spread[m, gpus, k] == (0.9 if want is None else want), (gpus, nodes)
    linear = parametric_table(64)  # on one node each model scales as the built-in linear
    assert (table().speedup[m] == linear.speedup[linear.index("linear")]).all()


def test_the_round_engine_runs_each_spread_gang_at_its_models_speed(tmp_path: Path) -> None:
    # 1-GPU nodes: every gang of g GPUs spans g nodes; each job runs alone, so it lasts its
    # duration over its model's speed on that many nodes (a 1-GPU job: its duration)
    rows = [("vgg16", 2, 0, 60), ("resnet101", 4, 100, 60), ("alexnet", 8, 200, 60),
            ("mobilenet_v2", 1, 300, 60), ("inception_v3", 2, 400, 60)]
    wl = read_chronus(chronus_csv(tmp_path / "t.csv", rows), scaling=table())
    assert [wl.scaling.models[m] for m in wl.model] == [r[0] for r in rows]
    res = simulate(wl, profile(8, 1, 0.9), make_policy("fifo-gang", {"lease_s": 60.0}))
    factor = [chronus_progress(r[0], r[1], r[1]) or 1.0 for r in rows]
    np.testing.assert_allclose(res.finish_s - res.start_s,
                               [3600.0 / f for f in factor], rtol=1e-9)
    # on 8-GPU nodes every gang fits one node: full speed
    whole = simulate(wl, profile(1, 8, 0.9), make_policy("fifo-gang", {"lease_s": 60.0}))
    np.testing.assert_allclose(whole.finish_s - whole.start_s, 3600.0, rtol=1e-9)


def test_policies_see_the_rates_the_engine_applies() -> None:
    # job_rates (what a Python round policy reads) on 2-GPU nodes: a 4-GPU vgg16 gang on two
    # nodes, on four, and on one node; the cluster's factor for a 12-GPU gang (no entry)
    scaling = table()
    cluster = Cluster.from_profile(profile(8, 2, 0.8))
    model = np.array([scaling.index("vgg16")] * 3 + [scaling.index("linear")])
    alloc = np.zeros((4, 8), dtype=np.int64)
    alloc[0, :2] = 2
    alloc[1, :4] = 1
    alloc[2, :1] = 2
    alloc[2, 1] = 0
    alloc[3, :6] = 2
    rates = job_rates(alloc, model, cluster, np.ones((len(scaling.models), 1)), scaling)
    vgg = INFO["vgg16"]["4"]
    np.testing.assert_allclose(rates, [4 * vgg["2"], 4 * vgg["4"], 2.0, 12 * 0.8])


def test_unisched_prices_a_spread_candidate_at_its_jobs_speed() -> None:
    # candidates of a 2-GPU and a 6-GPU job on 8-GPU nodes: consolidated (1.0), two cells
    # (speed over 2 nodes), all 1-GPU cells (over 3 or more; 2 cells for the 2-GPU job)
    spread = np.array([[0.7, 0.6], [0.5, 0.4]])
    gpus = np.array([2, 6])
    _, job, phi, *_ = selector_arrays(np.full(4, 8), spread, gpus, np.zeros(2, bool),
                                      np.full((2, 1), 100.0), np.full((2, 1), 1000.0),
                                      np.full(4, 8), 300.0, 4)
    assert list(job) == [0, 0, 1, 1, 1]
    np.testing.assert_allclose(phi, [1.0, 0.7, 1.0, 0.5, 0.4])
    # an 8-GPU gang on 4-GPU nodes: its work is priced over 2 nodes; its eight 1-GPU cells
    # may span more, at 0.4 / 0.5 of that
    _, job, phi, *_ = selector_arrays(np.full(4, 4), spread[1:], np.array([8]),
                                      np.zeros(1, bool), np.full((1, 1), 100.0),
                                      np.full((1, 1), 1000.0), np.full(4, 4), 300.0, 4)
    np.testing.assert_allclose(phi, [1.0, 0.8])


def test_hadar_spreads_only_the_models_that_spread_well(tmp_path: Path) -> None:
    # a 2-GPU node of a type at 0.8 and two 1-GPU nodes of a type at 1.0: spread over the
    # fast nodes, vgg16 (0.896 over 2 nodes) runs faster than on the slow node and alexnet
    # (0.745) slower; the profile's own factor (0.9) would spread both
    rows = [("vgg16", 2, 0, 60), ("alexnet", 2, 200, 60)]
    wl = read_chronus(chronus_csv(tmp_path / "t.csv", rows), scaling=table())
    mixed = ClusterProfile(
        name="test", description="", provenance="test",
        node_groups=(NodeGroup(1, 2, "slow", 32.0), NodeGroup(2, 1, "fast", 32.0)),
        relative_speed={"slow": 0.8, "fast": 1.0}, inter_node_factor=0.9,
        restart_overhead_s=0.0, suspend_overhead_s=0.0)
    res = simulate(wl, mixed, make_policy("hadar", {}))
    np.testing.assert_allclose(res.finish_s - res.start_s,
                               [3600.0 / INFO["vgg16"]["2"]["2"], 3600.0 / 0.8], rtol=1e-9)


@pytest.mark.parametrize(("name", "params"), [("unisched", {"profile_s": 0.0}), ("hadar", {})])
def test_the_engine_charges_each_gang_its_models_speed_under_unisched_and_hadar(
        tmp_path: Path, name: str, params: dict[str, float]) -> None:
    # 1-GPU nodes and no restart cost: a g-GPU gang always spans g nodes, so whatever the
    # policy does, the GPU-seconds busy are each job's GPU-time over its model's speed there
    # (UniSched without its profiler jobs, which run on fewer GPUs than the gang)
    rows = [(m, g, 3 * i, 40 + 7 * i) for i, (m, g) in enumerate(
        [("vgg16", 2), ("alexnet", 4), ("resnet101", 2), ("vgg16", 4), ("mobilenet_v2", 1),
         ("inception_v3", 8), ("alexnet", 2), ("vgg16", 8)])]
    wl = read_chronus(chronus_csv(tmp_path / "t.csv", rows), scaling=table())
    res = simulate(wl, profile(8, 1, 1.0), make_policy(name, params))
    want = sum(g * d * 60.0 / (chronus_progress(m, g, g) or 1.0) for m, g, _, d in rows)
    assert res.busy_gpu_s == pytest.approx(want, rel=1e-9)
    assert np.isfinite(res.finish_s).all()


def test_bad_model_info_names_the_entry(tmp_path: Path) -> None:
    bad = tmp_path / "info.json"
    for doc, where in (({"vgg16": {"2": {"2": 1.6}}}, "vgg16.2.2"),
                       ({"vgg16": {"2": {"two": 0.5}}}, "vgg16.2.two"),
                       ({"vgg16": {"x": {"2": 0.5}}}, "vgg16"),
                       ({"vgg16": [0.5]}, "vgg16"),
                       ({"vgg16": {"2": {"\u00b2": 0.5}}}, "vgg16.2."),
                       ({"vgg16": {"2": {"2": 0.5, "02": 0.6}}}, "vgg16.2.02"),
                       ({"vgg16": {"1" * 5000: {"2": 0.5}}}, "vgg16"),
                       ({"vgg16": {"2": {"2": True}}}, "vgg16.2.2")):
        bad.write_text(json.dumps(doc))
        with pytest.raises(InvalidWorkload, match=f"{re.escape(str(bad))}.*{re.escape(where)}"):
            load_scaling(bad)
    bad.write_text("[]")
    with pytest.raises(InvalidWorkload, match="at least one model"):
        load_scaling(bad)


def test_a_trace_model_missing_from_model_info_is_named(tmp_path: Path) -> None:
    path = chronus_csv(tmp_path / "t.csv", [("vgg16", 2, 0, 10), ("bert", 2, 1, 10)])
    with pytest.raises(InvalidWorkload, match=r"row 2, column 'model_name'.*'bert'"):
        read_chronus(path, scaling=table())
    other = chronus_csv(tmp_path / "u.csv", [("VGG16", 2, 0, 10)])  # none known: no fallback
    with pytest.raises(InvalidWorkload, match=r"row 1, column 'model_name'.*'VGG16'"):
        read_chronus(other, scaling=table())
