"""Measures and metrics from records."""

from __future__ import annotations

import numpy as np
import pytest

from policies import FIFO
from simulator import InvalidObjective, generate, load_profile, measure, simulate, summary
from simulator.metrics import METRICS, parse_measure


def test_measures_match_numpy() -> None:
    v = np.random.default_rng(0).exponential(10, 1001)
    assert measure(v, "avg") == pytest.approx(v.mean())
    assert measure(v, "p99") == pytest.approx(np.percentile(v, 99))
    assert measure(v, "P99.9") == pytest.approx(np.percentile(v, 99.9))
    assert measure(v, "max") == v.max() and measure(v, "min") == v.min()
    assert measure(np.array([np.nan, 1.0, 3.0]), "avg") == 2.0
    assert np.isnan(measure(np.array([np.nan]), "avg"))


@pytest.mark.parametrize("bad", ["mean", "p101", "p-1", "q50", ""])
def test_bad_measures(bad: str) -> None:
    with pytest.raises(InvalidObjective, match="avg, max, min or pNN"):
        parse_measure(bad)


def test_metrics_from_records() -> None:
    wl = generate(200, load=0.9, seed=1)
    r = simulate(wl, load_profile("pcs-64"), FIFO())
    s = summary(r)
    assert s["jct"]["avg"] == pytest.approx((r.finish_s - wl.arrival_s).mean())
    assert s["makespan"]["avg"] == pytest.approx(r.finish_s.max() - wl.arrival_s[0])
    assert np.isnan(s["pred_err"]["avg"])  # no prediction made
    assert summary(r, ("min",))["wait"]["min"] >= 0
    unfair = METRICS["unfairness"].compute(r)
    assert np.allclose(unfair, 100 * np.maximum(0, r.jct_s / r.fft_s - 1))
    assert METRICS["utilization"].maximize and not METRICS["jct"].maximize
