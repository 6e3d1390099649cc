"""``benchmarks/reproduce/unisched.py``'s inputs: the estimates UniSched and its baselines
see when some jobs stop at a performance target, and Chronus's per-model spread speeds."""

from __future__ import annotations

import json
import subprocess
import sys
from types import ModuleType

import numpy as np
import pytest

from simulator.inputs.slo import SOFT, STRICT, reward_obtained
from tests.helpers.benchmarks import reproduce_script
from tests.helpers.data import ROOT, SHARED


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return reproduce_script("unisched")


def test_estimates_differ_only_on_the_performance_target_jobs(bench: ModuleType) -> None:
    wl = bench.workloads(2000, 60.0, None, 0)["P_MIX1"]
    mine, theirs = bench.estimates(wl, 0.2, 3.0, 0.1, np.random.default_rng(4))
    perf = theirs.estimated_service_s != wl.service_s
    assert perf.mean() == pytest.approx(0.2, abs=0.03)
    np.testing.assert_allclose(theirs.estimated_service_s[perf], 3.0 * wl.service_s[perf])
    assert (mine.estimated_service_s[~perf] == wl.service_s[~perf]).all()
    off = mine.estimated_service_s[perf] / wl.service_s[perf] - 1.0
    assert off.std() == pytest.approx(0.1, rel=0.15) and abs(off.mean()) < 0.02
    again = bench.estimates(wl, 0.2, 3.0, 0.1, np.random.default_rng(4))
    assert (again[0].estimated_service_s == mine.estimated_service_s).all()
    for other in (mine, theirs):  # the same jobs, only the estimates differ
        assert (other.service_s == wl.service_s).all() and (other.gpus == wl.gpus).all()


def test_model_info_gives_each_job_its_model(bench: ModuleType) -> None:
    info = SHARED / "data" / "chronus" / "model_info.json"
    wl = bench.workloads(500, 60.0, None, 0, info)["P_MIX1"]
    names = {wl.scaling.models[m] for m in wl.model}
    assert names == set(json.loads(info.read_text()))
    assert wl.scaling.spread is not None


def test_soften_turns_half_the_strict_jobs_into_staircases_from_their_own_deadline(
        bench: ModuleType) -> None:
    """P_MIX1_SOFT: the same jobs, half the strict ones soft (§IV-B's staircase from their own
    deadline), the rest untouched; a soft job never earns less than it did strict, so R_slo can
    only fall for any completion times (reward_obtained as the oracle)."""
    wls = bench.workloads(3000, 60.0, None, 0)
    mix1, soft = wls["P_MIX1"], wls["P_MIX1_SOFT"]
    assert mix1.slos is not None and soft.slos is not None
    assert (soft.service_s == mix1.service_s).all() and (soft.arrival_s == mix1.arrival_s).all()
    was, now = mix1.slos, soft.slos
    strict = was.job_class == STRICT
    made = now.job_class == SOFT
    assert not (made & ~strict).any() and made.sum() == pytest.approx(strict.sum() / 2, rel=0.1)
    np.testing.assert_allclose(now.deadlines_s[made, :4],
                               was.deadlines_s[made, :1] * np.array([1.0, 1.1, 1.2, 1.5]))
    assert (now.rewards[made, :4] == [100.0, 80.0, 50.0, 20.0]).all()
    kept = ~made
    assert (now.job_class[kept] == was.job_class[kept]).all()
    width = was.deadlines_s.shape[1]
    for new, old in ((now.deadlines_s, was.deadlines_s), (now.rewards, was.rewards)):
        np.testing.assert_array_equal(new[kept, :width], old[kept])
        assert np.isnan(new[kept, width:]).all()
    jct = np.random.default_rng(5).uniform(0.5, 3.0, len(mix1)) * was.deadlines_s[:, 0]
    got_was, got_now = reward_obtained(was, jct), reward_obtained(now, jct)
    slo = ~np.isnan(got_was)
    assert (got_now[slo] >= got_was[slo]).all() and (got_now[made] > got_was[made]).any()


def test_by_duration_classes_split_r_slo_by_job_length(bench: ModuleType) -> None:
    """The classes of ``--by-duration`` partition the SLO jobs by wall-clock length at full
    demand: their R_slo, weighted by each class's share of the jobs by that length, gives the
    overall R_slo back (grouped by GPU-time instead, multi-GPU jobs would land elsewhere)."""
    wl = bench.workloads(2000, 60.0, None, 0)["P_SLO"]
    m = bench.measure(wl, bench.cluster(4), "srsf-gang", {"lease_s": 300.0})
    length = wl.service_s / wl.scaling.speed(wl.model, wl.gpus.astype(np.float64))
    edges = [hi for _, _, hi in bench.DURATIONS[:-1]]
    assert (np.digitize(length, edges) != np.digitize(wl.service_s, edges)).any()
    weighted = 0.0
    for label, lo, hi in bench.DURATIONS:
        share = float(((length >= lo) & (length < hi)).mean())
        if share > 0:
            weighted += share * m[f"slo_miss {label}"]
    assert 0 < m["slo_miss"] < 1
    assert weighted == pytest.approx(m["slo_miss"], rel=1e-12)


@pytest.mark.parametrize("resets, says", [("0,9000", "expected a value in [0, 7200], got 9000.0"),
                                          ("x", "could not convert string to float: 'x'")])
def test_a_bad_reset_spacing_is_a_usage_error_before_any_run(resets: str, says: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reproduce" / "unisched.py"),
                           "--themis-sweep", "--sweep-resets", resets],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert f"--sweep-resets {resets!r}: " in done.stderr and says in done.stderr
