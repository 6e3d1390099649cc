"""Our ``yarn-cs`` against Tiresias's simulator (YARN placement, FIFO), job for job.

Tiresias's runs (``tests/fixtures/tiresias``, its README says how they were made) on 4 traces
of 60-300 jobs, 1 to 32 GPUs each, on clusters of 4- and 8-GPU nodes loaded so that most jobs
wait: every job must start and finish when Tiresias says, to the second.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policies.hetero.yarn import YarnCS
from simulator import load_profile, read_trace, simulate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiresias"
RUNS = {"tiresias_60": "n4g4", "single_gpu": "n4g4", "mixed_g4": "n8g4", "mixed_g8": "n8g8"}


@pytest.mark.parametrize("trace", RUNS)
def test_yarn_cs_starts_and_finishes_every_job_when_tiresias_does(trace: str) -> None:
    wl = read_trace(FIXTURES / f"{trace}.csv")
    res = simulate(wl, load_profile(FIXTURES / f"{RUNS[trace]}.yaml"), YarnCS())
    ref = pd.read_csv(FIXTURES / f"{trace}__yarn_fifo.csv").set_index("job_id").loc[wl.job_id]
    assert (ref.start_time > ref.submit_time).mean() > 0.5  # most jobs wait: a real test
    np.testing.assert_array_equal(wl.arrival_s, ref.submit_time)
    np.testing.assert_allclose(res.start_s, ref.start_time, rtol=0, atol=1e-6)
    np.testing.assert_allclose(res.finish_s, ref.end_time, rtol=0, atol=1e-6)
