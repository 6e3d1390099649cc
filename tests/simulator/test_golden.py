"""Every policy reproduces its golden runs (``tests/helpers/golden.py``).

The golden files were recorded from the engines before they were optimised; any change to an
engine or a policy that moves a job's start, finish, slowdown or prediction by more than 1e-9
relative, or a preemption count, fails here.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from policies import REGISTRY
from tests.helpers.golden import CASES, GOLDEN, run_case

RTOL = 1e-9


def _golden(policy: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((GOLDEN / f"{policy}.json").read_text())
    return doc["cases"]


def _array(values: list[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


@pytest.mark.parametrize(("policy", "index"),
                         [(p, i) for p in sorted(CASES) for i in range(len(CASES[p]))])
def test_policy_reproduces_its_golden_run(policy: str, index: int) -> None:
    case = CASES[policy][index]
    want = _golden(policy)[case.name]
    assert want["params"] == case.params
    wl, r = run_case(policy, case)
    assert wl.digest() == want["workload_digest"], (
        "the case's workload changed (a generator or loader changed, not the engine): "
        "re-record with python -m tests.helpers.golden only if that change is intended")
    keys = ("start_s", "finish_s") + (("pred_start_s", "pred_finish_s") if case.predict else ())
    for key in keys:
        np.testing.assert_allclose(getattr(r, key), _array(want[key]), rtol=RTOL, atol=0.0,
                                   err_msg=f"{policy} {case.name}: {key}")
    np.testing.assert_allclose(r.slowdown, _array(want["slowdown"]), rtol=RTOL, atol=1e-12,
                               err_msg=f"{policy} {case.name}: slowdown")
    np.testing.assert_array_equal(r.preemptions, want["preemptions"],
                                  err_msg=f"{policy} {case.name}: preemptions")
    assert r.busy_gpu_s == pytest.approx(want["busy_gpu_s"], rel=RTOL)
    util = np.nan if want["util_gpu_s"] is None else want["util_gpu_s"]
    np.testing.assert_allclose(r.util_gpu_s, util, rtol=RTOL)
    assert r.gpus_used == want["gpus_used"]


def test_every_registered_policy_has_golden_runs() -> None:
    """A policy added without golden cases (or cases left for a removed one) fails here."""
    assert set(CASES) == set(REGISTRY)
    assert all((GOLDEN / f"{policy}.json").is_file() for policy in CASES)
