"""Fidelity against PCS's own simulator (../shared/data/pcs/reference), SPEC §2-3."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from policies import FIFO, SRSF, WFQ, MaxMin, Policy
from simulator import ClusterProfile, measure, simulate
from simulator.metrics import METRICS
from tests.helpers.data import PCS, TRACES

POLICIES = ("FIFO", "SRSF", "FS", "MCS_jct", "MCS_bal", "MCS_pred")


def _policy(name: str, trace: str, configs: dict[str, Any]) -> Policy:
    fixed: dict[str, Policy] = {"FIFO": FIFO(), "SRSF": SRSF(), "FS": MaxMin()}
    if name in fixed:
        return fixed[name]
    return WFQ.from_pcs_config(configs[f"{trace}_{name.split('_')[1]}"])


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("trace", TRACES)
def test_jct_matches_pcs_reference(trace: str, policy: str, pcs_trace: Any,
                                   pcs_configs: dict[str, Any], pcs64: ClusterProfile) -> None:
    ref = pd.read_csv(PCS / "reference" / f"{trace}_{policy}.csv")
    result = simulate(pcs_trace(trace), pcs64, _policy(policy, trace, pcs_configs))
    ref_jct = (ref.end_time - ref.submit_time).to_numpy()
    assert np.array_equal(result.workload.job_id, ref.app_id.to_numpy())
    assert abs(result.jct_s.mean() / ref_jct.mean() - 1) < 0.005
    assert np.mean(np.abs(result.jct_s / ref_jct - 1) < 0.01) >= 0.99
    # the fair finish time PCS logs: within 1 % for at least 99 % of jobs too
    assert np.mean(np.abs(result.fft_s / ref.fair_act.to_numpy() - 1) < 0.01) >= 0.99


def test_prediction_error_matches_pcs(pcs_trace: Any, pcs_configs: dict[str, Any],
                                      pcs64: ClusterProfile) -> None:
    ref = pd.read_csv(PCS / "reference" / "0e4a51_MCS_bal_pred.csv")
    result = simulate(pcs_trace("0e4a51"), pcs64, WFQ.from_pcs_config(pcs_configs["0e4a51_bal"]),
                      predict=True)
    err = METRICS["pred_err"].compute(result)
    assert abs(measure(err, "avg") - 1.512) <= 0.1  # data README: avg pred err 1.512 %
    assert abs(measure(err, "p99") - 42.78) <= 2.0  # ... and p99 42.78 %
    ref_pred = (ref.estimated_end_time - ref.submit_time).to_numpy()
    assert np.allclose(result.jct_pred_s, ref_pred, rtol=1e-6)
    assert abs(result.jct_s.mean() - 463_668.7) < 1.0  # prediction has no side effects


def test_fifo_predictions_are_exact(pcs_trace: Any, pcs64: ClusterProfile) -> None:
    result = simulate(pcs_trace("b436b2", 400), pcs64, FIFO(), predict=True)
    err = METRICS["pred_err"].compute(result)
    assert np.nanmax(err) < 1e-6
    assert not np.isnan(err).any()
