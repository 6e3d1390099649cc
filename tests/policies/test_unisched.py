"""UniSched (papers/unisched.md §III): the paper's examples, a brute-force oracle for
Proposition 1, leases, the solution cache past the node limit, and SLO attainment against
FIFO, Themis, LLF and Hydra (§V: UniSched misses fewer deadlines). The selector's own oracles:
``test_unisched_selector.py``."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import FIFO, Themis
from policies.cells import CELL_GPUS, candidates, fits_cells, node_cells, place_cells
from policies.unisched.baselines import LLF, Hydra
from policies.unisched.milp import (
    NODE_LIMIT,
    Selection,
    SelectorInput,
    solve_milp,
)
from policies.unisched.policy import (
    F_PROF,
    G_FALLBACKS,
    G_NEXT,
    UniSched,
    expected_sr_overhead,
    expected_suspensions,
)
from simulator import Workload, load_profile, simulate
from simulator.inputs.generate import add_slos
from simulator.inputs.profile import NodeGroup
from simulator.inputs.scaling import parametric_table
from simulator.inputs.slo import BEST_EFFORT, STRICT
from simulator.metrics import METRICS
from simulator.rounds import Cluster, RoundState
from simulator.rounds.arrays import cluster_arrays
from simulator.rounds.python_path import job_arrays_from
from tests.helpers.packing import packs

TABLE = parametric_table(16)


def as_set(rows: np.ndarray) -> set[tuple[int, ...]]:
    return {tuple(int(v) for v in r) for r in rows}


def test_candidates_are_the_papers_buddy_cells() -> None:
    # §III-C3: a 6-GPU job may take (0,0,0,1), (0,1,1,0) or (6,0,0,0); row 0 is consolidated
    six = candidates(6)
    assert as_set(six) == {(0, 0, 0, 1), (0, 1, 1, 0), (6, 0, 0, 0)}
    assert tuple(six[0]) == (0, 0, 0, 1)
    assert as_set(candidates(4)) == {(0, 0, 1, 0), (4, 0, 0, 0)}
    assert as_set(candidates(16)) == {(0, 0, 0, 2), (16, 0, 0, 0)}
    assert as_set(candidates(24)) == {(0, 0, 0, 3)}  # > 16 GPUs: no enumeration
    assert as_set(candidates(3, top_level=1)) == {(1, 1, 0, 0), (3, 0, 0, 0)} | {(0, 2, 0, 0)}


def test_suspensions_closed_form_is_eq3() -> None:
    for m in range(1, 41):
        for n in range(1, m + 1):
            assert expected_suspensions(n, m) == pytest.approx(
                expected_sr_overhead(n, m, 1.0), abs=1e-9)


@settings(max_examples=150, deadline=None)
@given(free=st.lists(st.integers(0, 16), min_size=1, max_size=3),
       want=st.lists(st.tuples(*[st.integers(0, 3)] * 4), min_size=1, max_size=3))
def test_proposition_1_against_bin_packing(free: list[int], want: list[tuple[int, ...]]) -> None:
    """Eq. 14 holds exactly when the cells fit the nodes, and place_cells then places them."""
    requests = np.array(want, dtype=np.int64)
    cells = sorted((int(CELL_GPUS[g]) for r in want for g in range(4) for _ in range(r[g])),
                   reverse=True)
    node_free = np.array(free, dtype=np.int64)
    ok = fits_cells(requests.sum(axis=0), node_cells(node_free).sum(axis=0))
    assert ok == packs(list(free), cells)
    if ok:
        placed, placed_ok = place_cells(node_free, requests)
        assert placed_ok.all()
        assert (placed.sum(axis=0) <= node_free).all()
        assert (placed.sum(axis=1) == requests @ CELL_GPUS).all()


def cluster(nodes: int, gpus: int = 8, restart: float = 30.0) -> Cluster:
    return Cluster(("v100",), np.zeros(nodes, dtype=np.int64), np.full(nodes, gpus),
                   0.9, restart, np.full(nodes, 32.0))


def make_state(cl: Cluster, now: float, demand: np.ndarray, remaining: np.ndarray,
               job_class: np.ndarray, deadline: np.ndarray, alloc: np.ndarray | None = None,
               memo: dict[str, Any] | None = None, rows: np.ndarray | None = None
               ) -> RoundState:
    """A state of jobs that arrived at t = 0 with one deadline step each (NaN: none)."""
    n = len(demand)
    lin = np.full(n, TABLE.index("linear"))
    return RoundState(
        now=now, cluster=cl, rows=np.arange(n) if rows is None else rows,
        arrival_s=np.zeros(n), demand=demand.astype(np.int64), min_gpus=np.ones(n, np.int64),
        est_size=remaining * 2, est_remaining=remaining * demand, attained=remaining,
        alloc=np.zeros((n, cl.nodes), np.int64) if alloc is None else alloc,
        model=lin, job_class=job_class.astype(np.int64), deadlines_s=deadline[:, None],
        rewards=np.where(np.isnan(deadline), np.nan, 100.0)[:, None], scaling=TABLE,
        speeds=np.ones((len(TABLE.models), 1)), memo={} if memo is None else memo)


def test_reward_order_on_one_gpu() -> None:
    """§III-C2: SLO job > profiler (new) job > short best-effort job > long best-effort job;
    an SLO job whose deadline leaves room waits for later leases (joint optimisation, §II-B)."""
    cl = cluster(1, gpus=1)
    hour = 3600.0
    demand = np.ones(4)
    remaining = np.array([10 * hour, hour, hour, hour])
    kind = np.array([BEST_EFFORT, BEST_EFFORT, BEST_EFFORT, STRICT])
    deadline = np.array([np.nan, np.nan, np.nan, 1.1 * hour])

    def winner(keep: list[int], slack: float = 1.0) -> int:
        idx = np.array(keep)
        st_ = make_state(cl, 0.0, demand[idx], remaining[idx], kind[idx], deadline[idx] * slack,
                         rows=idx)
        profiled(st_, [r for r in (0, 1, 3) if r in keep])
        plan = UniSched().plan(st_)
        assert plan.sum() == 1
        return int(idx[np.flatnonzero(plan.sum(axis=1))[0]])

    assert winner([0, 1, 2, 3]) == 3
    assert winner([0, 1, 2, 3], slack=2.0) == 2  # the SLO job can run from the next lease
    assert winner([0, 1, 2]) == 2  # job 2 has not been profiled yet
    assert winner([0, 1]) == 1


def profiled(state: RoundState, rows: list[int]) -> None:
    """Mark ``rows`` as past their profiling phase in UniSched's memory for ``state``."""
    memory = UniSched().memory(
        cluster_arrays(state.cluster, state.speeds, state.scaling, None),
        job_arrays_from(state, False))
    memory.f[rows, F_PROF] = 1e9
    state.memo["kernel_memory"] = memory


