"""PCS's other baselines (AFS, Themis, LAS, SRTF) against PCS's own simulator, job for job.

The reference outputs are in ``tests/fixtures/pcs`` (its README says how each was made): one
file per trace prefix, policy and prediction setting (and, for Themis's predictions, per state
of PCS's code: a file dated ``_YYYYMMDD`` was made by PCS's code of that date and is matched
by ``themis`` with that ``playout``). Every job's JCT and fair finish time, and with
prediction every job's predicted JCT, must agree to 1e-6 relative. LAS on the loaded
traces (0e4a51, ed69ec, b436b2) is the hard case: its exact ties are decided by PCS's
microsecond clock and in-place sort (``docs/fidelity/pcs.md``, "The LAS gap").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from policies import make_policy
from simulator import ClusterProfile, ScalingTable, Workload, read_pcs_trace, simulate
from tests.helpers.data import PCS, ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "pcs"
NAMES = {"AFS": "afs", "THEMIS": "themis", "LAS": "las", "SRTF": "srtf"}
RTOL = 1e-6
_FILE = re.compile(r"(?P<trace>[0-9a-f]{6})_(?P<policy>[A-Z]+)_(?P<jobs>\d+)(?P<pred>_pred)?"
                   r"(?:_(?P<code>\d{8}))?")
CASES = sorted(p for p in FIXTURES.glob("*.csv") if _FILE.fullmatch(p.stem))


def _trace(name: str, scaling: ScalingTable) -> Workload:
    """A shared PCS trace, or one kept with the fixtures (a trace the shared data lacks)."""
    path = PCS / "traces" / f"trace_{name}.csv"
    if not path.exists():
        path = FIXTURES / f"trace_{name}.csv"
    return read_pcs_trace(path, scaling=scaling)


PREDICTED = ("AFS", "LAS", "SRTF", "THEMIS")
"""The policies with a reference run with prediction."""


def test_every_policy_is_covered() -> None:
    seen = {(m["policy"], bool(m["pred"])) for m in
            (_FILE.fullmatch(p.stem) for p in CASES) if m is not None}
    assert seen == {(p, False) for p in NAMES} | {(p, True) for p in PREDICTED}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_baseline_matches_pcs_job_for_job(path: Path, pcs_scaling: ScalingTable,
                                          pcs64: ClusterProfile) -> None:
    m = _FILE.fullmatch(path.stem)
    assert m is not None
    ref = pd.read_csv(path)
    assert len(ref) == int(m["jobs"])
    predict = bool(m["pred"])
    workload = _trace(m["trace"], pcs_scaling).head(len(ref))
    code = m["code"]
    params = {} if code is None else {"playout": f"{code[:4]}-{code[4:6]}-{code[6:]}"}
    r = simulate(workload, pcs64, make_policy(NAMES[m["policy"]], params), predict=predict)
    assert np.array_equal(r.workload.job_id, ref.app_id.to_numpy())
    jct = (ref.end_time - ref.submit_time).to_numpy()
    _close(r.jct_s, jct, "JCT")
    # the fair finish time averages the active jobs over a job's events; where PCS's
    # microsecond clock merges or splits coincident events a short job's count can differ
    fft = np.abs(r.fft_s / ref.fair_act.to_numpy() - 1.0)
    assert np.mean(fft <= RTOL) >= 0.99 and fft.max() < 0.05
    if predict:
        _close(r.jct_pred_s, (ref.estimated_end_time - ref.submit_time).to_numpy(),
               "predicted JCT")


def _close(ours: Any, theirs: Any, what: str) -> None:
    rel = np.abs(ours / theirs - 1.0)
    worst = int(np.argmax(rel))
    assert rel[worst] <= RTOL, (f"{what}: {np.sum(rel > RTOL)} jobs off by more than {RTOL:g}; "
                                f"worst job {worst}: ours {ours[worst]!r}, PCS {theirs[worst]!r}")
