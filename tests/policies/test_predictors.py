"""Horus utilization and OJPP (AIP) interference predictors: real scikit-learn, no mocks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, cross_val_score
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVR
from sklearn.tree import DecisionTreeRegressor

from policies.learned.predictors import InterferencePredictor, UtilizationPredictor
from policies.learned.profiling_data import (
    SYNTHETIC_UTIL_NOISE,
    InvalidProfilingData,
    read_interference_profiles,
    read_utilization_profiles,
    synthetic_interference_profiles,
    synthetic_utilization_profiles,
)
from simulator.errors import ParetoSearchError


def rmsle(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.log1p(pred) - np.log1p(y)) ** 2)))


@pytest.fixture(scope="module")
def util_frame() -> pd.DataFrame:
    return synthetic_utilization_profiles(300, np.random.default_rng(0))


@pytest.fixture(scope="module")
def util_model(util_frame: pd.DataFrame) -> UtilizationPredictor:
    return UtilizationPredictor().fit(util_frame)


def test_utilization_cv_rmsle_near_the_injected_noise(
        util_frame: pd.DataFrame, util_model: UtilizationPredictor) -> None:
    # Noise is u·exp(σε): a perfect model scores ≈ σ·rms(u/(1+u)) <= σ/2 (first order);
    # allowing as much again for approximation error gives the bound σ.
    sigma = SYNTHETIC_UTIL_NOISE
    clean = synthetic_utilization_profiles(300, np.random.default_rng(0), noise=0.0)
    assert np.array_equal(clean["flops_g"], util_frame["flops_g"])  # same draws, no noise
    floor = rmsle(clean["gpu_util"].to_numpy(), util_frame["gpu_util"].to_numpy())
    best = util_model.scores_[util_model.chosen_]
    assert util_model.chosen_ == min(util_model.scores_, key=util_model.scores_.__getitem__)
    assert set(util_model.scores_) == {"linear", "random_forest", "hist_gradient_boosting"}
    assert 0.8 * floor < best < sigma  # cannot beat the noise; within the derived bound
    y = util_frame["gpu_util"].to_numpy()
    assert rmsle(y, np.full_like(y, y.mean())) > 4 * best  # far better than the mean
    assert util_model.scores_["linear"] > best  # saturation is not linear
    assert util_model.synthetic_


def test_utilization_predictions_clipped_to_unit_interval() -> None:
    # Exactly linear rules: linear regression fits them (CV RMSLE ~ 0) and wins; outside the
    # training range its raw prediction leaves (0, 1], and the clip is what keeps it there.
    frame = synthetic_utilization_profiles(60, np.random.default_rng(3))
    probe = frame.iloc[:3].assign(conv_layers=[0, 80, 10_000])
    rising = UtilizationPredictor().fit(frame.assign(gpu_util=0.1 + 0.002 * frame["conv_layers"]))
    assert rising.chosen_ == "linear" and rising.scores_["linear"] < 1e-9
    np.testing.assert_allclose(rising.predict(probe), [0.1, 0.26, 1.0], atol=1e-9)  # raw 20.1
    falling = UtilizationPredictor().fit(frame.assign(gpu_util=0.5 - 0.002 * frame["conv_layers"]))
    assert falling.chosen_ == "linear"
    np.testing.assert_allclose(falling.predict(probe), [0.5, 0.34, 0.001], atol=1e-9)  # −19.5


def _aip_oracle(frame: pd.DataFrame) -> dict[str, float]:
    """AIP's four candidates scored directly with sklearn's own MAE scorer."""
    X = frame[list(InterferencePredictor.feature_names())].to_numpy()
    y = frame["slowdown"].to_numpy()
    cv = KFold(n_splits=5, shuffle=True, random_state=0)
    models = {"linear": LinearRegression(), "svr": SVR(),
              "decision_tree": DecisionTreeRegressor(random_state=0),
              "k_neighbors": KNeighborsRegressor()}
    return {name: -cross_val_score(make_pipeline(StandardScaler(), m), X, y, cv=cv,
                                   scoring="neg_mean_absolute_error").mean()
            for name, m in models.items()}


@pytest.mark.parametrize(("rule", "winner"), [
    ("horus", None),  # whatever the oracle says
    ("linear", "linear"),
    ("step", "decision_tree"),
])
def test_aip_picks_the_lowest_cv_mae(rule: str, winner: str | None) -> None:
    frame = synthetic_interference_profiles(300, np.random.default_rng(1))
    if rule == "linear":
        frame["slowdown"] = (0.05 + 0.3 * frame["own_util"] + 0.5 * frame["partner_util"]
                             + 0.02 * frame["partner_mem_gib"] + 0.001 * frame["own_batch_size"])
    elif rule == "step":
        frame["slowdown"] = np.where(frame["partner_util"] > 0.5, 0.6, 0.1)
    model = InterferencePredictor().fit(frame)
    oracle = _aip_oracle(frame)
    assert model.scores_ == pytest.approx(oracle, rel=1e-9, abs=1e-12)
    assert model.chosen_ == min(oracle, key=oracle.__getitem__)
    if winner is not None:
        assert model.chosen_ == winner
    y = frame["slowdown"].to_numpy()
    assert oracle[model.chosen_] < np.mean(np.abs(y - y.mean())) / 3  # beats the mean


def test_save_load_round_trip(tmp_path: Path, util_model: UtilizationPredictor) -> None:
    probe = synthetic_utilization_profiles(50, np.random.default_rng(9))
    path = tmp_path / "util.json"
    util_model.save(path)
    doc = json.loads(path.read_text())  # plain JSON, no pickle
    assert doc["estimator"] == util_model.chosen_ and doc["synthetic"] is True
    assert doc["scores"] == util_model.scores_ and len(doc["rows"]) == 300
    assert doc["features"] == list(UtilizationPredictor.feature_names())
    assert list(tmp_path.iterdir()) == [path]  # the temp file was renamed, not left behind
    loaded = UtilizationPredictor.load(path)
    np.testing.assert_array_equal(loaded.predict(probe), util_model.predict(probe))
    assert (loaded.chosen_, loaded.scores_, loaded.synthetic_) == (
        util_model.chosen_, util_model.scores_, True)

    frame = synthetic_interference_profiles(120, np.random.default_rng(2)).drop(columns="source")
    aip = InterferencePredictor().fit(frame)
    assert not aip.synthetic_  # no source column: treated as measured
    aip.save(tmp_path / "aip.json")
    again = InterferencePredictor.load(tmp_path / "aip.json")
    np.testing.assert_array_equal(again.predict(frame), aip.predict(frame))
    assert json.loads((tmp_path / "aip.json").read_text())["synthetic"] is False


def test_load_rejects_a_tampered_file(tmp_path: Path, util_model: UtilizationPredictor) -> None:
    path = tmp_path / "util.json"
    util_model.save(path)
    with pytest.raises(InvalidProfilingData, match=r"kind.*'interference'"):
        InterferencePredictor.load(path)
    doc = json.loads(path.read_text())
    for field, value, expected in [("params", {"no_such": 1}, "params"),
                                   ("estimator", "xgboost", "estimator"),
                                   ("rows", [[1.0] * 7 + [1.5]], r"row 1, column 'gpu_util'")]:
        path.write_text(json.dumps({**doc, field: value}))
        with pytest.raises(InvalidProfilingData, match=expected):
            UtilizationPredictor.load(path)


UTIL_CSV = """\
flops_g,params_m,batch_size,activations_m,conv_layers,linear_layers,recurrent_layers,gpu_util
4.1,25.6,32,11.0,53,1,0,0.82
0.02,0.06,64,0.01,2,3,0,0.07
15.5,138.0,16,13.5,13,3,0,0.91
"""


@pytest.mark.parametrize(("row", "column", "bad", "expected"), [
    (None, "flops_g", None, "column 'flops_g': required column is missing"),
    (3, "flops_g", "-1.0", r"row 3, column 'flops_g': must lie in \(0, inf\).*got -1\.0"),
    (2, "gpu_util", "1.5", r"row 2, column 'gpu_util'.*divide percentages by 100.*got 1\.5"),
    (1, "batch_size", "abc", r"row 1, column 'batch_size': must be a number \(got 'abc'\)"),
    (2, "batch_size", "12.5", r"row 2, column 'batch_size': must be a whole number"),
])
def test_bad_utilization_csv_names_file_row_column_value(
        tmp_path: Path, row: int | None, column: str, bad: str | None, expected: str) -> None:
    frame = pd.read_csv(pd.io.common.StringIO(UTIL_CSV), dtype=str)
    if row is None:
        frame = frame.drop(columns=column)
    else:
        frame.loc[row - 1, column] = bad
    path = tmp_path / "profiles.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(InvalidProfilingData, match=expected) as info:
        read_utilization_profiles(path)
    assert str(info.value).startswith(str(path))
    assert isinstance(info.value, ParetoSearchError) and isinstance(info.value, ValueError)


def test_csv_loaders_accept_good_files(tmp_path: Path) -> None:
    path = tmp_path / "util.csv"
    path.write_text(UTIL_CSV)
    frame = read_utilization_profiles(path)
    assert frame["gpu_util"].tolist() == [0.82, 0.07, 0.91]
    pairs = synthetic_interference_profiles(20, np.random.default_rng(4))
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    loaded = read_interference_profiles(tmp_path / "pairs.csv")
    np.testing.assert_allclose(loaded["slowdown"], pairs["slowdown"])
    assert (loaded["source"] == "synthetic").all()
    pairs.loc[6, "slowdown"] = -1.5  # faster than alone by more than all its time
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    with pytest.raises(InvalidProfilingData, match=r"pairs.csv, row 7, column 'slowdown'"):
        read_interference_profiles(tmp_path / "pairs.csv")


def test_synthetic_data_is_seeded_and_marked() -> None:
    for make in (synthetic_utilization_profiles, synthetic_interference_profiles):
        a = make(100, np.random.default_rng(7))
        pd.testing.assert_frame_equal(a, make(100, np.random.default_rng(7)))
        assert not a.equals(make(100, np.random.default_rng(8)))
        assert (a["source"] == "synthetic").all()
        assert "SYNTHETIC" in (make.__doc__ or "")
    pairs = synthetic_interference_profiles(500, np.random.default_rng(7))
    u = pairs["own_util"] + pairs["partner_util"]
    # Horus RTX 2080: over-committed pairs slow down more (quadratic above u = 1)
    assert pairs["slowdown"][u > 1.5].mean() > 3 * pairs["slowdown"][u < 0.8].mean()