def fallbacks(memo: dict[str, Any]) -> int:
    """Times UniSched reused its cached cells because the MILP found no usable solution."""
    kept = memo.get("kernel_memory")
    return 0 if kept is None else int(kept.g[G_FALLBACKS])


def contended(seed: int, n: int = 48) -> tuple[Cluster, np.ndarray, np.ndarray, np.ndarray,
                                                np.ndarray]:
    rng = np.random.default_rng(seed)
    demand = rng.choice([1, 1, 2, 4], n)
    remaining = rng.uniform(600.0, 20_000.0, n)
    kind = np.where(rng.random(n) < 0.6, STRICT, BEST_EFFORT)
    deadline = np.where(kind == STRICT, remaining * rng.uniform(1.1, 3.0, n), np.nan)
    return cluster(4), demand, remaining, kind, deadline


@dataclass(frozen=True)
class HighsSelector(UniSched):
    """UniSched deciding every boundary by HiGHS alone (its node limit, no exact method)."""

    name: ClassVar[str] = "unisched-highs-test"

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        return solve_milp(inp, node_limit=node_limit)


def test_no_solution_within_the_node_limit_reuses_the_cached_solution() -> None:
    """§III-C4: no solution within the budget -> the previous cycle's selection is kept
    (HiGHS decides here: the exact method answers this instance without a search limit)."""
    cl, demand, remaining, kind, deadline = contended(3)
    memo: dict[str, Any] = {}
    first = UniSched(profile_s=0).plan(make_state(cl, 0.0, demand, remaining, kind, deadline,
                                                  memo=memo))
    assert first.sum() == cl.node_gpus.sum() and fallbacks(memo) == 0
    # urgent newcomers: a working solver makes room for them
    urgent = np.array([1, 1, 1, 1])
    demand2 = np.concatenate([demand, urgent])
    remaining2 = np.concatenate([remaining, np.full(4, 900.0)])
    kind2 = np.concatenate([kind, np.full(4, STRICT)])
    deadline2 = np.concatenate([deadline, np.full(4, 1300.0)])
    alloc2 = np.vstack([first, np.zeros((4, cl.nodes), np.int64)])

    def second(limit: int) -> tuple[np.ndarray, dict[str, Any]]:
        m = copy.deepcopy(memo)
        st_ = make_state(cl, 300.0, demand2, remaining2, kind2, deadline2, alloc=alloc2, memo=m)
        return HighsSelector(profile_s=0, milp_node_limit=limit).plan(st_), m

    solved, m_ok = second(NODE_LIMIT)
    assert fallbacks(m_ok) == 0
    assert solved[-4:].sum() == 4  # the urgent jobs run
    cached, m_to = second(0)
    assert fallbacks(m_to) == 1
    held = first.sum(axis=1) > 0
    assert np.array_equal(cached[:-4][held], first[held])  # everyone keeps the cached cells
    assert cached[-4:].sum() == 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), nodes=st.integers(1, 3))
