"""Hadar §V-A's workload from the Philly trace: the paper's counts, classes and models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator import InvalidWorkload, Workload
from simulator.inputs.hadar_workload import CLASSES, TABLE2_MODELS, hadar_workload
from simulator.inputs.throughput import ThroughputTable
from tests.helpers.data import PCS, SHARED

TRACE = PCS / "traces" / "trace_6214e9.csv"
GAVEL = SHARED / "data" / "gavel" / "simulation_throughputs.json"
# the paper's Table II: model -> class (LSTM is Gavel's LM)
TABLE2 = {"ResNet-50": "XL", "ResNet-18": "S", "LM": "L", "CycleGAN": "M", "Transformer": "L"}


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return ThroughputTable.from_gavel_json(GAVEL)


def gpu_hours(wl: Workload) -> np.ndarray:
    """Each job's total GPU time, undoing the builder's V100 timing."""
    speed = wl.scaling.speed(wl.model, wl.gpus.astype(float))
    return wl.service_s / speed * wl.gpus / 3600.0


def test_static_sample_is_the_papers_480_jobs_of_hours_3_to_10(table: ThroughputTable) -> None:
    wl = hadar_workload(TRACE, table, seed=3)
    assert len(wl) == 480 and (wl.arrival_s == 0).all()
    frame = wl.to_frame()
    hours = gpu_hours(wl)
    for name, cls in zip(frame["model"], hours, strict=True):
        family = name.split(" (")[0]
        low, high = CLASSES[TABLE2[family]]
        assert low <= cls <= high, (name, cls)
    # the sample is drawn from the trace's hours 3-10 of the day: its GPU-hours are trace rows'
    df = pd.read_csv(TRACE)
    tod = df["submit_time"] % 86400 / 3600
    window = np.sort(df.loc[(tod >= 3) & (tod < 10), "service"].to_numpy() / 3600)
    found = np.searchsorted(window, hours - 1e-9)
    assert np.allclose(window[np.minimum(found, len(window) - 1)], hours, rtol=1e-9)
    # random sampling keeps the window's class mix (Small 77 %, no gang over 8 GPUs here)
    small = (hours < 1).mean()
    assert 0.70 < small < 0.84
    assert set(np.unique(wl.gpus)) <= {1, 2, 4, 8}


def test_stratified_sample_has_an_equal_share_per_class(table: ThroughputTable) -> None:
    wl = hadar_workload(TRACE, table, sampling="stratified", seed=1)
    counts = {c: 0 for c in CLASSES}
    for family in wl.to_frame()["model"].str.split(" \\(").str[0]:
        counts[TABLE2[family]] += 1
    assert counts == {"S": 120, "M": 120, "L": 120, "XL": 120}
    # both Large models are drawn, roughly evenly
    models = wl.to_frame()["model"].value_counts()
    assert set(models.index) == {m for ms in TABLE2_MODELS.values() for m in ms}
    assert 40 < models["LM (batch size 20)"] < 80


def test_continuous_arrivals(table: ThroughputTable) -> None:
    trace = hadar_workload(TRACE, table, arrivals="trace", seed=2)
    assert (np.diff(trace.arrival_s) >= 0).all()
    assert trace.arrival_s.min() >= 0 and trace.arrival_s.max() < 7 * 3600
    poisson = hadar_workload(TRACE, table, arrivals="poisson", rate_per_h=60.0, seed=2)
    rate = (len(poisson) - 1) / (poisson.arrival_s[-1] / 3600)
    assert 60 * 0.85 < rate < 60 * 1.15
    # the arrival pattern changes only the times: same jobs, same sample
    static = hadar_workload(TRACE, table, seed=2)
    assert sorted(static.service_s) == sorted(poisson.service_s)
    # static jobs queue in trace order unless shuffled: the same jobs, another order
    assert (static.service_s == poisson.service_s).all()
    shuffled = hadar_workload(TRACE, table, shuffle=True, seed=2)
    assert sorted(shuffled.service_s) == sorted(static.service_s)
    assert not (shuffled.service_s == static.service_s).all()


def test_bad_input_is_named(table: ThroughputTable, tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("submit_time,service,num_jobs\n0,100,1\n5,oops,1\n")
    with pytest.raises(InvalidWorkload, match=r"row 2.*service.*oops"):
        hadar_workload(bad, table)
    bad.write_text("submit_time,service\n0,100\n")
    with pytest.raises(InvalidWorkload, match="num_jobs"):
        hadar_workload(bad, table)
    with pytest.raises(InvalidWorkload, match="fewer than the 480"):
        hadar_workload(TRACE, table, hours=(3.0, 3.01))
    with pytest.raises(InvalidWorkload, match="not in the throughput table"):
        hadar_workload(TRACE, table, models={**TABLE2_MODELS, "S": ("ResNet-18",)})
    with pytest.raises(InvalidWorkload, match="rate_per_h"):
        hadar_workload(TRACE, table, arrivals="poisson")
