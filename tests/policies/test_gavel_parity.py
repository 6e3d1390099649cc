"""Our ``gavel`` policy against Gavel's own simulator, job for job (tests/fixtures/gavel).

Gavel's runs (its README says how they were made) on 4 traces: static and continuous
arrivals, 1-GPU and multi-GPU jobs, on Gavel's 36:36:36 cluster (profile ``gavel-108``); and
in ``more/`` 16 traces of Gavel's generator on three cluster shapes, 6 policies each.

- FIFO (agnostic and ``_perf``) involves no solver: every job's completion must agree.
- LAS (``max_min_fairness``), Gavel (``max_min_fairness_perf``) and finish-time fairness
  (``finish_time_fairness`` and ``_perf``) solve programs whose optimum is rarely unique, so
  the solver's last bits matter. Given Gavel's own allocations at each reset (its
  ``.alloc.jsonl``), the rounds must reproduce every job. With ECOS, Gavel's solver, handed
  the program cvxpy builds from Gavel's throughputs, the allocations must be Gavel's to the
  last bit and every job must match; with HiGHS, which returns other optima, the average JCT
  must stay within 1 % (``benchmarks/bench_gavel_parity.py`` shows where the allocations
  part).
- Gavel's makespan policy (``min_total_duration`` and ``_perf``, in ``makespan/``) searches
  for the shortest feasible makespan, one ECOS LP per try: with ECOS handed each try as
  cvxpy builds it, every allocation must be Gavel's to the last bit and every job must match.
- Gavel's throughput policy (``max_sum_throughput_perf``, in ``maxsum/``: the most steps per
  second in all), likewise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from policies.hetero.gavel import Gavel
from simulator import load_profile, simulate, summary
from tests.helpers.gavel import (
    FIXTURES,
    MAKESPAN,
    MAX_SUM,
    MORE,
    POLICIES,
    TRACES,
    GavelsAllocations,
    Run,
    gavels_allocations,
    more_runs,
    recording,
    reference,
    twins_sorted,
    workload,
)


def _jcts(trace: str, policy: Gavel) -> np.ndarray:
    wl = workload(trace)
    res = simulate(wl, load_profile("gavel-108"), policy)
    return np.asarray(res.finish_s) - wl.arrival_s


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("name", ["fifo", "fifo_perf"])
def test_fifo_completes_every_job_when_gavel_does(trace: str, name: str) -> None:
    ref = reference(trace, name)
    wl = workload(trace)
    res = simulate(wl, load_profile("gavel-108"), Gavel(**POLICIES[name]))
    kept = ref.jct_s.notna().to_numpy()
    np.testing.assert_array_equal(res.kept, kept)  # the jobs Gavel dropped, and only those
    ours = np.asarray(res.finish_s) - wl.arrival_s
    np.testing.assert_allclose(ours[kept], ref.jct_s[kept], rtol=1e-9)
    gavels = pd.read_csv(FIXTURES / "summary.csv").set_index(["trace", "policy"])
    assert summary(res, ("avg",))["jct"]["avg"] == pytest.approx(
        gavels.avg_jct_s[trace, name], rel=1e-9)  # Gavel's average: over the jobs kept


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("name", ["max_min_fairness", "max_min_fairness_perf",
                                  "finish_time_fairness_perf"])
def test_rounds_reproduce_gavel_under_its_allocations(trace: str, name: str) -> None:
    ref = reference(trace, name)
    source = str(FIXTURES / f"{trace}__{name}.alloc.jsonl.gz")
    ours = _jcts(trace, GavelsAllocations(**POLICIES[name], source=source))
    np.testing.assert_allclose(twins_sorted(ref, ours), twins_sorted(ref, ref.jct_s),
                               rtol=1e-9)


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("name", ["max_min_fairness", "max_min_fairness_perf",
                                  "finish_time_fairness", "finish_time_fairness_perf"])
def test_with_gavels_solver_the_solved_policies_match_gavel(trace: str, name: str) -> None:
    # ECOS gets the program cvxpy builds from Gavel's throughputs, to the last bit
    ref = reference(trace, name)
    ours = twins_sorted(ref, _jcts(trace, Gavel(**POLICIES[name])))
    np.testing.assert_allclose(ours, twins_sorted(ref, ref.jct_s), rtol=1e-9)


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("name", ["max_min_fairness", "max_min_fairness_perf"])
def test_with_highs_the_average_jct_stays_within_one_percent(trace: str, name: str) -> None:
    ref = reference(trace, name)
    ours = _jcts(trace, Gavel(**POLICIES[name], lp="highs"))
    assert abs(ours.mean() / ref.jct_s.mean() - 1) <= 0.01


FIFO_RUNS = [pytest.param(r, id=r.id) for r in more_runs()
             if POLICIES[r.policy]["objective"] == "fifo"]


@pytest.mark.slow
@pytest.mark.parametrize("run", FIFO_RUNS)
def test_fifo_matches_gavel_on_its_generated_traces_and_clusters(run: Run) -> None:
    # tests/fixtures/gavel/more: 16 traces of Gavel's generator on three cluster shapes;
    # FIFO involves no solver, so every job Gavel keeps must end when Gavel's does, the jobs
    # it drops must be those we drop, and the average over the rest must be Gavel's
    ref = reference(run.trace, run.policy, MORE)
    wl = workload(run.trace, MORE)
    res = simulate(wl, load_profile(run.cluster), Gavel(**POLICIES[run.policy]))
    kept = ref.jct_s.notna().to_numpy()
    np.testing.assert_array_equal(res.kept, kept)
    ours = np.asarray(res.finish_s) - wl.arrival_s
    np.testing.assert_allclose(ours[kept], ref.jct_s[kept], rtol=1e-9)
    assert summary(res, ("avg",))["jct"]["avg"] == pytest.approx(run.avg_jct_s, rel=1e-9)


SOLVED_RUNS = [pytest.param(r, id=r.id) for r in more_runs()
               if POLICIES[r.policy]["objective"] != "fifo"]


def _matches_gavel(run: Run, policy: Gavel) -> None:
    """Every job Gavel keeps ends when Gavel's does (identical jobs as a set), we drop the
    jobs it drops, and the average over the rest is Gavel's."""
    ref = reference(run.trace, run.policy, run.where)
    wl = workload(run.trace, run.traces)
    res = simulate(wl, load_profile(run.cluster), policy)
    kept = ref.jct_s.notna().to_numpy()
    np.testing.assert_array_equal(res.kept, kept)
    ours = twins_sorted(ref, np.asarray(res.finish_s) - wl.arrival_s)
    np.testing.assert_allclose(ours[kept], twins_sorted(ref, ref.jct_s)[kept], rtol=1e-9)
    assert summary(res, ("avg",))["jct"]["avg"] == pytest.approx(run.avg_jct_s, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("run", SOLVED_RUNS)
def test_rounds_reproduce_gavel_under_its_allocations_on_its_generated_traces(run: Run
                                                                               ) -> None:
    source = str(MORE / f"{run.trace}__{run.policy}.alloc.jsonl.gz")
    _matches_gavel(run, GavelsAllocations(**POLICIES[run.policy], source=source))


# Gavel's makespan runs: every try of the search is an LP, so a run costs a dozen solves per
# reset; CI checks the first set and four of more/'s (static and Poisson, 1- to 4-GPU gangs,
# three cluster shapes, a dropped job), benchmarks/bench_gavel_parity.py --makespan all 40
MAKESPAN_RUNS = [pytest.param(r, id=r.id, marks=() if r.trace == "static_single" else
                               pytest.mark.slow) for r in more_runs(MAKESPAN)
                 if r.traces == FIXTURES or r.trace in ("s02", "s04", "c05", "c12")]


# Gavel's throughput policy (max_sum_throughput_perf, in maxsum/): one cheap LP per reset, so
# CI checks all 20 runs
MAX_SUM_RUNS = [pytest.param(r, id=r.id) for r in more_runs(MAX_SUM)]


@pytest.mark.parametrize("run", [pytest.param(*p.values, id=p.id, marks=pytest.mark.slow)
                                 for p in SOLVED_RUNS] + MAKESPAN_RUNS + MAX_SUM_RUNS)
def test_solved_policies_allocate_as_gavel_to_the_last_bit(run: Run) -> None:
    # ECOS gets the program cvxpy builds from Gavel's throughputs, coefficient for
    # coefficient: at every reset (at Gavel's very clock) the allocation is Gavel's, bit
    # for bit, so no near-tie in priority can tip (Gavel's last call, with no job left, is
    # one we skip). Gavel's makespan policy (tests/fixtures/gavel/makespan): every try of
    # its search hands ECOS Gavel's LP, so it stops at Gavel's makespan, and the
    # allocation is that try's. Its throughput policy (maxsum/): ECOS gets Gavel's max-sum
    # LP over its measured steps per second
    policy = Gavel(**run.params)
    seen = recording(policy)
    _matches_gavel(run, policy)
    theirs = gavels_allocations(run.where / f"{run.trace}__{run.policy}.alloc.jsonl.gz")
    assert len(seen) <= len(theirs) and not any(x for _, x in theirs[len(seen):])
    for (now, ours), (then, x) in zip(seen, theirs, strict=False):
        assert now == then and ours.keys() == x.keys()
        for job, row in ours.items():
            np.testing.assert_array_equal(row, x[job], err_msg=f"job {job} at {now} s")
