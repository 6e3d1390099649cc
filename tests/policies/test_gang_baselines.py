"""FIFO, SRSF and Themis gang-scheduled in leases (policies/unisched/gang_baselines.py).

Oracles: on nodes that each hold exactly one gang, each plan runs exactly the jobs its rule
ranks first (arrival; least remaining GPU-seconds; largest finish-time fairness ratio, computed
here from Themis's definition, papers/unisched.md §IV-D [7]); on mixed gangs, every plan fits
the nodes and gives a job its whole gang or nothing; FIFO never preempts, SRSF and Themis do.
Themis's fairness knob ``f``: the ``1 - f`` most unfair jobs bid first, in order of their gain
per GPU, computed here from the definition.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from policies.unisched.gang_baselines import FifoGang, SrsfGang, ThemisGang
from simulator import simulate
from simulator.inputs.scaling import parametric_table
from simulator.inputs.slo import BEST_EFFORT
from simulator.metrics import METRICS
from simulator.rounds import Cluster, RoundState
from tests.helpers.golden import CASES

TABLE = parametric_table(16)
POLICIES = (FifoGang(), SrsfGang(), ThemisGang())


def state(nodes: int, now: float, arrival: np.ndarray, demand: np.ndarray, size_s: np.ndarray,
          left_s: np.ndarray, alloc: np.ndarray | None = None) -> RoundState:
    """Best-effort jobs on linear scaling: ``size_s``/``left_s`` are seconds at full demand."""
    n = len(demand)
    cl = Cluster(("v100",), np.zeros(nodes, dtype=np.int64), np.full(nodes, 8), 0.9, 0.0,
                 np.full(nodes, 32.0))
    return RoundState(
        now=now, cluster=cl, rows=np.arange(n), arrival_s=arrival.astype(float),
        demand=demand.astype(np.int64), min_gpus=np.ones(n, np.int64),
        est_size=size_s * demand, est_remaining=left_s * demand,
        attained=(size_s - left_s) * demand,
        alloc=np.zeros((n, nodes), np.int64) if alloc is None else alloc,
        model=np.full(n, TABLE.index("linear")), job_class=np.full(n, BEST_EFFORT),
        deadlines_s=np.full((n, 1), np.nan), rewards=np.full((n, 1), np.nan), scaling=TABLE,
        speeds=np.ones((len(TABLE.models), 1)), memo={})


def random_jobs(rng: np.random.Generator, n: int) -> dict[str, Any]:
    arrival = np.sort(rng.uniform(0.0, 5000.0, n))
    size = rng.uniform(600.0, 20000.0, n)
    return {"arrival": arrival, "size_s": size, "left_s": size * rng.uniform(0.05, 1.0, n)}


def themis_rho(now: float, arrival: np.ndarray, demand: np.ndarray, size_s: np.ndarray,
               left_s: np.ndarray, gpus: int) -> np.ndarray:
    """Finish-time fairness: time to finish from arrival if the job ran at full demand from
    now on, over its time alone with a fair 1/N share of the cluster (at most its demand)."""
    share = np.minimum(gpus / len(demand), demand)
    return (now - arrival + left_s) / (size_s * demand / share)


@pytest.mark.parametrize("seed", range(8))
def test_whole_node_gangs_run_in_each_rules_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, nodes, now = 9, 3, 6000.0
    jobs = random_jobs(rng, n)
    demand = np.full(n, 8)
    args = (nodes, now, jobs["arrival"], demand, jobs["size_s"], jobs["left_s"])
    rho = themis_rho(now, jobs["arrival"], demand, jobs["size_s"], jobs["left_s"], 8 * nodes)
    want = {"fifo-gang": np.arange(nodes), "srsf-gang": np.argsort(jobs["left_s"])[:nodes],
            "themis-gang": np.argsort(-rho)[:nodes]}
    for policy in POLICIES:
        plan = policy.plan(state(*args))
        assert set(np.flatnonzero(plan.sum(axis=1))) == set(want[policy.name]), policy.name
        assert (plan.max(axis=1) % 8 == 0).all()  # each gang on one node


def themis_bid(now: float, arrival: np.ndarray, demand: np.ndarray, left_s: np.ndarray,
               lease_s: float) -> np.ndarray:
    """Running one lease rather than waiting it out: log(1 + lease / T) per GPU, T the finish
    time from arrival at full demand."""
    return np.log1p(lease_s / (now - arrival + left_s)) / demand


@pytest.mark.parametrize(("knob", "seed"), [(k, s) for k in (0.0, 0.2, 0.5, 0.8) for s in range(3)])
def test_themis_bidders_are_the_most_unfair_and_go_by_gain_per_gpu(knob: float, seed: int
                                                                  ) -> None:
    rng = np.random.default_rng(50 + seed)
    n, nodes, now, lease = 10, 4, 6000.0, 900.0
    jobs = random_jobs(rng, n)
    demand = np.full(n, 8)
    rho = themis_rho(now, jobs["arrival"], demand, jobs["size_s"], jobs["left_s"], 8 * nodes)
    bid = themis_bid(now, jobs["arrival"], demand, jobs["left_s"], lease)
    by_rho = np.argsort(-rho)
    bidders = by_rho[:int(np.ceil(round((1 - knob) * n, 9)))]
    order = np.concatenate([bidders[np.argsort(-bid[bidders])], by_rho[len(bidders):]])
    plan = ThemisGang(lease_s=lease, fairness_knob=knob).plan(
        state(nodes, now, jobs["arrival"], demand, jobs["size_s"], jobs["left_s"]))
    assert set(np.flatnonzero(plan.sum(axis=1))) == set(order[:nodes])


def test_themis_knob_worked_example() -> None:
    """Two 8-GPU gangs, one node (fair share 4 GPUs). Job 0 has waited 5000 s: rho = (5000 +
    4000) / (4000 x 8 / 4) = 1.125; job 1 has just arrived: rho = (600 + 600) / (600 x 8 / 4)
    = 1.0, but it gains more from one 600 s lease: log(1 + 600 / 1200) against
    log(1 + 600 / 9000)."""
    args = (1, 5000.0, np.array([0.0, 4400.0]), np.array([8, 8]), np.array([4000.0, 600.0]),
            np.array([4000.0, 600.0]))
    ran = {f: ThemisGang(lease_s=600.0, fairness_knob=f).plan(state(*args)).ravel().tolist()
           for f in (1.0, 0.5, 0.0)}
    # f = 1 and f = 0.5 (one bidder of two): the most unfair job; f = 0: the larger gain
    assert ran == {1.0: [8, 0], 0.5: [8, 0], 0.0: [0, 8]}


@pytest.mark.parametrize("seed", range(6))
def test_plans_fit_and_gangs_are_whole(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n, nodes = 14, 3
    jobs = random_jobs(rng, n)
    demand = rng.choice([1, 2, 4, 8, 16], n)
    for policy in POLICIES:
        plan = policy.plan(state(nodes, 6000.0, jobs["arrival"], demand, jobs["size_s"],
                                 jobs["left_s"]))
        held = plan.sum(axis=1)
        assert (plan.sum(axis=0) <= 8).all(), policy.name
        assert ((held == 0) | (held == demand)).all(), policy.name
        # a gang that fits one node is never split
        assert ((demand > 8) | ((plan > 0).sum(axis=1) <= 1)).all(), policy.name
        assert held.sum() > 0


def test_fifo_keeps_running_jobs_and_the_others_preempt() -> None:
    """One node, a later long job running, an earlier short one waiting (2 x 8-GPU gangs)."""
    running = np.array([[0], [8]])
    args = (1, 3000.0, np.array([0.0, 100.0]), np.array([8, 8]), np.array([1000.0, 9000.0]),
            np.array([1000.0, 8000.0]))
    got = {p.name: p.plan(state(*args, alloc=running)).ravel().tolist() for p in POLICIES}
    # Themis (each job's fair share 4 GPUs): rho 4000 / 2000 waiting, 10900 / 18000 running
    assert got == {"fifo-gang": [0, 8], "srsf-gang": [8, 0], "themis-gang": [8, 0]}


def test_gang_baselines_finish_every_job_on_the_golden_slo_workload() -> None:
    case = CASES["fifo-gang"][1]
    wl, profile = case.workload(), case.profile()
    runs = {p.name: simulate(wl, profile, p) for p in POLICIES}
    for name, r in runs.items():
        assert np.isfinite(r.finish_s).all(), name
    jct = {name: float(np.nanmean(METRICS["jct"].compute(r))) for name, r in runs.items()}
    # shortest remaining service first minimises mean completion time among the three
    assert jct["srsf-gang"] < min(jct["fifo-gang"], jct["themis-gang"])
