"""UniSched (papers/unisched.md §III): the paper's examples, brute-force oracles for Proposition 1
and the selector MILP, leases, the solution cache on a timeout, and SLO attainment against
FIFO, Themis, LLF and Hydra (§V: UniSched misses fewer deadlines)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from policies import FIFO, Themis
from policies.cells import CELL_GPUS, NEST, candidates, fits_cells, node_cells, place_cells
from policies.unisched.baselines import LLF, Hydra
from policies.unisched.exact import solve_knapsack
from policies.unisched.milp import (
    NODE_LIMIT,
    Selection,
    SelectorInput,
    solve_milp,
    solve_selector,
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


def packs(free: list[int], cells: list[int]) -> bool:
    """Brute force: can the cells (GPU counts) be put on nodes with these free GPUs?"""
    if not cells:
        return True
    size, rest = cells[0], cells[1:]
    for n in range(len(free)):
        if free[n] >= size:
            free[n] -= size
            ok = packs(free, rest)
            free[n] += size
            if ok:
                return True
    return False


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


def random_instance(rng: np.random.Generator, n_jobs: int, slots: list[float],
                    demands: tuple[int, ...], later_nodes: int = 2
                    ) -> tuple[SelectorInput, list[int]]:
    cells, owner, phi = [], [], []
    for j in range(n_jobs):
        c = candidates(int(rng.choice(demands)))
        cells.append(c)
        owner += [j] * len(c)
        phi += [1.0] + [float(rng.uniform(0.6, 0.95))] * (len(c) - 1)
    slot = np.array(slots)
    horizon = slot.sum()
    steps = 2
    deadline = np.sort(rng.uniform(0.1, 1.2, (n_jobs, steps)) * horizon, axis=1)
    work = np.repeat(rng.uniform(0.05, 1.0, (n_jobs, 1)) * horizon, steps, axis=1)
    work[work > deadline] = np.inf  # out of reach
    value = np.sort(rng.choice([20.0, 50.0, 80.0, 100.0], (n_jobs, steps)), axis=1)[:, ::-1]
    be = rng.random(n_jobs) < 0.3
    work[be], deadline[be], value[be] = np.nan, np.nan, np.nan
    free = [int(v) for v in rng.integers(0, 9, 2)]
    inp = SelectorInput(
        cand_cells=np.concatenate(cells), cand_job=np.array(owner), cand_phi=np.array(phi),
        now_value=rng.uniform(0.0, 1.0, n_jobs), may_start=rng.random(n_jobs) < 0.85,
        work_s=work, deadline_s=deadline, step_value=value, slot_s=slot,
        free_now=node_cells(np.array(free)).sum(axis=0),
        free_later=node_cells(np.full(later_nodes, 8)).sum(axis=0))
    return inp, free


def options(inp: SelectorInput, j: int) -> list[int]:
    mine = list(np.flatnonzero(inp.cand_job == j))
    return [-1, *mine] if inp.may_start[j] else [-1]


def packable_picks(inp: SelectorInput, free: list[int], n: int) -> Iterator[tuple[int, ...]]:
    """Every choice of one candidate (or none) per job whose cells fit the free nodes."""
    for pick in itertools.product(*(options(inp, j) for j in range(n))):
        cells = [int(CELL_GPUS[g]) for c in pick if c >= 0
                 for g in range(4) for _ in range(inp.cand_cells[c, g])]
        if packs(list(free), sorted(cells, reverse=True)):
            yield pick


def test_selector_matches_brute_force_in_one_lease() -> None:
    """Only the current lease: enumerate every choice, check it by bin packing, score it."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(2, 5))
        inp, free = random_instance(rng, n, [600.0], (1, 2, 3, 4, 6, 8))
        best = 0.0
        for pick in packable_picks(inp, free, n):
            total = 0.0
            for j, c in enumerate(pick):
                if c < 0:
                    continue
                total += inp.now_value[j] * inp.cand_phi[c]
                done = inp.cand_phi[c] * np.minimum(inp.deadline_s[j], 600.0)
                met = inp.step_value[j][done >= inp.work_s[j]]
                total += met.max(initial=0.0)
            best = max(best, total)
        for sel in (solve_milp(inp, rel_gap=0.0), solve_selector(inp, rel_gap=0.0)):
            assert sel.usable and sel.status == 0
            assert sel.objective == pytest.approx(best, rel=1e-7, abs=1e-7)


