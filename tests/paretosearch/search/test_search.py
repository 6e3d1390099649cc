"""Objectives, the search space and SPEA2 on real runners (serial and a Dask LocalCluster)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest
from distributed import Client, LocalCluster
from pymoo.algorithms.moo.spea2 import SPEA2Survival
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from scipy.stats import qmc

from paretosearch.cli.runs import _hypervolume_note
from paretosearch.objectives import Objective, parse_objectives
from paretosearch.search.evaluation import SearchSpace, Task, evaluate
from paretosearch.search.runners import DaskRunner, OnResult, SerialRunner
from paretosearch.search.spea2 import (
    COVERED,
    HypervolumeBox,
    Progress,
    SearchSettings,
    _DistinctSurvival,
    run_spea2,
)
from simulator import (
    InvalidObjective,
    InvalidPolicyParams,
    ParetoSearchError,
    Workload,
    generate,
    load_profile,
)
from tests.helpers.runs import CtrlCInFinaliser

OBJECTIVES = parse_objectives([("jct", "avg"), "pred_err:avg"])


def test_objective_forms() -> None:
    assert Objective.parse("jct") == Objective("jct", "avg")
    assert Objective.parse(("pred_err", "P99")).label == "pred_err:p99"
    assert Objective.parse("utilization:avg").loss(0.8) == -0.8  # maximised: negated once
    both = parse_objectives(["jct:avg", "jct:p99"])  # same metric, different measures
    assert [o.label for o in both] == ["jct:avg", "jct:p99"]


@pytest.mark.parametrize(("objectives", "message"), [
    ([], "no objectives"),
    (["latency:avg"], "unknown metric 'latency'"),
    (["jct:p101"], "unknown measure 'p101'"),
    # valid measures no record holds: refused here, not by a KeyError after a generation
    (["jct:p95"], "measure 'p95' of 'jct' is not recorded: a search records avg, p50"),
    (["pred_err:min"], "measure 'min' of 'pred_err' is not recorded"),
    (["jct:avg", ("jct", "avg")], "given twice"),
    ([42], "cannot read objective 42"),
])
def test_bad_objectives(objectives: list[object], message: str) -> None:
    with pytest.raises(InvalidObjective, match=message):
        parse_objectives(objectives)


def test_space_decodes_domains() -> None:
    space = SearchSpace.of("wfq", {"delta": 0.2})
    assert space.names == ("T", "W", "zeta_min")
    lo, hi = space.decode(np.zeros(3)), space.decode(np.ones(3))
    assert lo == pytest.approx({"T": 0.001, "W": -3.0, "zeta_min": 0.0})
    assert hi["T"] == pytest.approx(1000.0) and hi["W"] == 3.0
    assert space.decode(np.full(3, 0.5))["T"] == pytest.approx(1.0)  # log scale: geometric mid
    with pytest.raises(InvalidPolicyParams, match="no parameter 'tau'"):
        SearchSpace.of("wfq", {"tau": 1})
    with pytest.raises(InvalidPolicyParams, match="nothing left to search"):
        SearchSpace.of("fifo")


def test_evaluate_records_every_metric() -> None:
    wl = generate(200, load=0.9, seed=2)
    task = Task("wfq", load_profile("pcs-64"))
    rec = evaluate(task, {"T": 1e3, "zeta_min": 0.0}, [wl], wl)  # one class: FIFO
    assert rec["pred_err:max"] < 1e-6
    assert {"jct:avg", "jct:p99", "unfairness:p90", "utilization:avg", "wall_s"} <= set(rec)
    assert not math.isnan(rec["jct:avg"])


def test_hypervolume_is_a_share_of_the_first_generations_box() -> None:
    box = HypervolumeBox.of(np.array([[1.0, 4.0], [3.0, 2.0]]))
    # box [0, 3.3] x [0, 4.4] (10 % beyond the worst); by hand, the two points dominate
    # 2.3 x 0.4 + 0.3 x 2.4 - 0.3 x 0.4 = 1.52 of its 14.52
    assert box.share(np.array([[1.0, 4.0], [3.0, 2.0]])) == pytest.approx(1.52 / 14.52)
    assert box.share(np.array([[-1.0, 0.0]])) == pytest.approx(1.0)  # clipped: all of it
    assert box.share(np.array([[5.0, 5.0]])) == 0.0
    maximised = HypervolumeBox.of(np.array([[-0.5], [-0.25]]))  # utilization 50 and 25 %
    assert maximised.share(np.array([[-0.5]])) == pytest.approx(0.275 / 0.55)


def test_progress_says_why_the_hypervolume_fell() -> None:
    steady = _hypervolume_note(Progress([], [], [(10, 0.25), (20, 0.5)]))
    assert steady == "hypervolume 0.500 of the first generation's box"
    fell = _hypervolume_note(Progress([], [], [(10, 0.25), (20, 0.5), (30, 0.45)]))
    assert "hypervolume 0.450" in fell and "best so far 0.500" in fell
    assert "truncating it dropped" in fell


def _search(runner: object, seed: int = 3) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    task = Task("wfq", load_profile("pcs-64"))
    out = run_spea2(task, SearchSpace.of("wfq"), OBJECTIVES, runner,  # type: ignore[arg-type]
                    SearchSettings(budget=48, pop_size=16, n_offsprings=16, seed=seed))
    assert len(out.evaluations) == 48
    hv = [h for _, h in out.hypervolume]
    assert hv == sorted(hv)  # the archive's hypervolume never drops
    assert hv[0] > 0 and hv[-1] <= 1  # a share of the first generation's box
    return sorted((tuple(p.values()), tuple(r[o.label] for o in OBJECTIVES))
                  for p, r in out.front)


@pytest.mark.dask
def test_same_seed_same_front_serial_and_dask() -> None:
    wl = generate(250, load=0.9, seed=4)
    serial = _search(SerialRunner([wl], wl))
    assert serial == _search(SerialRunner([wl], wl))
    assert serial != _search(SerialRunner([wl], wl), seed=5)
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            assert _search(DaskRunner(client, [wl], wl)) == serial


@pytest.mark.dask
def test_ctrl_c_inside_a_finaliser_still_stops_a_dask_batch(capfd: pytest.CaptureFixture[str]
                                                          ) -> None:
    """Python only prints a KeyboardInterrupt raised in a ``__del__`` (a Dask future's, as
    results come in): the runner keeps it and stops at the next result, without the print."""
    wl = generate(100, load=0.9, seed=2)
    task = Task("wfq", load_profile("pcs-64"))
    heard: list[int] = []

    def on_result(i: int, record: dict[str, float]) -> None:
        heard.append(i)
        CtrlCInFinaliser()  # made and finalised at once

    batch = [{"T": 10.0 * (k + 1), "zeta_min": 0.0} for k in range(6)]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        runner = DaskRunner(client, [wl], wl, task_s=0.0)
        with pytest.raises(KeyboardInterrupt):
            runner.map(task, batch, on_result)
        assert len(heard) < len(batch)  # stopped before the batch's end
        assert len(runner.map(task, batch[:2])) == 2  # the hook is gone: it runs on
    assert "Exception ignored" not in capfd.readouterr().err


def test_the_archive_keeps_one_member_per_objective_vector() -> None:
    # ten configurations that score alike (1, 0), two more non-dominated, six dominated
    F = np.array([[1.0, 0.0]] * 10 + [[0.0, 1.0], [0.5, 0.5]]
                 + [[x, x] for x in (0.6, 0.7, 0.8, 0.9, 1.0, 1.1)])
    pop = Population.new(X=np.arange(len(F), dtype=float)[:, None], F=F)
    problem = Problem(n_var=1, n_obj=2, xl=0.0, xu=20.0)
    plain = SPEA2Survival(normalize=True).do(problem, pop, n_survive=8).get("F")
    assert (plain == [1.0, 0.0]).all(axis=1).sum() == 6  # SPEA2 alone: copies crowd it
    kept = _DistinctSurvival(normalize=True).do(problem, pop, n_survive=8)
    # one (1, 0), the first of them; then the best dominated ones, by SPEA2's fitness
    assert kept.get("X").ravel().tolist() == [0.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]
    few = _DistinctSurvival(normalize=True).do(problem, pop[:12], n_survive=8)
    assert sorted(map(tuple, few.get("F"))) == [(0.0, 1.0), (0.5, 0.5), (1.0, 0.0)]


def test_an_objective_that_never_varies_keeps_the_archive_ordered_by_fitness() -> None:
    # the second objective scores 5 everywhere: the first alone orders the points, so the
    # archive keeps the three best (pymoo's own normalisation divided by zero and kept 1, 10, 9)
    F = np.column_stack([np.arange(10.0, 0.0, -1.0), np.full(10, 5.0)])
    pop = Population.new(X=np.arange(10.0)[:, None], F=F)
    problem = Problem(n_var=1, n_obj=2, xl=0.0, xu=10.0)
    kept = _DistinctSurvival(normalize=True).do(problem, pop, n_survive=3)
    assert kept.get("F")[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert np.isfinite(kept.get("SPEA_F")).all()


@pytest.mark.parametrize(("settings", "sizes"), [
    (SearchSettings(budget=370), (37, 37, 74)),  # a tenth of the budget, a fifth to start
    (SearchSettings(budget=400, pop_size=50, first=0), (50, 50, 50)),  # pop given: PCS's way
    (SearchSettings(budget=100), (10, 10, 66)),  # but two thirds of a small budget
    (SearchSettings(budget=200), (20, 20, 70)),  # up to 70
    (SearchSettings(budget=55), (10, 10, 40)),  # and at least 40 points
    (SearchSettings(budget=5000), (70, 70, 1000)),
    (SearchSettings(budget=12), (10, 10, 12)),  # and at most the budget
    (SearchSettings.pcs(), (70, 105, 70)),  # PCS's settings, when asked for
    (SearchSettings(budget=50, pop_size=8), (8, 8, 8)),  # offspring: as the archive
    (SearchSettings(budget=100, first=30), (10, 10, 30)),  # the first sample as given
])
def test_sizes_follow_the_budget(settings: SearchSettings, sizes: tuple[int, int, int]
                                 ) -> None:
    assert (settings.archive, settings.offspring, settings.first_sample(4)) == sizes
    assert settings.first_sample(COVERED) == sizes[2]


@pytest.mark.parametrize("settings", [SearchSettings(), SearchSettings(budget=100),
                                      SearchSettings(budget=400, pop_size=50),
                                      SearchSettings.pcs(), SearchSettings(first=500)])
def test_settings_saved_and_read_back_search_the_same(settings: SearchSettings) -> None:
    """What run.json holds makes the same settings again (a resume needs it)."""
    again = SearchSettings(**json.loads(json.dumps(asdict(settings))))
    assert again == settings
    assert [again.first_sample(n) for n in (4, 13)] == [settings.first_sample(n)
                                                       for n in (4, 13)]


@pytest.mark.parametrize(("budget", "first"), [(100, 40), (200, 40), (370, 74), (30, 30)])
def test_a_larger_space_opens_with_a_smaller_sample(budget: int, first: int) -> None:
    """Beyond COVERED parameters a small budget breeds sooner: no two-thirds rule."""
    assert SearchSettings(budget=budget).first_sample(COVERED + 1) == first


@pytest.mark.parametrize("field", ["budget", "pop_size", "n_offsprings", "first"])
def test_negative_sizes_are_refused(field: str) -> None:
    with pytest.raises(ParetoSearchError, match=f"search {field} must be >= "):
        SearchSettings(**{field: -1})  # type: ignore[arg-type]


class _Recording(SerialRunner):
    """A serial runner that keeps every batch it was given."""

    def __init__(self, wl: Workload) -> None:
        super().__init__([wl], wl)
        self.batches: list[list[Mapping[str, Any]]] = []

    def map(self, task: Task, batch: Sequence[Mapping[str, Any]],
            on_result: OnResult | None = None) -> list[dict[str, float]]:
        self.batches.append(list(batch))
        return super().map(task, batch, on_result)


@pytest.mark.parametrize("budget", [47, 61])
def test_the_budget_is_run_exactly_space_filling_first(budget: int) -> None:
    wl = generate(150, load=0.9, seed=6)
    space, runner = SearchSpace.of("wfq"), _Recording(wl)
    settings = SearchSettings(budget=budget, pop_size=8, n_offsprings=10, first=16, seed=2)
    out = run_spea2(Task("wfq", load_profile("pcs-64")), space, OBJECTIVES, runner, settings)
    assert len(out.evaluations) == budget  # the last generation cut to fit
    assert [len(b) for b in runner.batches] == [16] + [10] * ((budget - 16) // 10) + (
        [(budget - 16) % 10] if (budget - 16) % 10 else [])
    # the first sample covers the unit cube more evenly than uniform random points do
    codes = np.array([space.encode(p) for p in runner.batches[0]])
    rng = np.random.default_rng(0)
    uniform = [qmc.discrepancy(rng.random(codes.shape)) for _ in range(200)]
    assert qmc.discrepancy(codes) < np.percentile(uniform, 5)
    # a quarter of each bred generation continues that sequence: fresh, distinct points
    first = {tuple(c) for c in np.round(codes, 9)}
    immigrants = [p for b in runner.batches[1:] for p in b[len(b) - len(b) // 4:]]
    assert len(immigrants) == sum(len(b) // 4 for b in runner.batches[1:]) > 0
    assert len({tuple(np.round(space.encode(p), 9)) for p in immigrants} - first) == len(
        immigrants)