def test_plans_fit_and_leases_hold(seed: int, n: int, nodes: int) -> None:
    _, demand, remaining, kind, deadline = contended(seed, n)
    cl = cluster(nodes)
    demand = np.minimum(demand, 8 * nodes)
    policy = UniSched(slo_lease_multiple=3)
    memo: dict[str, Any] = {}
    alloc = np.zeros((n, nodes), np.int64)
    held: dict[int, float] = {}
    for step in range(3):
        plan = policy.plan(make_state(cl, 300.0 * step, demand, remaining, kind, deadline,
                                      alloc=alloc, memo=memo))
        assert (plan >= 0).all() and (plan.sum(axis=0) <= cl.node_gpus).all()
        assert (plan.sum(axis=1) <= demand).all()
        if step:  # SLO leases (3 BE leases) started at step 0 still hold at 1 and 2
            locked = np.array([held.get(i, -1.0) > 300.0 * step for i in range(n)])
            assert np.array_equal(plan[locked], alloc[locked])
        held = UniSched.lease_ends(memo)
        alloc = plan


def slo_workload(seed: int, n: int = 40) -> Workload:
    """Contended SLO mix: 1-8 GPU jobs of 1-4 hours arriving within 4 hours on 16 GPUs."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 1, 2, 4, 8], n)
    hours = rng.uniform(3600, 4 * 3600, n)
    frame = pd.DataFrame({"arrival_s": np.sort(rng.uniform(0, 4 * 3600, n)), "gpus": gpus,
                          "service_s": hours * gpus, "model": "linear"})
    return add_slos(Workload.from_frame(frame), "MIX1", seed=seed)


TWO_NODES = replace(load_profile("unisched-c96"), name="two-nodes",
                    node_groups=(NodeGroup(2, 8, "v100", 32),))
LOG: list[tuple[float, np.ndarray, np.ndarray, dict[int, float], bool]] = []


@dataclass(frozen=True)
class Recorded(UniSched):
    """UniSched that logs each decision (time, rows, plan, leases) for the lease test."""

    name: ClassVar[str] = "test-unisched-recorded"

    def plan(self, state: RoundState) -> np.ndarray:
        kept = state.memo.get("kernel_memory")
        boundary = state.now >= (kept.g[G_NEXT] if kept is not None else -np.inf) - 1e-6
        out = super().plan(state)
        LOG.append((state.now, state.rows.copy(), out.copy(), UniSched.lease_ends(state.memo),
                    boundary))
        return out


def test_leases_are_honoured_in_a_run() -> None:
    """An SLO job's allocation does not change within its lease; between BE lease boundaries
    (decisions at arrivals and completions) nobody loses GPUs; profiling uses <= 2 GPUs."""
    LOG.clear()
    m, lease = 3, 300.0
    simulate(slo_workload(1, 30), TWO_NODES, Recorded(slo_lease_multiple=m, be_lease_s=lease))
    checked = 0
    for d, (t0, rows0, plan0, leases0, _) in enumerate(LOG):
        for i, row in enumerate(rows0):
            end = leases0.get(int(row), -np.inf)
            assert end <= t0 + m * lease + 1e-6
            for t, rows, plan, _, _ in LOG[d + 1:]:
                if t >= end - 1e-6 or row not in rows:
                    break
                assert np.array_equal(plan[np.flatnonzero(rows == row)[0]], plan0[i])
                checked += 1
    assert checked > 20
    between = 0
    for (_, rows0, plan0, _, _), (_, rows, plan, _, boundary) in itertools.pairwise(LOG):
        if boundary:
            continue
        for i, row in enumerate(rows0):
            if plan0[i].any() and row in rows:
                assert np.array_equal(plan[np.flatnonzero(rows == row)[0]], plan0[i])
                between += 1
    assert between > 20
    first_gpus: dict[int, int] = {}
    for _, rows, plan, _, _ in LOG:
        for i, row in enumerate(rows):
            if plan[i].sum() and int(row) not in first_gpus:
                first_gpus[int(row)] = int(plan[i].sum())
    assert first_gpus and max(first_gpus.values()) <= 2


def test_unisched_misses_fewer_deadlines() -> None:
    """§V-B: on a contended SLO mix UniSched's weighted miss rate (eq. 15) is the lowest."""
    wl = slo_workload(0)
    miss = {type(p).__name__: float(np.nanmean(METRICS["slo_miss"].compute(
        simulate(wl, TWO_NODES, p)))) for p in (UniSched(), FIFO(), Themis(), LLF(), Hydra())}
    assert miss["UniSched"] < min(v for k, v in miss.items() if k != "UniSched"), miss


