"""The preference API and the search CLI, with a real run directory."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from paretosearch.api import PolicySearch, SearchSettings, split_workload
from paretosearch.cli import main
from simulator import InvalidObjective, InvalidPolicyParams, ParetoSearchError, generate

SMALL = SearchSettings(budget=32, pop_size=12, n_offsprings=10, seed=2)


def test_preference_front_and_choice(tmp_path: Path) -> None:
    search = PolicySearch(settings=SMALL, run_dir=tmp_path, jobs=200)
    with pytest.raises(ParetoSearchError, match="SetPreference"):
        search.run()
    search.SetPreference(("jct", "avg"), "pred_err:p99")
    front = search.run()
    assert front == search.get_pareto_front()
    values = [tuple(e["objectives"].values()) for e in front]
    assert len(set(values)) == len(values)  # no two entries with the same objectives
    for a in values:  # nobody on the front dominates anybody else on it
        assert not any(b != a and all(x <= y for x, y in zip(b, a, strict=True))
                       for b in values)
    assert all(e["test_metrics"]["jct:avg"] > 0 for e in front)
    published = json.loads((tmp_path / "front.json").read_text())
    assert [e["params"] for e in published["front"]] == [e["params"] for e in front]
    assert len(pd.read_parquet(tmp_path / "records.parquet")) == 32
    chosen = search.SetConfig(0)
    assert json.loads((tmp_path / "chosen.json").read_text()) == chosen
    with pytest.raises(ParetoSearchError, match="out of range"):
        search.select(len(front))


@pytest.mark.parametrize(("argv", "message"), [
    (["--objective", "jct:p200"], "unknown measure"),
    (["--objective", "speed"], "unknown metric"),
    (["--set", "tau=1"], "no parameter 'tau'"),
    (["--set", "W=9"], "parameter 'W'"),
])
def test_bad_search_arguments_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            argv: list[str], message: str) -> None:
    run = tmp_path / "run"
    assert main(["search", "--generate", "100", "--workers", "0", "--run-dir", str(run),
                 *argv]) == 2
    assert message in capsys.readouterr().err
    assert not run.exists()


def test_errors_have_the_right_types() -> None:
    with pytest.raises(InvalidObjective):
        PolicySearch(settings=SMALL, jobs=50).SetPreference()
    with pytest.raises(InvalidPolicyParams):
        PolicySearch(settings=SMALL, jobs=50, fixed={"nope": 1})


def test_cli_search_and_front(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["search", "--generate", "150", "--budget", "24", "--pop-size", "8",
                 "--offspring", "8", "--workers", "0", "--run-dir", str(run)]) == 0
    assert main(["front", str(run)]) == 0
    out = capsys.readouterr().out
    assert "Pareto front" in out and "jct:avg" in out
    assert main(["front", str(tmp_path / "nope")]) == 2


def test_split_rebases_the_test_half() -> None:
    train, test = split_workload(generate(100, seed=1))
    assert len(train) == len(test) == 50 and test.arrival_s[0] == 0.0
