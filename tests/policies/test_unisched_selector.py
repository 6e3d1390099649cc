"""UniSched's selector (papers/unisched.md §III-C): the exact method against brute-force
oracles (one lease, plan-ahead, the tie rule) and against HiGHS at gap 0 on random and
recorded instances."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
from scipy.optimize import linprog

from policies.cells import CELL_GPUS, LEVELS, NEST, candidates, fits_cells, node_cells
from policies.unisched.exact import _np_sum, solve_knapsack
from policies.unisched.milp import (
    SelectorInput,
    solve_milp,
    solve_selector,
)
from policies.unisched.relaxation import level_bound, linked_steps, unlink
from tests.helpers.packing import packs


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


def recorded_instances(path: Path = RECORDED) -> Iterator[SelectorInput]:
    """Selector instances recorded from a UniSched run (fixtures/unisched/README.md)."""
    with np.load(path) as doc:
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


def test_highs_takes_our_options_and_reaches_its_default_optimum() -> None:
    """The HiGHS bundled with SciPy knows :data:`HIGHS_OPTIONS` (an unknown one would be
    skipped with an ``OptimizeWarning``, here an error), and with its two root
    heuristics off it reaches the same optimum as with its defaults on recorded instances."""
    for k, inp in enumerate(recorded_instances()):
        if k % 10:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ours = solve_milp(inp)
        with patch("policies.unisched.milp.HIGHS_OPTIONS", {}):
            plain = solve_milp(inp)
        assert ours.status == plain.status == 0
        assert ours.objective == pytest.approx(plain.objective, rel=1e-9)


def test_compiled_sum_adds_as_numpy_does() -> None:
    """The exact method's objective and tie tolerance are NumPy's sums to the last bit: the
    compiled set-up's pairwise sum against ``ndarray.sum`` (1-D and along a last axis), at
    the lengths where NumPy's blocking changes (8, 128 and their multiples)."""
    rng = np.random.default_rng(3)
    for n in [*range(20), 63, 64, 65, 127, 128, 129, 130, 255, 256, 257, 1000, 2049]:
        a = rng.random(n) * 10.0 ** rng.integers(-3, 6, n)
        assert _np_sum(a) == a.sum()
        b = rng.random((2, n + 1)) * 1e3
        assert [_np_sum(row[1:]) for row in b] == list(b[:, 1:].sum(axis=1))


def test_level_bound_is_each_levels_linear_relaxation_along_a_search() -> None:
    """The search's bound on the jobs not yet fixed, as the branch and bound walks its
    depths (down and back up, the steps unlinked and linked back), is the least over the
    cell levels of that level's multiple-choice knapsack relaxed to an LP (HiGHS): each
    unfixed job picks at most one option in total, fractionally, under the level's free
    cells."""
    rng = np.random.default_rng(5)
    for n in (1, 4, 12, 30):
        per_job = rng.integers(1, 5, n)
        opt_w = rng.integers(0, 9, (per_job.sum(), LEVELS))
        opt_d = rng.uniform(0.1, 10.0, per_job.sum())
        first = np.concatenate([[0], np.cumsum(per_job)])
        best = np.array([opt_d[first[j]:first[j + 1]].max() for j in range(n)])
        order = np.argsort(-best, kind="mergesort")
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        inc_w, inc_v, nxt, prv, own, own_at, base_sum = linked_steps(
            opt_w, opt_d, first, order, rank, LEVELS)
        fixed, depth = 0, 0
        for _ in range(6 * n):
            depth = int(np.clip(depth + rng.choice([-1, 1, 1]), 0, n))
            cap = rng.integers(0, 3 * n, LEVELS)
            fixed = unlink(fixed, depth, nxt, prv, own, own_at)
            got = level_bound(depth, nxt, inc_w, inc_v, base_sum, cap, np.zeros((0, 0)),
                              np.zeros(LEVELS + 1, dtype=np.int64), np.zeros(LEVELS))
            free = [o for d in range(depth, n) for o in range(first[order[d]],
                                                              first[order[d] + 1])]
            if not free:
                assert got == 0.0
                continue
            owner = np.repeat(np.arange(n), per_job)[free]
            one_each = (owner[None, :] == np.unique(owner)[:, None]).astype(float)
            want = min(-linprog(-opt_d[free], A_ub=np.vstack([one_each, opt_w[free, i]]),
                                b_ub=np.append(np.ones(len(one_each)), cap[i]),
                                bounds=(0, None), method="highs").fun
                       for i in range(LEVELS))
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