def plan_ahead_feasible(inp: SelectorInput, pick: tuple[int, ...], step: tuple[int, ...]
                        ) -> bool:
    """An LP over the later slots' time shares: can every chosen step still be met?"""
    n_jobs, n_cand, n_later = len(pick), len(inp.cand_job), len(inp.slot_s) - 1
    edges = np.concatenate([[0.0], np.cumsum(inp.slot_s)])
    n_var = n_cand * n_later
    a_ub, b_ub = [], []
    for k in range(n_later):
        for j in range(n_jobs):  # a job runs at most the whole slot
            row = np.zeros(n_var)
            row[k * n_cand + np.flatnonzero(inp.cand_job == j)] = 1.0
            a_ub.append(row)
            b_ub.append(1.0)
        cap = inp.free_later @ NEST
        for level in range(4):  # eq. 14 on the time-shared cells
            row = np.zeros(n_var)
            row[k * n_cand: (k + 1) * n_cand] = inp.cand_cells @ NEST[:, level]
            a_ub.append(row)
            b_ub.append(cap[level])
    for j, f in enumerate(step):
        if f < 0:
            continue
        avail = np.clip(inp.deadline_s[j, f] - edges[:-1], 0.0, inp.slot_s)
        row = np.zeros(n_var)
        for c in np.flatnonzero(inp.cand_job == j):
            for k in range(n_later):
                row[k * n_cand + c] = -inp.cand_phi[c] * avail[k + 1]
        now = inp.cand_phi[pick[j]] * avail[0] if pick[j] >= 0 else 0.0
        a_ub.append(row)
        b_ub.append(now - inp.work_s[j, f])
    res = linprog(np.zeros(n_var), A_ub=np.array(a_ub), b_ub=np.array(b_ub),
                  bounds=(0.0, 1.0), method="highs")
    return bool(res.status == 0)


def test_selector_matches_brute_force_with_plan_ahead() -> None:
    """Three slots: enumerate the binary choices, an LP decides the fractional future."""
    rng = np.random.default_rng(11)
    for _ in range(8):
        n = int(rng.integers(2, 4))
        inp, free = random_instance(rng, n, [600.0, 600.0, 1200.0], (1, 2, 4))
        best = 0.0
        for pick in packable_picks(inp, free, n):
            now = sum(inp.now_value[j] * inp.cand_phi[c] for j, c in enumerate(pick) if c >= 0)
            steps = [[-1, *np.flatnonzero(np.isfinite(inp.work_s[j]))] for j in range(n)]
            for step in itertools.product(*steps):
                gain = sum(inp.step_value[j, f] for j, f in enumerate(step) if f >= 0)
                if now + gain > best and plan_ahead_feasible(inp, pick, step):
                    best = now + gain
        for sel in (solve_milp(inp, rel_gap=0.0), solve_selector(inp, rel_gap=0.0)):
            assert sel.usable
            assert sel.objective == pytest.approx(best, rel=1e-6, abs=1e-6)


def with_twin(inp: SelectorInput) -> tuple[SelectorInput, list[int]]:
    """The instance with a copy of job 0 appended as the last job, both free to start, on
    two nodes where only one of them fits (an exact tie), and those nodes' free GPUs."""
    mine = np.flatnonzero(inp.cand_job == 0)
    n = inp.now_value.shape[0]
    gpus = int(inp.cand_cells[mine[0]] @ CELL_GPUS)
    free = [gpus, gpus - 1]

    def twin(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a, a[:1]])

    may_start = twin(inp.may_start)
    may_start[[0, n]] = True
    return replace(
        inp, cand_cells=np.concatenate([inp.cand_cells, inp.cand_cells[mine]]),
        cand_job=np.concatenate([inp.cand_job, np.full(mine.size, n)]),
        cand_phi=np.concatenate([inp.cand_phi, inp.cand_phi[mine]]),
        now_value=twin(inp.now_value), may_start=may_start, work_s=twin(inp.work_s),
        deadline_s=twin(inp.deadline_s), step_value=twin(inp.step_value),
        free_now=node_cells(np.array(free)).sum(axis=0)), free


