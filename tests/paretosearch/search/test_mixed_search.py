"""Choice parameters searched by mixed-variable mating; dimensions a workload cannot use dropped."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from paretosearch.cli import main
from paretosearch.objectives import parse_objectives
from paretosearch.runs.optuna_copy import OptunaCopy, load_study
from paretosearch.runs.store import RunStore
from paretosearch.search.evaluation import SearchSpace, Task, evaluate
from paretosearch.search.journal import param_key
from paretosearch.search.runners import SerialRunner
from paretosearch.search.spea2 import SearchOutcome, _algorithm, run_spea2
from paretosearch.service.api import PolicySearch, SearchConfig, SearchSettings
from policies import Domain
from simulator import InvalidPolicyParams, Workload, generate, load_profile
from simulator.inputs.generate import add_slos
from simulator.inputs.profile import ClusterProfile, NodeGroup
from simulator.inputs.scaling import ScalingTable, TypeSpeeds

JCT = parse_objectives(["jct:avg"])
MIXED = SearchSettings(budget=24, pop_size=8, n_offsprings=8, seed=1)
SLO_ONLY = {"slo_lease_multiple", "slo_reward", "reward_decay"}


def _two_gpus() -> ClusterProfile:
    return ClusterProfile(name="two-v100", description="", provenance="test",
                          node_groups=(NodeGroup(1, 2, "v100", 16.0),),
                          relative_speed={"v100": 1.0}, inter_node_factor=1.0,
                          restart_overhead_s=0.0, suspend_overhead_s=0.0)


def _fast_and_slow() -> Workload:
    """Four 1-GPU jobs of 18,000 s, then four of 3,600 s, all at t=0, on two GPUs.

    No schedule beats shortest first, (2 x 3,600 + 2 x 7,200 + 2 x 25,200 + 2 x 43,200) / 8 =
    23,400 s. Gavel's ``max_sum`` gives the GPUs to the fast jobs until they finish (its LP's
    optimum puts all time on them, shared among them) and then shares them among the slow
    ones: (4 x 7,200 + 4 x 43,200) / 8 = 25,200 s with perfect sharing. ``max_min`` shares time
    among all eight (near (4 x 14,400 + 4 x 43,200) / 8 = 28,800 s) and ``fifo`` runs the slow
    jobs first (near (2 x 18,000 + 2 x 36,000 + 2 x 39,600 + 2 x 43,200) / 8 = 34,200 s), so
    ``max_sum`` wins at every round length (finish-time fairness, which evens out each job's
    slowdown against its isolated share, is no shortest-first either).
    """
    scaling = ScalingTable.from_points({"fast": np.arange(1.0, 3.0), "slow": np.arange(1.0, 3.0)})
    frame = pd.DataFrame({"arrival_s": 0.0, "gpus": 1, "model": ["slow"] * 4 + ["fast"] * 4,
                          "service_s": [18000.0] * 4 + [36000.0] * 4})
    return replace(Workload.from_frame(frame, scaling=scaling, source="fast-and-slow"),
                   type_speed=TypeSpeeds(("v100",), np.array([[10.0], [1.0]])))


def _gavel_search(store: RunStore | None = None, stop_after: int | None = None
                  ) -> SearchOutcome:
    wl = _fast_and_slow()

    def stop(progress: Any) -> None:
        if stop_after is not None and progress.generation == stop_after:
            raise KeyboardInterrupt

    return run_spea2(Task("gavel", _two_gpus()), SearchSpace.of("gavel"), JCT,
                     SerialRunner([wl], wl), MIXED, store=store, on_generation=stop)


@pytest.fixture(scope="module")
def gavel_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SearchOutcome]:
    run = tmp_path_factory.mktemp("gavel")
    return run, _gavel_search(RunStore(run))


def test_choices_are_searched_and_decoded() -> None:
    assert Domain(kind="choice", choices=("a", "b")).searched
    assert not Domain(kind="choice", choices=("a",)).searched  # nothing to choose
    assert not Domain(kind="choice", choices=("a", "b"), searchable=False).searched
    assert Domain(kind="choice", choices=("a", "b")).describe() == "{a, b}"
    space = SearchSpace.of("hadar")
    assert space.names == ("round_s", "eta", "utility") and space.mixed
    assert not SearchSpace.of("wfq").mixed  # numbers only: the real-coded search
    point = space.decode({"round_s": 0.0, "eta": 1.0, "utility": 2})
    assert point == {"round_s": 60.0, "eta": pytest.approx(1e6), "utility": "ftf"}
    assert space.decode([1.0, 0.0, 1]) == {"round_s": 1800.0, "eta": 0.25,
                                           "utility": "makespan"}
    unisched = SearchSpace.of("unisched")
    assert "opportunistic" in unisched.names
    codes = {n: 1 if n == "opportunistic" else 0.5 for n in unisched.names}
    assert unisched.decode(codes)["opportunistic"] is False


def test_first_generation_covers_every_option() -> None:
    space = SearchSpace.of("hadar")
    algorithm = _algorithm(space, 2, SearchSettings(pop_size=12, n_offsprings=12, seed=0))
    batch = [space.decode(x) for x in algorithm.ask().get("X")]
    assert len(batch) == 12
    assert {p["utility"] for p in batch} == {"jct", "makespan", "ftf"}
    for p in batch:
        assert 60.0 <= p["round_s"] <= 1800.0 and 0.25 <= p["eta"] <= 1e6


@pytest.mark.parametrize("policy", ["hadar", "wfq"])  # mixed and real-coded spaces
def test_a_warm_start_opens_with_the_given_configs(policy: str) -> None:
    space = SearchSpace.of(policy)
    rng = np.random.default_rng(4)
    given = [space.decode(rng.random(len(space))) for _ in range(5)]
    if policy == "hadar":  # a choice code in [0, 1) decodes to option 0: spread them
        given = [{**p, "utility": u} for p, u in zip(given, ["jct", "ftf"] * 3, strict=False)]
    for p in given:
        assert space.decode(space.encode(p)) == pytest.approx(p)  # encode inverts decode
    settings = SearchSettings(pop_size=8, n_offsprings=8, seed=1)
    batch = [space.decode(x) for x in _algorithm(space, 2, settings, given + given[:2]).ask()
             .get("X")]
    assert len(batch) == 8
    assert batch[:5] == [pytest.approx(p) for p in given]  # duplicates dropped, then random
    assert batch[5:] == [space.decode(x) for x in _algorithm(space, 2, settings, given).ask()
                         .get("X")][5:]  # the fill comes from the seed


def test_mixed_search_converges_to_the_better_choice(gavel_run: tuple[Path, SearchOutcome]
                                                     ) -> None:
    _, out = gavel_run
    chosen = [p["objective"] for p, _ in out.evaluations]
    assert set(chosen) == {"max_min", "max_sum", "finish_time", "fifo", "makespan"}  # all tried
    assert {p["objective"] for p, _ in out.front} == {"max_sum"}
    # the fast jobs first, their rounds shared (the bounds by hand, module docstring)
    assert 23400.0 <= out.front[0][1]["jct:avg"] <= 25200.0
    bred = chosen[MIXED.archive:]  # selection favours it: it is bred more than any other
    assert bred.count("max_sum") > max(bred.count(o) for o in set(bred) - {"max_sum"})
    for params, record in out.evaluations:  # each option really simulated as decoded
        if params["objective"] != "max_sum":
            assert record["jct:avg"] > 25000.0


def test_resumed_mixed_search_equals_an_uninterrupted_one(
        gavel_run: tuple[Path, SearchOutcome], tmp_path: Path) -> None:
    whole, expected = gavel_run
    with pytest.raises(KeyboardInterrupt):
        _gavel_search(RunStore(tmp_path), stop_after=1)
    assert (tmp_path / "evaluations.jsonl").exists()
    resumed = _gavel_search(RunStore(tmp_path))
    assert [(p, r["jct:avg"]) for p, r in resumed.front] == [
        (p, r["jct:avg"]) for p, r in expected.front]
    assert resumed.hypervolume == expected.hypervolume
    keys = [json.loads(line)["key"]
            for line in (tmp_path / "evaluations.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == len(expected.evaluations)  # nothing run twice
    assert keys == [param_key(p) for p, _ in expected.evaluations]
    assert keys == list(RunStore(whole).read_journal())


def test_slo_dimensions_cannot_change_results_without_slo_jobs() -> None:
    # the claim behind dropping them, checked against the simulator
    wl, prof = generate(12, gpus=16, seed=3, median_service_s=600.0), load_profile(
        "pcs-testbed-16")
    task = Task("unisched", prof)
    plain = evaluate(task, {}, [wl], wl)
    odd = evaluate(task, {"slo_reward": 3.0, "reward_decay": 3.5, "slo_lease_multiple": 9},
                   [wl], wl)
    assert {k: v for k, v in odd.items() if k != "wall_s" and not math.isnan(v)} == {
        k: v for k, v in plain.items() if k != "wall_s" and not math.isnan(v)}
    space = SearchSpace.of("unisched", workload=wl, profile=prof)
    assert set(space.dropped) == SLO_ONLY and not SLO_ONLY & set(space.names)
    assert set(space.dropped.values()) == {"the workload has no SLO jobs"}
    with_slos = add_slos(wl, "MIX1", seed=1)
    assert SearchSpace.of("unisched", workload=with_slos, profile=prof).dropped == {}
    held = SearchSpace.of("unisched", {"slo_reward": 5.0}, workload=wl, profile=prof)
    assert "slo_reward" not in held.dropped  # fixed by the caller, not dropped


def test_wfq_hetero_drops_weights_of_missing_gpu_types() -> None:
    wl = generate(10, seed=1)
    one = SearchSpace.of("wfq-hetero", workload=wl, profile=load_profile("pcs-64"))
    assert one.names == ("T", "W_1", "round_s")
    assert one.dropped == {"W_2": "the cluster has no second GPU type (only generic)",
                           "W_3": "the cluster has no third GPU type (only generic)"}
    three = SearchSpace.of("wfq-hetero", workload=wl, profile=load_profile("gavel-hetero-60"))
    assert three.dropped == {} and "W_3" in three.names
    with pytest.raises(InvalidPolicyParams,
                       match=r"nothing left to search; W_2 dropped: the cluster has no second"):
        SearchSpace.of("wfq-hetero", {"T": 1.0, "W_1": 0.5, "round_s": 360.0}, workload=wl,
                       profile=load_profile("pcs-64"))


def test_dropped_dimensions_reach_run_front_and_cli(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    wl = generate(16, gpus=16, seed=5, median_service_s=600.0)
    settings = SearchSettings(budget=4, pop_size=4, n_offsprings=4)
    search = PolicySearch(wl, SearchConfig(profile="pcs-testbed-16", policy="unisched",
                                           settings=settings), store=tmp_path)
    assert set(search.space.dropped) == SLO_ONLY
    search.SetPreference("jct:avg", "makespan:avg")
    front = search.run()
    assert all(not SLO_ONLY & set(e.params) for e in front)
    doc = json.loads((tmp_path / "front.json").read_text())
    assert doc["dropped"] == dict.fromkeys(sorted(SLO_ONLY), "the workload has no SLO jobs")
    assert RunStore(tmp_path).read_spec().dropped == doc["dropped"]
    assert main(["front", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name in SLO_ONLY:
        assert f"{name}: dropped from the search (the workload has no SLO jobs)" in out
    assert "opportunistic" in out  # the searched choice is a column of the table


def test_optuna_mirror_records_choices(gavel_run: tuple[Path, SearchOutcome],
                                       tmp_path: Path) -> None:
    from optuna.distributions import CategoricalDistribution

    _, out = gavel_run
    log = tmp_path / "optuna.log"
    copy = OptunaCopy(log, JCT, SearchSpace.of("gavel"), "mixed")
    assert copy.add(out.evaluations, {"policy": "gavel"}) == len(out.evaluations)
    study = load_study(log, "mixed")
    assert study.user_attrs == {"policy": "gavel"}
    assert [t.params["objective"] for t in study.trials] == [
        p["objective"] for p, _ in out.evaluations]
    assert isinstance(study.trials[0].distributions["objective"], CategoricalDistribution)
    assert study.best_trial.params["objective"] == "max_sum"
    # killed while copying: a last line cut short and the lock left behind; the next run's
    # copy goes on from the trials whole on disk
    whole = log.read_bytes()
    log.write_bytes(whole + whole.splitlines(keepends=True)[-1][:40])
    log.with_name("optuna.log.lock").symlink_to(log)
    again = OptunaCopy(log, JCT, SearchSpace.of("gavel"), "mixed")
    assert len(again.study.trials) == len(out.evaluations)
    more = [(p, {**r, "jct:avg": r["jct:avg"] + 1}) for p, r in out.evaluations[:2]]
    assert again.add([*out.evaluations, *more], {"policy": "gavel"}) == len(out.evaluations) + 2
    assert [t.values for t in load_study(log, "mixed").trials[-2:]] == [
        [r["jct:avg"]] for _, r in more]
