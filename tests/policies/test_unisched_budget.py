"""UniSched's HiGHS budget per run (``milp_nodes_per_job`` x the run's jobs): HiGHS is asked for
no more nodes than the budget, and past it the run decides by the exact method's knapsack
choice, certified or not (:data:`policies.unisched.exact.UNPLANNED`), as a selector that always
answered so would."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from policies.cells import fits_cells
from policies.unisched.exact import BORDER, CERTIFIED, UNPLANNED, solve_input, solve_knapsack
from policies.unisched.milp import (
    NODE_VARIABLES,
    Selection,
    SelectorInput,
    milp_variables,
    node_cost,
    solve_milp,
    solve_selector,
)
from policies.unisched.policy import G_NODES, UniSched
from simulator import simulate
from tests.policies.test_unisched import TWO_NODES, contended, make_state, slo_workload
from tests.policies.test_unisched_selector import recorded_instances

EIGHT = np.array([0, 0, 0, 1])  # one 8-GPU cell


def overloaded() -> SelectorInput:
    """Two 8-GPU deadline jobs on one 8-GPU node: each alone meets its deadline from the
    whole future, both together need 2,200 s of the 2,000 s before it (the later slots are
    overloaded, so no later plan certifies the knapsack's optimum)."""
    return SelectorInput(
        cand_cells=np.array([EIGHT, EIGHT]), cand_job=np.array([0, 1]),
        cand_phi=np.ones(2), now_value=np.full(2, 0.1), may_start=np.ones(2, dtype=bool),
        work_s=np.array([[1000.0], [1200.0]]), deadline_s=np.full((2, 1), 2000.0),
        step_value=np.ones((2, 1)), slot_s=np.array([300.0, 300.0, 600.0, 800.0]),
        free_now=EIGHT, free_later=EIGHT)


def test_an_unplanned_answer_is_the_relaxations_and_fits_the_lease() -> None:
    inp = overloaded()
    assert solve_knapsack(inp) is None  # not certified: HiGHS decides while the budget lasts
    got = solve_knapsack(inp, unplanned=True)
    assert got is not None
    choice, _, value = got
    milp = solve_milp(inp)
    # both steps counted by the relaxation, one met by the MILP (it cannot do 2,200 s in 2,000)
    assert value == 2.1 and milp.objective == 1.1
    assert fits_cells(inp.cand_cells[choice[choice >= 0]].sum(axis=0), inp.free_now)
    assert (choice >= 0).sum() == 1


LIMITS: list[tuple[int, Selection]] = []


@dataclass(frozen=True)
class Counted(UniSched):
    """UniSched that logs the node limit and the answer of every selector call."""

    name: ClassVar[str] = "test-unisched-counted"

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        sel = solve_selector(inp, node_limit=node_limit)
        LIMITS.append((node_limit, sel))
        return sel


@dataclass(frozen=True)
class KnapsackOnly(UniSched):
    """UniSched whose selector never asks HiGHS: the exact method's choice, certified or not."""

    name: ClassVar[str] = "test-unisched-knapsack"

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        got = solve_knapsack(inp, unplanned=True)
        assert got is not None  # this workload has no borderline step nor search limit
        return Selection(*got, status=0, usable=True, solve_s=0.0, exact=True)


def finish(policy: UniSched) -> np.ndarray:
    return simulate(slo_workload(2), TWO_NODES, policy).finish_s


def test_the_budget_bounds_highs_and_then_the_knapsack_decides() -> None:
    highs = []
    for per_job in (10_000.0, 0.125):  # 40 jobs: 400,000 nodes, and 5
        budget = int(per_job * 40)
        LIMITS.clear()
        finish(Counted(milp_nodes_per_job=per_job))
        asked = [(limit, sel) for limit, sel in LIMITS if not sel.exact]
        highs.append(len(asked))
        spent = 0
        for limit, sel in asked:  # each solve within what is left, and charged at least 1
            assert 0 < limit <= budget - spent
            spent += max(sel.nodes, 1)
        assert spent <= budget
    assert highs[0] > 5 >= highs[1]  # the workload needs HiGHS more often than 5 allows
    # past a spent budget the run decides as the knapsack would: the kernel's own path
    # (budget 0, nothing ever sent to HiGHS) and a selector answering by the knapsack alone
    assert np.array_equal(finish(UniSched(milp_nodes_per_job=0.0)), finish(KnapsackOnly()))
    assert not np.array_equal(finish(UniSched(milp_nodes_per_job=0.0)), finish(UniSched()))


STALL = Path(__file__).parents[1] / "fixtures" / "unisched" / "overloaded_instances.npz"


def only_picks(inp: SelectorInput, choice: np.ndarray) -> SelectorInput:
    """The instance with slot 0 narrowed to ``choice``: a job it runs keeps only that
    candidate, the others may not start (so HiGHS's optimum on it is at least the value of
    ``choice`` with the best plan of the later slots)."""
    keep = np.ones(inp.cand_job.size, dtype=bool)
    for j in np.flatnonzero(choice >= 0):
        keep[(inp.cand_job == j) & (np.arange(keep.size) != choice[j])] = False
    return replace(inp, cand_cells=inp.cand_cells[keep], cand_job=inp.cand_job[keep],
                   cand_phi=inp.cand_phi[keep], may_start=inp.may_start & (choice >= 0))


def test_overloaded_later_slots_are_certified_or_declined_as_highs_decides() -> None:
    """Instances of the publishing stall (fixtures/unisched/README.md): later slots so loaded
    that the MILP drops steps the knapsack counts. On the first two the knapsack's slot 0 is
    not optimal (HiGHS, slot 0 held to it, falls 0.74 short): the exact method declines. On
    the other four the steps whose fate does not hang on slot 0, bounded in the later slots
    alone, certify its choice: its objective is HiGHS's optimum (gap 0)."""
    verdicts = []
    for inp in recorded_instances(STALL):
        verdict, choice, _, total = solve_input(inp)
        verdicts.append(verdict)
        best = solve_milp(inp).objective
        held = solve_milp(only_picks(inp, choice)).objective
        if verdict == CERTIFIED:
            assert total == pytest.approx(best, rel=1e-9)
            assert held == pytest.approx(best, rel=1e-9)
        else:
            assert verdict == UNPLANNED and held < best - 0.5
    assert verdicts == [UNPLANNED] * 2 + [CERTIFIED] * 4


def test_a_borderline_step_is_read_strictly_past_the_budget() -> None:
    """A step missed by a millionth of its work is HiGHS's to judge (its tolerance may count
    it met); read strictly, as past the budget, it is missed without slot 0, and the answer is
    the optimum of the instance with that step plainly out of reach without slot 0 (HiGHS,
    the work 1 % more): the job runs now and meets it."""
    inp = replace(overloaded(), work_s=np.array([[100.0], [1700.0 * (1 + 1e-6)]]))
    assert solve_input(inp)[0] == BORDER
    verdict, choice, step, total = solve_input(inp, strict=True)
    far = solve_milp(replace(inp, work_s=np.array([[100.0], [1717.0]])))
    assert verdict == CERTIFIED and choice[1] >= 0 and step[1] == 0
    assert total == pytest.approx(far.objective, rel=1e-9)
    assert np.array_equal(choice >= 0, far.choice >= 0)


SIZED: list[tuple[int, SelectorInput, Selection]] = []


@dataclass(frozen=True)
class HighsSized(UniSched):
    """UniSched deciding by HiGHS alone, logging each solve's node limit, input and answer."""

    name: ClassVar[str] = "test-unisched-highs-sized"

    def select(self, inp: SelectorInput, node_limit: int) -> Selection:
        sel = solve_milp(inp, node_limit=node_limit)
        SIZED.append((node_limit, inp, sel))
        return sel


def test_a_solve_is_charged_by_the_size_of_its_milp() -> None:
    """The budget counts HiGHS's work, not its nodes: a node of a MILP of thousands of
    variables costs one budget node per NODE_VARIABLES variables started, a solve is given
    only the nodes the budget left pays for at its size, and one the budget cannot pay a
    single node for is not sent to HiGHS."""
    n = 256  # jobs: a budget of B is milp_nodes_per_job B / 256, exact in binary
    cl, demand, remaining, kind, deadline = contended(5, n)

    def decide(budget: int) -> float:
        SIZED.clear()
        memo: dict[str, Any] = {}
        HighsSized(profile_s=0, milp_nodes_per_job=budget / n).plan(
            make_state(cl, 0.0, demand, remaining, kind, deadline, memo=memo))
        return float(memo["kernel_memory"].g[G_NODES])

    spent = decide(10)
    [(limit, inp, sel)] = SIZED
    assert sel.variables == milp_variables(inp.cand_job, inp.work_s, inp.deadline_s,
                                           inp.slot_s.shape[0])
    cost = -(-sel.variables // NODE_VARIABLES)
    assert cost >= 2 and node_cost(sel.variables) == cost  # a MILP of over 1,000 variables
    assert limit == 10 // cost  # not 10, as a budget in nodes would give
    assert spent == max(sel.nodes, 1) * cost
    assert decide(cost - 1) == 0 and SIZED == []  # not one node of it paid for: no HiGHS
    decide(cost)
    assert [s[0] for s in SIZED] == [1]