def test_hydra_keeps_running_jobs_and_llf_preempts_by_laxity() -> None:
    cl = cluster(1, gpus=1, restart=0.0)
    demand, remaining = np.ones(2), np.array([3600.0, 600.0])
    kind = np.array([BEST_EFFORT, STRICT])
    deadline = np.array([np.nan, 900.0])
    running = np.array([[1], [0]])
    hydra = Hydra().plan(make_state(cl, 0.0, demand, remaining, kind, deadline, alloc=running))
    llf = LLF().plan(make_state(cl, 0.0, demand, remaining, kind, deadline, alloc=running))
    assert hydra.ravel().tolist() == [1, 0] and llf.ravel().tolist() == [0, 1]
    idle = np.zeros((2, 1), np.int64)
    hydra_idle = Hydra().plan(make_state(cl, 0.0, demand, remaining, kind, deadline, alloc=idle))
    assert hydra_idle.ravel().tolist() == [0, 1]  # waiting jobs: SLO first


@pytest.mark.parametrize("policy", [LLF, Hydra])
def test_an_slo_job_past_hope_joins_the_best_effort_jobs_when_asked(policy: Any) -> None:
    # 2 GPUs; a best-effort job (300 s left), an SLO job 600 s from done with its deadline
    # at 100 s (past hope), and one with its deadline at 2,000 s, all waiting
    cl = cluster(1, gpus=2, restart=0.0)
    demand, remaining = np.ones(3), np.array([300.0, 600.0, 600.0])
    kind = np.array([BEST_EFFORT, STRICT, STRICT])
    deadline = np.array([np.nan, 100.0, 2000.0])
    state = make_state(cl, 0.0, demand, remaining, kind, deadline,
                       alloc=np.zeros((3, 1), np.int64))
    first = policy().plan(state)
    assert first.ravel().tolist() == [0, 1, 1]  # SLO jobs first, hopeless or not
    demoted = policy(late="best-effort").plan(state)
    assert demoted.ravel().tolist() == [1, 0, 1]  # it waits behind the best-effort job


def test_llf_orders_best_effort_jobs_by_arrival_or_by_remaining_time() -> None:
    # 1 GPU, two waiting best-effort jobs: the earlier needs 3,600 s, the later 300 s
    cl = cluster(1, gpus=1, restart=0.0)
    demand, remaining = np.ones(2), np.array([3600.0, 300.0])
    kind, deadline = np.array([BEST_EFFORT, BEST_EFFORT]), np.array([np.nan, np.nan])
    idle = np.zeros((2, 1), np.int64)
    state = make_state(cl, 0.0, demand, remaining, kind, deadline, alloc=idle)
    assert LLF().plan(state).ravel().tolist() == [1, 0]
    assert LLF(be_order="shortest").plan(state).ravel().tolist() == [0, 1]
