"""The engine against oracles: FIFO's zero prediction error, WFQ's extremes, hand-worked runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import FIFO, SRSF, WFQ, MaxMin, Themis, make_policy
from policies.pcs.wfq import class_weights
from simulator import ClusterProfile, ClusterView, Workload, generate, load_profile, simulate
from simulator.inputs.profile import PROFILE_DIR
from simulator.metrics import METRICS


def two_jobs(restart_s: float, tmp_path: Path) -> tuple[Workload, ClusterProfile]:
    doc = yaml.safe_load((PROFILE_DIR / "pcs-64.yaml").read_text())
    doc["overheads"]["restart_overhead_s"] = restart_s
    path = tmp_path / "pcs-64.yaml"  # a profile is named as its file
    path.write_text(yaml.safe_dump(doc))
    frame = pd.DataFrame({"arrival_s": [0.0, 10.0], "gpus": [64, 64],
                          "service_s": [64_000.0, 6_400.0], "model": ["linear", "linear"]})
    return Workload.from_frame(frame), load_profile(path)


@pytest.mark.parametrize(("restart_s", "jct_a"), [(0.0, 1100.0), (100.0, 1200.0)])
def test_preemption_and_restart_overhead(tmp_path: Path, restart_s: float, jct_a: float) -> None:
    # A (1000 s at 64 GPUs) runs; B (100 s) arrives at 10 s and preempts it under SRSF;
    # A resumes at 110 s and, with a restart overhead, makes no progress for that long.
    wl, profile = two_jobs(restart_s, tmp_path)
    r = simulate(wl, profile, SRSF())
    assert r.jct_s == pytest.approx([jct_a, 100.0])
    assert list(r.preemptions) == [2, 0]  # 64 -> 0 -> 64
    assert r.start_s == pytest.approx([0.0, 10.0])


def test_single_job_runs_at_its_demand_speed(pcs_trace: object, pcs64: ClusterProfile) -> None:
    wl = pcs_trace("6c71a0", 50)  # type: ignore[operator]
    job = int(np.argmax(wl.gpus))
    alone = Workload.from_frame(wl.to_frame().iloc[[job]], scaling=wl.scaling)
    r = simulate(alone, pcs64, FIFO())
    speed = wl.scaling.speed(wl.model[[job]], wl.gpus[[job]].astype(float))
    assert r.jct_s[0] == pytest.approx(wl.service_s[job] / speed[0], rel=1e-12)


def test_one_wfq_class_is_fifo(pcs64: ClusterProfile) -> None:
    wl = generate(600, load=0.95, seed=11)
    fifo = simulate(wl, pcs64, FIFO(), predict=True)
    one = simulate(wl, pcs64, WFQ(T=1e3, zeta_min=0.0).fit(wl), predict=True)
    assert one.workload is wl and WFQ(T=1e3).fit(wl).thresholds == (math.inf,)
    assert np.allclose(one.jct_s, fifo.jct_s, rtol=1e-12)
    assert np.nanmax(METRICS["pred_err"].compute(one)) < 1e-6  # FIFO: 0 % prediction error


def _per_job_classes(wl: Workload, W: float) -> WFQ:
    sizes = np.unique(wl.estimated_service_s)
    th: list[float | None] = [*sizes[:-1], None]
    return WFQ.explicit(th, list(class_weights(W, len(th))), zeta_min=0.0)


def _distinct_sizes(seed: int) -> Workload:
    frame = generate(300, load=0.9, seed=seed).to_frame()
    frame["service_s"] += np.arange(len(frame)) * 1e-3  # no two jobs share a size
    frame["estimated_service_s"] = frame["service_s"]
    return Workload.from_frame(frame)


def test_one_class_per_job_equal_weights_is_maxmin(pcs64: ClusterProfile) -> None:
    wl = _distinct_sizes(12)
    assert len(np.unique(wl.service_s)) == len(wl)
    fair = simulate(wl, pcs64, MaxMin())
    wfq = simulate(wl, pcs64, _per_job_classes(wl, 0.0))
    assert np.allclose(wfq.jct_s, fair.jct_s, rtol=1e-9)


def test_one_class_per_job_decreasing_weights_is_sjf() -> None:
    # steep weights give each smaller job priority over every larger one: shortest job first
    wl = _distinct_sizes(12).head(40)
    policy = _per_job_classes(wl, 15.0)  # consecutive weights differ by e^-15
    rows = np.arange(40)
    view = ClusterView(now=0.0, total_gpus=64, job=rows, arrival_s=wl.arrival_s[rows],
                       demand=wl.gpus[rows], est_size=wl.estimated_service_s[rows],
                       est_remaining=wl.estimated_service_s[rows], attained=np.zeros(40),
                       alloc=np.zeros(40), model=wl.model[rows], scaling=wl.scaling)
    order = np.argsort(view.est_size)
    sjf = np.zeros(40)
    sjf[order] = np.clip(64 - (np.cumsum(view.demand[order]) - view.demand[order]), 0,
                         view.demand[order])
    assert np.allclose(policy.allocate(view), sjf, atol=1e-3)


def test_themis_lease_adds_decisions(pcs64: ClusterProfile) -> None:
    wl = generate(200, load=0.9, seed=3)
    short = simulate(wl, pcs64, Themis(lease_s=60.0))
    long = simulate(wl, pcs64, Themis(lease_s=86400.0))
    assert short.events > long.events > 2 * len(wl) - 1
    assert np.isfinite(short.finish_s).all()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), name=st.sampled_from(["fifo", "srsf", "srtf", "las", "maxmin",
                                                       "themis", "afs", "wfq"]),
       load=st.floats(0.3, 1.5))
def test_conservation(seed: int, name: str, load: float) -> None:
    pcs64 = load_profile("pcs-64")
    wl = generate(80, load=load, seed=seed)
    policy = make_policy(name).fit(wl)
    r = simulate(wl, pcs64, policy)
    fastest = wl.service_s / wl.scaling.speed(wl.model, wl.gpus.astype(float))
    # on PCS's microsecond clock (LAS) every time is rounded to the microsecond
    grid = 1e-6 if policy.pcs_clock else 0.0
    assert np.isfinite(r.finish_s).all()
    assert (r.start_s >= wl.arrival_s - grid / 2).all()
    assert (r.jct_s >= fastest * (1 - 1e-9) - grid).all()  # nobody beats their full-demand speed
    util = METRICS["utilization"].compute(r)[0]
    assert 0 < util <= 1 + 1e-9
    assert r.busy_gpu_s == pytest.approx(float(np.sum(np.diff(np.r_[r.series_t, r.finish_s.max()])
                                                      * r.series_busy)))
