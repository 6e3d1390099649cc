"""The run documents read typed: ``run.json`` (:class:`SearchDefinition`, as this and earlier
versions wrote it) and ``chosen.json`` (:class:`ChosenConfig`, one ``deployed`` rule)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from paretosearch.config import SearchConfig
from paretosearch.definition import SearchDefinition
from paretosearch.runs.records import ChosenConfig, FrontDocument, FrontEntry, config_hash
from paretosearch.runs.retune_summary import RetuneStart, RetuneSummary
from paretosearch.runs.shapes import check_shape, shape_of
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
    # its shape is the dataclass's: a settings field of another type is named as a field
    (tmp_path / "run.json").write_text(json.dumps({**EARLIER, "settings": {"budget": "x"}}))
    with pytest.raises(ParetoSearchError, match=r"column 'settings.budget': expected an integer"):
        RunStore(tmp_path).read_spec()


def test_document_shapes_are_derived_from_their_dataclasses() -> None:
    retune = shape_of(RetuneSummary)
    assert retune["evaluations"] == {"run": int, "from_cache": int}  # nested on disk
    assert set(shape_of(RetuneStart)) <= set(retune)  # a summary holds its start, inline
    assert {"from", "configs", "seeds?"} == set(retune["warm_start"])  # named as on disk
    assert {f.name for f in fields(FrontEntry)} == {k.rstrip("?") for k in shape_of(
        FrontDocument)["front"][0]}
    with pytest.raises(ParetoSearchError, match=r"doc, column 'front\[0\].params.T': expected"):
        check_shape({"front": [{"params": {"T": [1]}, "objectives": {}, "metrics": {}}]},
                    shape_of(FrontDocument), "doc")


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
