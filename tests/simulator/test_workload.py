"""Workload loaders, generators and scaling tables: real files, and errors that say where."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator import (
    InvalidWorkload,
    ScalingTable,
    Workload,
    generate,
    generate_from_cdfs,
    read_pcs_trace,
    read_table,
    read_trace,
)
from simulator.inputs.generate import PHILLY_LOAD, read_cdf
from simulator.inputs.scaling import PARAMETRIC_MODELS, amdahl, parametric_table
from tests.helpers.data import PCS

TRACE = PCS / "traces" / "trace_0e4a51.csv"


def test_pcs_trace_maps_columns(pcs_scaling: ScalingTable) -> None:
    wl = read_pcs_trace(TRACE, scaling=pcs_scaling)
    raw = pd.read_csv(TRACE)
    assert len(wl) == 2465  # data README
    assert np.array_equal(wl.gpus, raw.num_jobs)  # num_jobs is the GPU demand
    assert np.array_equal(wl.service_s, raw.service)
    assert np.array_equal(wl.arrival_s, raw.submit_time)
    assert wl.scaling.models[wl.model[0]] == raw.model_name[0]
    assert np.array_equal(wl.estimated_service_s, wl.service_s)


def test_scaling_table_uses_iteration_times(pcs_scaling: ScalingTable) -> None:
    raw = pd.read_csv(PCS / "scaling_tables.csv")
    vgg = raw[raw.model == "VggnetModel256"].reset_index()
    m = pcs_scaling.index("VggnetModel256")
    exact = (vgg.time_per_iter_us[0] / 1e6) / (vgg.time_per_iter_us / 1e6)
    assert np.allclose(pcs_scaling.speedup[m, 1:len(vgg) + 1], exact, rtol=0)
    assert np.allclose(exact, vgg.speedup, atol=1e-5)  # the rounded column agrees
    # fractional GPUs interpolate; above the table it stays flat; 0 GPUs is no speed
    s = pcs_scaling.speed(np.array([m, m, m]), np.array([0.0, 2.5, 500.0]))
    assert s[0] == 0.0
    assert s[1] == pytest.approx((exact[1] + exact[2]) / 2)
    assert s[2] == pytest.approx(exact.iloc[-1])


def test_speedups_are_divided_as_pcs_divides(pcs_scaling: ScalingTable) -> None:
    # PCS (models.py) divides iteration times in seconds; t_1 / t_g differs in the last bit
    # for some models, and LAS's exact ties in attained service turn on it
    raw = pd.read_csv(PCS / "scaling_tables.csv")
    differs = 0
    for model, rows in raw.groupby("model", sort=False):
        t = rows.time_per_iter_us.to_numpy(dtype=float)
        timed = t > 0  # a 0 or empty time falls back to the rounded speedup column
        pcs = (t[0] / 1e6) / np.where(timed, t / 1e6, np.nan)
        ours = pcs_scaling.speedup[pcs_scaling.index(str(model)), 1:len(t) + 1]
        assert np.array_equal(ours[timed], pcs[timed]), model
        differs += int(np.any(pcs[timed] != t[0] / t[timed]))
    assert differs > 0  # the table does tell the two divisions apart


def test_parametric_models_follow_amdahl() -> None:
    table = parametric_table(64)
    assert set(table.models) == set(PARAMETRIC_MODELS)
    lin = table.index("linear")
    assert np.allclose(table.speedup[lin, 1:], np.arange(1, 65))
    assert np.allclose(amdahl(0.95, 64)[-1], 1 / (0.05 + 0.95 / 64))
    assert (np.diff(table.prefix_efficiency(), axis=1) <= 1e-12).all()


def test_table_round_trip_csv_and_parquet(tmp_path: Path) -> None:
    wl = generate(300, load=0.7, gpus=64, seed=3)
    for suffix in (".csv", ".parquet"):
        path = tmp_path / f"w{suffix}"
        frame = wl.to_frame()
        frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
        back = read_trace(path, scaling=wl.scaling)
        assert np.allclose(back.arrival_s, wl.arrival_s)
        assert np.array_equal(back.gpus, wl.gpus)
        assert np.array_equal(back.model, wl.model)
        assert back.digest() == read_table(path, scaling=wl.scaling).digest()


def test_read_trace_tells_pcs_format_apart(pcs_scaling: ScalingTable) -> None:
    wl = read_trace(TRACE, scaling=pcs_scaling)
    assert len(wl) == 2465


BAD_CASES = [
    ("drop", "service_s", None, "column 'service_s': required column is missing"),
    ("set", "service_s", float("nan"), "row 3, column 'service_s': must be a finite number > 0"),
    ("set", "service_s", -5.0, "row 3, column 'service_s'"),
    ("set", "service_s", 0.0, "row 3, column 'service_s'"),
    ("set", "gpus", 0, "row 3, column 'gpus': must be an integer >= 1"),
    ("set", "gpus", -2, "row 3, column 'gpus'"),
    ("set", "gpus", 1.5, "row 3, column 'gpus'"),
    ("set", "arrival_s", -1.0, "row 3, column 'arrival_s'"),
    ("set", "arrival_s", 1e12, "row 4, column 'arrival_s': arrivals must not decrease"),
    ("set", "model", "NoSuchModel", "row 3, column 'model'"),
]


@pytest.mark.parametrize(("op", "column", "value", "message"), BAD_CASES)
def test_bad_rows_are_named(tmp_path: Path, op: str, column: str, value: object,
                            message: str) -> None:
    frame = generate(10, load=0.5, gpus=64, seed=1).to_frame().drop(columns=["job_id"])
    if op == "drop":
        frame = frame.drop(columns=[column])
    else:
        frame[column] = frame[column].astype(object)
        frame.loc[2, column] = value
    path = tmp_path / "bad.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(InvalidWorkload) as err:
        read_table(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)
    assert repr(value) in str(err.value) or op == "drop" or value != value


def test_pcs_trace_errors_use_pcs_column_names(tmp_path: Path,
                                               pcs_scaling: ScalingTable) -> None:
    raw = pd.read_csv(TRACE, nrows=20)
    raw.loc[4, "num_jobs"] = 0
    path = tmp_path / "t.csv"
    raw.to_csv(path, index=False)
    with pytest.raises(InvalidWorkload, match=r"row 5, column 'num_jobs'.*got 0"):
        read_pcs_trace(path, scaling=pcs_scaling)


def test_unknown_model_says_how_to_fix() -> None:
    with pytest.raises(InvalidWorkload, match="scaling-table"):
        read_trace(TRACE)  # parametric table only: PCS model names are unknown


def test_demand_larger_than_cluster_is_rejected() -> None:
    wl = generate(50, load=0.5, gpus=64, seed=0)
    big = int(np.flatnonzero(wl.gpus == wl.gpus.max())[0])
    with pytest.raises(InvalidWorkload, match=rf"row {big + 1}, column 'gpus'.*more GPUs"):
        wl.check_fits(int(wl.gpus.max()) - 1, "tiny")


def test_generator_is_seeded_and_hits_the_load() -> None:
    a, b = generate(5000, load=0.8, gpus=64, seed=7), generate(5000, load=0.8, gpus=64, seed=7)
    assert a.digest() == b.digest()
    assert a.digest() != generate(5000, load=0.8, gpus=64, seed=8).digest()
    offered = a.service_s.sum() / (a.arrival_s[-1] * 64)
    assert offered == pytest.approx(0.8, rel=0.05)  # Poisson arrivals at the target load
    assert (np.diff(a.arrival_s) >= 0).all()
    # heavy tail: the p99 size is ~100x the median, as in the Philly traces
    ratio = np.percentile(a.service_s, 99) / np.median(a.service_s)
    assert 30 < ratio < 1000
    assert (a.gpus == 1).mean() > 0.5 and a.gpus.max() >= 16
    assert len(set(a.model)) == 4


def test_default_load_is_the_philly_traces_median(pcs_scaling: ScalingTable) -> None:
    loads = []
    for path in sorted((PCS / "traces").glob("trace_*.csv")):
        wl = read_pcs_trace(path, scaling=pcs_scaling)
        loads.append(wl.service_s.sum() / ((wl.arrival_s[-1] - wl.arrival_s[0]) * 64))
    assert len(loads) == 5
    assert round(float(np.median(loads)), 1) == PHILLY_LOAD
    wl = generate(5000, gpus=64, seed=3)  # the generator's default is that load
    assert wl.service_s.sum() / (wl.arrival_s[-1] * 64) == pytest.approx(PHILLY_LOAD, rel=0.1)


def test_cdf_generator_follows_pcs_cdfs(pcs_scaling: ScalingTable) -> None:
    wl = generate_from_cdfs(PCS / "workloads", "workload_0e4a51", scaling=pcs_scaling,
                            n_jobs=4000, load=0.8, gpus=64, seed=1)
    values, cdf = read_cdf(PCS / "workloads" / "cdf-max-gpus-per-job-workload_0e4a51.csv")
    one_gpu = cdf[np.searchsorted(values, 1, side="right") - 1]
    assert (wl.gpus == 1).mean() == pytest.approx(one_gpu, abs=0.03)
    assert set(np.unique(wl.gpus)) <= set(values.astype(int))


def test_cdf_generator_names_missing_files(tmp_path: Path, pcs_scaling: ScalingTable) -> None:
    with pytest.raises(InvalidWorkload, match=r"cdf-app-service-times-nope\.csv"):
        generate_from_cdfs(tmp_path, "nope", scaling=pcs_scaling, n_jobs=5, load=0.5, gpus=8)


def test_scaling_table_errors_name_the_row(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("model,gpus,speedup\nm,1,1.0\nm,3,2.0\n")
    with pytest.raises(InvalidWorkload, match=r"row 2, column 'gpus'.*expected 2"):
        ScalingTable.from_csv(path)
    path.write_text("model,gpus,speedup\nm,1,1.0\nm,2,-1\n")
    with pytest.raises(InvalidWorkload, match=r"row 2, column 'speedup'"):
        ScalingTable.from_csv(path)


def test_workload_is_immutable_and_head_cuts() -> None:
    wl = generate(100, seed=2)
    with pytest.raises(ValueError):
        wl.service_s[0] = 1.0
    assert len(wl.head(10)) == 10
    with pytest.raises(InvalidWorkload):
        wl.head(0)
    assert isinstance(wl, Workload)
