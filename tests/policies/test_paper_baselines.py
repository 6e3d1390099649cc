"""Optimus, 3Sigma and Chronus gang-scheduled in leases (policies/unisched/paper_baselines.py,
chronus_gang.py).

Oracles: hand-worked schedules on one to four 8-GPU nodes; for Optimus, a brute force over
every GPU split (its marginal-gain greedy must reach the least total remaining time when every
job's curve is concave, the classic result for separable convex allocation), and the jobs it
admits when not all fit; for 3Sigma, its order recomputed here from scipy's log-normal
distribution on whole-node gangs; for Chronus, a worked admission and, on random jobs judged
at once, an accepted set that fits and that no refused job could join.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import lognorm

from policies.unisched.chronus_gang import ACCEPTED, ChronusGang, round_up
from policies.unisched.paper_baselines import OptimusGang, ThreeSigmaGang
from simulator import simulate
from simulator.inputs.scaling import parametric_table
from simulator.inputs.slo import BEST_EFFORT, STRICT
from simulator.rounds import Cluster, RoundState
from tests.helpers.golden import CASES

TABLE = parametric_table(16)


def state(nodes: int, demand: np.ndarray, left_s: np.ndarray, *, now: float = 0.0,
          job_class: np.ndarray | None = None, deadlines: np.ndarray | None = None
          ) -> RoundState:
    """Jobs that arrived at 0, 1, 2, ... on linear scaling; ``left_s``: seconds left at full
    demand; ``deadlines``: one absolute deadline each (NaN: none), worth 100."""
    n = len(demand)
    cl = Cluster(("v100",), np.zeros(nodes, dtype=np.int64), np.full(nodes, 8), 0.9, 0.0,
                 np.full(nodes, 32.0))
    due = np.full(n, np.nan) if deadlines is None else deadlines
    return RoundState(
        now=now, cluster=cl, rows=np.arange(n), arrival_s=np.arange(n, dtype=float),
        demand=demand.astype(np.int64), min_gpus=np.ones(n, np.int64),
        est_size=left_s * demand, est_remaining=left_s * demand, attained=np.zeros(n),
        alloc=np.zeros((n, nodes), np.int64), model=np.full(n, TABLE.index("linear")),
        job_class=np.full(n, BEST_EFFORT) if job_class is None else job_class,
        deadlines_s=due[:, None], rewards=np.where(np.isnan(due), np.nan, 100.0)[:, None],
        scaling=TABLE, speeds=np.ones((len(TABLE.models), 1)), memo={})


def test_optimus_worked_example() -> None:
    """One node. Work W = 4000, 9600, 1000 GPU-s, demand 4, 8, 2: each gets one GPU, then the
    cuts W/g - W/(g+1) go 4800 (B), 2000 (A), 1600 (B), 800 (B), then A's 666.7 beats C's 500
    and B's 480: A 3, B 4, C 1."""
    plan = OptimusGang().plan(state(1, np.array([4, 8, 2]), np.array([1000.0, 1200.0, 500.0])))
    assert plan.sum(axis=1).tolist() == [3, 4, 1]


def test_optimus_admits_least_work_first_or_in_arrival_order() -> None:
    """Two 8-GPU nodes, twenty one-GPU jobs of shrinking work: 16 get a GPU each."""
    left = np.linspace(2000.0, 100.0, 20)
    st = state(2, np.ones(20, dtype=np.int64), left)
    short = OptimusGang().plan(st).sum(axis=1)
    first = OptimusGang(admit="arrival").plan(st).sum(axis=1)
    assert np.flatnonzero(short).tolist() == list(range(4, 20))
    assert np.flatnonzero(first).tolist() == list(range(16))


