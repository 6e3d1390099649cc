"""``benchmarks/reproduce/pcs_fig7.py --headlines jct``: Fig. 7's avg JCT / AFS's without
predictions is the full run's, since a prediction is a playout that never changes the
schedule (checked here on a prefix of 0e4a51, every policy of Fig. 7, to the last bit)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.helpers.benchmarks import reproduce_script

ROOT = Path(__file__).resolve().parents[2]
JOBS = 200
"""A prefix that keeps seven runs with predictions to seconds once compiled."""


@pytest.fixture(scope="module")
def fig7() -> ModuleType:
    return reproduce_script("pcs_fig7")


@pytest.fixture(scope="module")
def runs(fig7: ModuleType) -> dict[bool, Any]:
    """The seven policies on the prefix, with predictions (True) and without (False)."""
    return {predict: fig7.run_traces(["0e4a51"], JOBS, 0, 0, predict)["0e4a51"]
            for predict in (True, False)}


def test_jct_without_predictions_is_the_full_runs(runs: dict[bool, Any]) -> None:
    full, jct_only = runs[True], runs[False]
    assert list(jct_only) == list(full)
    for name in full:
        assert jct_only[name]["jct"] == full[name]["jct"], name
        assert jct_only[name]["jobs"] == full[name]["jobs"] == JOBS
        # the full run has errors; the JCT-only run has none to report
        assert np.isfinite(full[name]["avg_err"]) and np.isfinite(full[name]["p99_err"]), name
        assert np.isnan(jct_only[name]["avg_err"]) and np.isnan(jct_only[name]["p99_err"]), name
    assert full["FIFO"]["avg_err"] == pytest.approx(0.0, abs=1e-9)  # FIFO predicts exactly
    # the prefix is contended, so the check is not vacuous: the policies' JCTs differ
    assert len({round(r["jct"], 6) for r in full.values()}) == len(full)


def test_runs_on_processes_give_the_same_figures(fig7: ModuleType,
                                                  runs: dict[bool, Any]) -> None:
    pooled = fig7.run_traces(["0e4a51"], JOBS, 0, 0, True, processes=2)["0e4a51"]
    assert list(pooled) == list(runs[True])
    for name, fig in pooled.items():
        assert {k: v for k, v in fig.items() if k != "cpu_s"} == \
            {k: v for k, v in runs[True][name].items() if k != "cpu_s"}, name


def test_jct_table_is_the_one_printed(fig7: ModuleType, runs: dict[bool, Any],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    fig7.main(["--jobs", str(JOBS), "--workloads", "1", "--headlines", "jct",
               "--processes", "2"])
    out = capsys.readouterr().out
    # one table, avg JCT / AFS's alone, its set-up naming the missing predictions
    assert out.count("## ") == 1
    assert "## avg JCT / AFS's  (first 200 jobs of each trace, 64 GPUs, no prediction" in out
    rows = {line.split()[2]: line.split() for line in out.splitlines()
            if line.startswith("   1 0e4a51")}
    full = runs[True]
    assert list(rows) == list(full)
    for name, cells in rows.items():
        assert float(cells[4]) == pytest.approx(full[name]["jct"] / full["AFS"]["jct"],
                                                abs=5e-4), name


def test_jct_span_table(fig7: ModuleType) -> None:
    """``--span ... --headlines jct``: the JCT span alone, each paper point in or out of it by
    Fig. 7's numbers (6c71a0: PCS-JCT 1.467, -bal 2.021, -pred 4.846), no nearest-entry table
    (it needs all three headlines)."""
    figures = np.array([[1.5, np.nan, np.nan], [4.0, np.nan, np.nan]])
    out = fig7.span_tables({4: {"figures": figures}}, "set-up", headlines=1)
    assert out.count("## ") == 1 and out.startswith("## avg JCT / AFS's: span")
    row = out.splitlines()[-1].split()
    assert row[:5] == ["4", "6c71a0", "2", "1.500", "4.000"]
    assert row[5:] == ["1.467", "out", "2.021", "in", "4.846", "out"]


def test_fastest_entries_are_the_fronts_lowest_sample_jct(fig7: ModuleType) -> None:
    """``--span ... --fastest K`` runs the K entries of a front with the lowest avg JCT on
    the search's sample, fastest first; 0 keeps the whole front as it came."""
    front = [({"w": i}, {"jct:avg": jct, "pred_err:avg": 1.0 / jct})
             for i, jct in enumerate([30.0, 10.0, 50.0, 20.0, 40.0])]
    assert [p["w"] for p, _ in fig7.fastest(front, 2)] == [1, 3]
    assert [p["w"] for p, _ in fig7.fastest(front, 9)] == [1, 3, 0, 4, 2]
    assert fig7.fastest(front, 0) == front
    with pytest.raises(SystemExit):
        fig7.main(["--span", "0", "--fastest", "-1"])