def pick_value(inp: SelectorInput, pick: tuple[int, ...], at_least: float) -> float:
    """The best objective of a slot-0 choice (an LP decides the later slots), or -inf if none
    reaches ``at_least``."""
    n = len(pick)
    now = sum(inp.now_value[j] * inp.cand_phi[c] for j, c in enumerate(pick) if c >= 0)
    steps = [[-1, *np.flatnonzero(np.isfinite(inp.work_s[j]))] for j in range(n)]
    worth = sorted(((now + sum(inp.step_value[j, f] for j, f in enumerate(step) if f >= 0), step)
                    for step in itertools.product(*steps)), key=lambda t: -t[0])
    for total, step in worth:
        if total < at_least:
            break
        if plan_ahead_feasible(inp, pick, step):
            return total
    return -np.inf


def test_tie_rule_matches_brute_force() -> None:
    """Tiny instances with a twin job, three slots: every slot-0 choice scored (an LP decides
    the future). The selector reaches the optimum; where the exact method answers, its choice
    is optimal and follows the tie rule between the twins: of two identical jobs where only
    one fits, the earlier runs (HiGHS picks either)."""
    rng = np.random.default_rng(5)
    answered = 0
    for _ in range(10):
        n = int(rng.integers(1, 3))
        inp, free = with_twin(random_instance(rng, n, [600.0, 600.0, 1200.0], (1, 2, 4),
                                              later_nodes=1)[0])
        picks = list(packable_picks(inp, free, n + 1))
        best = max(pick_value(inp, p, -np.inf) for p in picks)
        sel = solve_selector(inp)
        assert sel.usable
        assert sel.objective == pytest.approx(best, rel=1e-6, abs=1e-6)
        if sel.exact:
            answered += 1
            pick = tuple(int(c) for c in sel.choice)
            assert pick in picks
            assert pick_value(inp, pick, best - 1e-6) == pytest.approx(best, rel=1e-6)
            assert not (pick[0] < 0 <= pick[n])
    assert answered >= 8


def check_exact(inp: SelectorInput) -> bool:
    """If the knapsack method answers: HiGHS's objective (no gap) and a choice that fits slot
    0's cells and runs no locked job. Whether it answered."""
    fast = solve_knapsack(inp)
    if fast is None:
        return False
    choice, _, objective = fast
    assert objective == pytest.approx(solve_milp(inp, rel_gap=0.0).objective, rel=1e-9,
                                      abs=1e-9)
    assert fits_cells(inp.cand_cells[choice[choice >= 0]].sum(axis=0), inp.free_now)
    assert inp.may_start[choice >= 0].all()
    assert (inp.cand_job[choice[choice >= 0]] == np.flatnonzero(choice >= 0)).all()
    return True


def test_exact_selector_matches_highs_on_random_instances() -> None:
    """The knapsack method answers (nearly) every small instance, each as HiGHS does."""
    rng = np.random.default_rng(3)
    answered = sum(check_exact(random_instance(
        rng, int(rng.integers(2, 14)), [600.0, 1200.0, 2400.0], (1, 2, 3, 4, 6, 8, 16),
        later_nodes=8)[0]) for _ in range(150))
    assert answered >= 140


RECORDED = Path(__file__).parents[1] / "fixtures" / "unisched" / "selector_instances.npz"


def recorded_instances() -> Iterator[SelectorInput]:
    """Selector instances recorded from a UniSched run (fixtures/unisched/README.md)."""
    with np.load(RECORDED) as doc:
        arrays = {k: doc[k] for k in doc.files}
    names = [f.name for f in fields(SelectorInput)]
    for k in range(int(arrays["count"])):
        yield SelectorInput(**{n: arrays[f"{k}/{n}"] for n in names})


def test_exact_selector_matches_highs_on_recorded_instances() -> None:
    """On instances from a real run the knapsack method reaches HiGHS's optimum wherever it
    answers, and it answers nearly all of them (it answers all 30: a plan of the later
    slots for the slot 0 it chose certifies the overloaded ones)."""
    results = [check_exact(inp) for inp in recorded_instances()]
    assert sum(results) >= 0.95 * len(results)


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

    def select(self, inp: SelectorInput) -> Selection:
        return solve_milp(inp, node_limit=self.milp_node_limit)


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
