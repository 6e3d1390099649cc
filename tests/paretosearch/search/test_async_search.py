"""The asynchronous (steady-state) search, `SearchSettings(mode="async")`: reproducible from its
journal, resumable, on a real Dask cluster (paretosearch/search.py, `_SteadyState`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from paretosearch.runs.store import RunStore
from paretosearch.search.cache import EvaluationCache
from paretosearch.search.runners import SerialRunner
from paretosearch.search.spea2 import run_spea2
from paretosearch.service.api import PolicySearch, SearchConfig, SearchSettings
from simulator.errors import ParetoSearchError
from tests.helpers.runs import WorkerKiller

ASYNC = SearchSettings(budget=40, pop_size=10, n_offsprings=10, seed=3, mode="async")


def _search(run_dir: Path | None, **kwargs: Any) -> PolicySearch:
    config = SearchConfig(settings=kwargs.pop("settings", ASYNC), jobs=150)
    search = PolicySearch(config=config, store=run_dir, workers=0, **kwargs)
    search.SetPreference("jct:avg", "pred_err:avg")
    return search


def _key(front: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(dict(e.params), sort_keys=True) for e in front)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_the_mode_is_checked() -> None:
    with pytest.raises(ParetoSearchError, match="search mode 'steady'"):
        SearchSettings(mode="steady")


def test_async_runs_the_budget_and_replays_from_its_journal(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    front = _search(whole).run()
    journal, started = _lines(whole / "evaluations.jsonl"), _lines(whole / "started.jsonl")
    assert len(journal) == len(started) == ASYNC.budget  # exactly the budget
    values = [tuple(e.objectives.values()) for e in front]
    for a in values:  # nobody on the front dominates anybody else on it
        assert not any(b != a and all(x <= y for x, y in zip(b, a, strict=True))
                       for b in values)
    # the same seed and the same finishing order (serial): the same candidates, the same front
    again = _search(tmp_path / "again").run()
    assert _lines(tmp_path / "again" / "started.jsonl") == started and _key(again) == _key(front)
    # killed with 17 finished and the 18th running: resumed, it restarts the 18th and ends
    # where the whole run did, evaluating nothing twice
    cut = tmp_path / "cut"
    cut.mkdir()
    shutil.copy(whole / "run.json", cut / "run.json")
    (cut / "evaluations.jsonl").write_text("\n".join(journal[:17]) + "\n")
    (cut / "started.jsonl").write_text("\n".join(started[:18]) + "\n" + started[18][:9])
    resumed = _search(cut).run(resume=True)
    assert _key(resumed) == _key(front)
    # the cut-short 19th line never started: it is bred again, the same
    assert RunStore(cut).read_started() == RunStore(whole).read_started()
    keys = [json.loads(line)["key"] for line in _lines(cut / "evaluations.jsonl")]
    assert len(keys) == len(set(keys)) == ASYNC.budget


def test_more_slots_breed_from_an_older_archive_and_still_replay(tmp_path: Path) -> None:
    """Four slots: four candidates running at once, each bred from the archive as it was when
    a slot freed up (what four workers do). A replay of the finished run starts nothing."""
    search = _search(tmp_path / "four")
    search.store.write_spec(search.definition())
    four = SerialRunner(search.train, search.train[0], slots=4)
    out = run_spea2(search.task, search.space, search.objectives, four, ASYNC,
                    store=search.store)
    runs = _lines(tmp_path / "four" / "started.jsonl")
    assert len(runs) == ASYNC.budget
    assert [json.loads(r)["after"] for r in runs[:6]] == [0, 0, 0, 0, 1, 2]
    replay = run_spea2(search.task, search.space, search.objectives, four, ASYNC,
                       store=search.store)
    assert [p for p, _ in replay.front] == [p for p, _ in out.front]
    assert _lines(tmp_path / "four" / "started.jsonl") == runs


def test_async_answers_from_the_cache(tmp_path: Path) -> None:
    cache = EvaluationCache(tmp_path / "cache.sqlite")
    first = _search(tmp_path / "a", cache=cache).run()
    stored, hits = len(cache), cache.hits
    second = _search(tmp_path / "b", cache=cache).run()
    assert _key(first) == _key(second)
    assert len(cache) == stored and cache.hits - hits >= ASYNC.budget  # nothing ran again


@pytest.mark.dask
def test_async_on_a_real_dask_cluster(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        search = _search(tmp_path / "dask", client=client)
        front = search.run()
    journal = _lines(tmp_path / "dask" / "evaluations.jsonl")
    assert len(journal) == ASYNC.budget
    # both workers got work at once, and one more each waiting at the scheduler
    assert [json.loads(r)["after"] for r in _lines(tmp_path / "dask" / "started.jsonl")][:5] \
        == [0, 0, 0, 0, 1]
    # replayed from its journal (whatever order Dask finished them in): the same front
    replay = tmp_path / "replay"
    replay.mkdir()
    for name in ("run.json", "evaluations.jsonl", "started.jsonl"):
        shutil.copy(tmp_path / "dask" / name, replay / name)
    assert _key(_search(replay).run(resume=True)) == _key(front)
    assert len(_lines(replay / "evaluations.jsonl")) == ASYNC.budget  # nothing ran again


@pytest.mark.dask
@pytest.mark.slow
def test_async_loses_nothing_to_a_killed_worker(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        search = _search(tmp_path / "run", client=client)
        kill_one = WorkerKiller(client)
        front = search.run(kill_one)
    assert kill_one.killed
    keys = [json.loads(line)["key"] for line in _lines(tmp_path / "run" / "evaluations.jsonl")]
    assert len(keys) == len(set(keys)) == ASYNC.budget  # nothing lost, nothing run twice
    replay = tmp_path / "replay"
    replay.mkdir()
    for name in ("run.json", "evaluations.jsonl", "started.jsonl"):
        shutil.copy(tmp_path / "run" / name, replay / name)
    assert _key(_search(replay).run(resume=True)) == _key(front)