@pytest.mark.parametrize("seed", range(10))
def test_optimus_split_minimises_total_remaining_time(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, nodes = int(rng.integers(2, 5)), int(rng.integers(1, 3))
    demand = rng.choice([1, 2, 4, 8], n)
    left = rng.uniform(100.0, 5000.0, n)
    gpus = OptimusGang().plan(state(nodes, demand, left)).sum(axis=1)
    work = left * demand

    def total(split: tuple[int, ...]) -> float:
        return float(sum(w / g for w, g in zip(work, split, strict=True)))

    splits = [s for s in itertools.product(*(range(1, d + 1) for d in demand))
              if sum(s) <= 8 * nodes]
    assert (gpus >= 1).all() and (gpus <= demand).all()
    assert gpus.sum() == min(8 * nodes, demand.sum())  # work-conserving
    assert total(tuple(gpus)) == pytest.approx(min(map(total, splits)), rel=1e-12)


def test_three_sigma_worked_example() -> None:
    """Four 8-GPU jobs on 1-4 nodes (remaining s / deadline s, median remaining time, shape
    0.5): S1 1000 / 1100 can still make it (P = 0.58) and loses it all by waiting an hour;
    S2 500 / 20000 loses nothing by waiting; B is best-effort (100 s); H 5000 / 500 is
    hopeless (P = 2e-6). 3Sigma runs S1, S2, B, H in that order; SRSF would run B first."""
    st = dict(demand=np.full(4, 8), left_s=np.array([1000.0, 500.0, 100.0, 5000.0]),
              job_class=np.array([STRICT, STRICT, BEST_EFFORT, STRICT]),
              deadlines=np.array([1100.0, 20000.0, np.nan, 500.0]))
    for nodes in range(1, 5):
        plan = ThreeSigmaGang().plan(state(nodes, **st))  # type: ignore[arg-type]
        assert np.flatnonzero(plan.sum(axis=1)).tolist() == list(range(nodes))


def three_sigma_order(now: float, left: np.ndarray, slo: np.ndarray, due: np.ndarray,
                      sigma: float, ahead: float, floor: float) -> np.ndarray:
    """3Sigma's order from its definition, with scipy's log-normal (module docstring)."""
    cost = left * 8

    def eu(t: float, i: int) -> float:
        return float(lognorm.cdf(due[i] - t, sigma, scale=left[i])) if due[i] > t else 0.0

    keys = []
    for i in range(len(left)):
        if slo[i] and eu(now, i) >= floor:
            keys.append((0, -(eu(now, i) - eu(now + ahead, i)) / cost[i], i))
        else:
            keys.append((1 if not slo[i] else 2, cost[i], i))
    return np.array([k[2] for k in sorted(keys)])


@pytest.mark.parametrize("seed", range(8))
def test_three_sigma_runs_its_order_on_whole_nodes(seed: int) -> None:
    rng = np.random.default_rng(50 + seed)
    n, nodes, now = 10, 4, 1000.0
    left = rng.uniform(300.0, 8000.0, n)
    slo = rng.random(n) < 0.6
    due = np.where(slo, now + left * rng.uniform(0.5, 3.0, n), np.nan)
    policy = ThreeSigmaGang(runtime_sigma=float(rng.uniform(0.1, 1.0)),
                            plan_ahead_s=float(rng.uniform(600.0, 7200.0)))
    plan = policy.plan(state(nodes, np.full(n, 8), left, now=now,
                             job_class=np.where(slo, STRICT, BEST_EFFORT), deadlines=due))
    want = three_sigma_order(now, left, slo, due, policy.runtime_sigma, policy.plan_ahead_s,
                             policy.min_utility)[:nodes]
    assert set(np.flatnonzero(plan.sum(axis=1))) == set(want)


def test_paper_baselines_finish_every_job_on_the_golden_slo_workload() -> None:
    case = CASES["fifo-gang"][1]
    wl, profile = case.workload(), case.profile()
    for policy in (OptimusGang(), OptimusGang(admit="arrival"), ThreeSigmaGang(),
                   ChronusGang()):
        r = simulate(wl, profile, policy)
        assert np.isfinite(r.finish_s).all(), policy


def test_chronus_round_up() -> None:
    assert [round_up(g, 8) for g in (1, 2, 3, 5, 8, 9, 16, 20)] == [1, 2, 4, 8, 8, 16, 16, 24]


def test_chronus_worked_example() -> None:
    """One 8-GPU node at t = 10 (GPUs, remaining s, deadline): S1 4, 1000, 1510; S2 8, 1000,
    1610; S3 8, 500, 1010; B best-effort. Judged least work first: S1 (4,000 GPU-s <= 8 x
    1,500) and S3 (4,000 <= 8 x 1,000 by its deadline, 8,000 <= 12,000 by S1's) are
    accepted; S2 arrived before S3 but would bring its prefix to 16,000 > 8 x 1,600, so it
    is refused. S3, due first, takes the node."""
    st = state(1, np.array([4, 8, 8, 1]), np.array([1000.0, 1000.0, 500.0, 100.0]), now=10.0,
               job_class=np.array([STRICT, STRICT, STRICT, BEST_EFFORT]),
               deadlines=np.array([1510.0, 1610.0, 1010.0, np.nan]))
    plan = ChronusGang().plan(st)
    assert plan.sum(axis=1).tolist() == [0, 0, 8, 0]
    assert st.memo["kernel_memory"].i[:, ACCEPTED].tolist() == [1, 0, 1, 0]


@pytest.mark.parametrize("seed", range(8))
def test_chronus_accepts_a_feasible_set_no_refused_job_fits(seed: int) -> None:
    """All jobs judged at one decision: every deadline-ordered prefix of the accepted jobs
    fits the GPUs before its deadline, and adding any refused SLO job breaks a prefix."""
    rng = np.random.default_rng(200 + seed)
    n, nodes, now = 14, 2, 100.0
    demand = rng.choice([1, 2, 3, 4, 8, 12], n)
    left = rng.uniform(300.0, 6000.0, n)
    slo = rng.random(n) < 0.8
    due = np.where(slo, now + left * rng.uniform(0.8, 3.0, n), np.nan)
    st = state(nodes, demand, left, now=now, job_class=np.where(slo, STRICT, BEST_EFFORT),
               deadlines=due)
    ChronusGang().plan(st)
    accepted = st.memo["kernel_memory"].i[:, ACCEPTED] == 1
    width = np.array([round_up(int(d), 8) for d in demand])

    def feasible(mask: np.ndarray) -> bool:
        idx = np.flatnonzero(mask)
        if (now + left[idx] > due[idx]).any():
            return False
        idx = idx[np.argsort(due[idx], kind="stable")]
        work = np.cumsum(width[idx] * left[idx])
        return bool((work <= 8 * nodes * (due[idx] - now) + 1e-6).all())

    assert feasible(accepted)
    assert not (accepted & ~slo).any()
    for j in np.flatnonzero(slo & ~accepted):
        assert not feasible(accepted | (np.arange(n) == j)), j
