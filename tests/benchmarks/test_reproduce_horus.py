"""``benchmarks/reproduce/horus.py``'s over-commitment curve: from time-sharing's (the
calibrated profile) to Horus's own fit (papers/horus.md §3.2, footnote 4)."""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType

import numpy as np
import pytest

from policies import make_policy
from simulator import ScalingTable, load_profile, read_pcs_trace, simulate
from simulator.inputs.horus_workload import MIXES, horus_testbed
from tests.helpers.benchmarks import reproduce_script
from tests.helpers.data import PCS

U = np.linspace(0.05, 2.0, 40)


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return reproduce_script("horus")


def test_fit_zero_is_the_calibrated_profile_and_fit_one_is_the_papers_quadratic(
        bench: ModuleType) -> None:
    calibrated = load_profile("horus-testbed-3x4").slowdown_curves["rtx2080"]
    slope = calibrated.quadratic[0]
    np.testing.assert_allclose(bench.time_share_curve(slope)(U), calibrated(U), rtol=1e-12)
    paper = 1.16664 * U**2 - 0.00302 * U + 4e-5  # footnote 4: JCT ratio, RTX 2080
    over = U > 1.0
    np.testing.assert_allclose(bench.time_share_curve(slope, 1.0)(U)[over] + 1.0, paper[over],
                               rtol=1e-12)
    for fit in (0.0, 0.5, 1.0):  # below 100 % only the linear overhead applies
        np.testing.assert_allclose(bench.time_share_curve(slope, fit)(U)[~over],
                                   slope * U[~over], rtol=1e-12)
    half = bench.time_share_curve(slope, 0.5)(U)[over]
    np.testing.assert_allclose(half, 0.5 * (calibrated(U)[over] + paper[over] - 1.0), rtol=1e-12)


def test_the_fit_moves_obp_which_over_commits_and_never_horus_which_does_not(
        bench: ModuleType) -> None:
    """Horus caps a GPU's summed utilization at 1, so the curve above 1 never applies to it;
    OBP packs by memory alone, so it does."""
    base = load_profile("horus-testbed-3x4")
    wl = horus_testbed(*MIXES["W-Large"], seed=1)
    slope = base.slowdown_curves["rtx2080"].quadratic[0]
    runs = {}
    for fit in (0.0, 1.0):
        prof = replace(base, slowdown_curves={"rtx2080": bench.time_share_curve(slope, fit)})
        for name, params in (("horus", {"k_queues": 1}), ("obp", {})):
            runs[name, fit] = simulate(wl, prof, make_policy(name, params), seed=0)
    np.testing.assert_array_equal(runs["horus", 0.0].finish_s, runs["horus", 1.0].finish_s)
    assert not np.array_equal(runs["obp", 0.0].finish_s, runs["obp", 1.0].finish_s)


@pytest.mark.parametrize("args, says", [
    (["--fit", "1.5"], "--fit/--fits: 1.5 is not a weight in [0, 1]"),
    (["--fits", "0,-0.1"], "--fit/--fits: -0.1 is not a weight in [0, 1]"),
    (["--reps", "0"], "--reps: 0 is not a positive count"),
    (["--draws", "0"], "--draws: 0 is not a positive count")])
def test_a_bad_setting_is_a_usage_error_before_any_run(
        bench: ModuleType, args: list[str], says: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:  # were it accepted, nothing would run
        bench.main([*args, "--skip-headlines", "--large-jobs", "0"])
    out = capsys.readouterr()
    assert done.value.code == 2 and out.out == "" and says in out.err


def test_table_7s_draws_differ_only_in_the_synthetic_sharing_and_fit_a_gpu(
        bench: ModuleType) -> None:
    trace = read_pcs_trace(PCS / "traces" / "trace_6214e9.csv",
                           scaling=ScalingTable.from_csv(PCS / "scaling_tables.csv")).head(300)
    one, two = (bench.synthetic_sharing(trace, 4.0, seed) for seed in (0, 1))
    assert one.sharing is not None and two.sharing is not None
    assert not np.array_equal(one.sharing.gpu_util, two.sharing.gpu_util)
    for wl in (one, two):
        assert wl.sharing is not None
        assert (wl.service_s == trace.service_s).all() and (wl.gpus == trace.gpus).all()
        assert (wl.arrival_s == trace.arrival_s).all() and (wl.sharing.surge_gib == 0).all()
        assert wl.sharing.mem_gib.max() == 8.0  # the cap binds at this scale, and holds
    again = bench.synthetic_sharing(trace, 4.0, 1)
    assert again.sharing is not None
    np.testing.assert_array_equal(again.sharing.gpu_util, two.sharing.gpu_util)
