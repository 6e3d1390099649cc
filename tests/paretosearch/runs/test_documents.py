"""The run documents read typed: ``run.json`` (:class:`SearchDefinition`, as this and earlier
versions wrote it) and ``chosen.json`` (:class:`ChosenConfig`, one ``deployed`` rule)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paretosearch.config import SearchConfig
from paretosearch.definition import SearchDefinition
from paretosearch.runs.records import ChosenConfig, config_hash
from paretosearch.runs.store import RunStore
from paretosearch.samples import samples
from paretosearch.settings import SearchSettings
from simulator.errors import ParetoSearchError

EARLIER = {  # a run.json of the version before definitions kept their config
    "policy": "themis", "profile": "pcs-testbed-16",
    "cluster": {"profile": "pcs-testbed-16", "gpus_by_type": {"V100": 16}},
    "fixed": {}, "objectives": ["jct:p99", "wait:avg"],
    "settings": {"budget": 6, "pop_size": 3, "n_offsprings": 0, "seed": 4,
                 "mode": "generational", "first": 0},
    "space": ["lease_s"], "dropped": {}, "train": ["a"], "test": ["b"],
    "train_digests": ["0123"], "versions": {"paretosearch": "0.1", "python": "3.12"}}


def test_a_definition_reads_back_equal_and_keeps_its_config(tmp_path: Path) -> None:
    config = SearchConfig(policy="wfq", profile="pcs-testbed-16", jobs=40, fixed={"W": 2.0},
                          settings=SearchSettings(budget=6, seed=3))
    train, test = samples(config, None)
    written = SearchDefinition.of(config, ("T",), {"x": "why"}, train, test)
    RunStore(tmp_path).write_spec(written)
    read = RunStore(tmp_path).read_spec()
    assert read == written and read.train_digests == tuple(w.digest() for w in train)
    assert read.search_config("run.json") == config
    assert read != SearchDefinition.of(config, ("T",), {"x": "why"}, test, train)


def test_an_earlier_run_json_loads_and_says_what_it_lacks(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps(EARLIER))
    spec = RunStore(tmp_path).read_spec()
    assert (spec.policy, spec.objectives, spec.settings) == (
        "themis", ("jct:p99", "wait:avg"), SearchSettings(budget=6, pop_size=3, seed=4))
    assert spec.config is None and spec.space == ("lease_s",)
    with pytest.raises(ParetoSearchError, match=r"run\.json, column 'config': missing"):
        spec.search_config(str(tmp_path / "run.json"))
    oldest = {k: EARLIER[k] for k in ("policy", "profile", "fixed", "objectives")}
    (tmp_path / "run.json").write_text(json.dumps(oldest))
    assert RunStore(tmp_path).read_spec().settings is None
    (tmp_path / "run.json").write_text(json.dumps({**EARLIER, "settings": {"budget": 0}}))
    with pytest.raises(ParetoSearchError, match=r"run\.json, column 'settings'.*budget"):
        RunStore(tmp_path).read_spec()


@pytest.mark.parametrize(("fitted", "deployed"), [
    (None, {"W": 2.0}), ({}, {"W": 2.0}), ({"W": 2.0, "T": 1.0}, {"W": 2.0, "T": 1.0})])
def test_one_deployed_rule_fitted_where_it_holds_any_else_params(
        fitted: dict[str, float] | None, deployed: dict[str, float]) -> None:
    doc = {"policy": "wfq", "params": {"W": 2.0}, "fitted": fitted}
    chosen = ChosenConfig.from_dict(doc, "chosen.json")
    assert chosen.deployed == deployed and chosen.config_sha256 == config_hash(doc)


@pytest.mark.parametrize(("doc", "field"), [
    ({"params": {}}, "policy"), ({"policy": "wfq", "params": [1]}, "params"),
    ({"policy": "wfq", "params": {}, "fitted": "x"}, "fitted"), ([], "policy")])
def test_a_chosen_config_that_is_not_one_is_named(doc: object, field: str) -> None:
    with pytest.raises(ParetoSearchError, match=rf"chosen\.json, column '{field}': expected"):
        ChosenConfig.from_dict(doc, "chosen.json")
