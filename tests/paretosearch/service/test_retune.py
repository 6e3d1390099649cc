"""The nightly retune: windows, versioned runs, warm starts, the cache, drift, the lock and
exit codes (its faults: tests/paretosearch/service/test_retune_faults.py)."""

from __future__ import annotations

import fcntl
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paretosearch.cli import main
from paretosearch.objectives import parse_objectives
from paretosearch.runs.records import FrontEntry
from paretosearch.runs.retune_summary import ObjectiveDrift, WarmStart
from paretosearch.runs.store import RunStore
from paretosearch.service.retune import (
    Exit,
    RetuneSpec,
    TooFewJobs,
    _warm_seeds,
    drift,
    read_window,
    retune,
)
from simulator.errors import ParetoSearchError
from tests.helpers.data import ROOT
from tests.helpers.runs import LINES, front_of, journal, write_spec, write_trace


@pytest.mark.parametrize(("change", "message"), [
    ({"colour": "red"}, "'colour': unknown field"),
    ({"window": {"seconds": -1}}, "'window.seconds': must be a number >= 0"),
    ({"window": {"min_jobs": 1}}, "'window.min_jobs': must be an integer >= 2"),
    ({"window": {"max_jobs": "many"}}, "'window.max_jobs': must be an integer"),
    ({"window": {"min_jobs": 500, "max_jobs": 400}},
     r"'window.max_jobs': must be >= window.min_jobs \(500\)"),
    # checked as SearchSettings checks them (the bounds are declared once)
    ({"search": {"budget": 0}}, r"'search.budget': search budget must be >= 1 \(got 0\)$"),
    ({"search": {"pop_size": 2.5}}, "'search.pop_size': must be an integer"),
    ({"search": {"offspring": -1}}, "'search.offspring': search n_offsprings must be >= 0"),
    ({"search": {"seed": True}}, "'search.seed': must be an integer"),
    ({"search": {"mode": "eager"}}, "'search.mode': search mode 'eager': use one of"),
    ({"policy": "lottery"}, "'policy'.*unknown policy"),
    ({"policy": None}, "'policy': must be text"),  # null only where the default is null
    ({"fixed": {"Q": 1}}, "'fixed'.*has no parameter 'Q'"),
    ({"fixed": {"W": "steep"}}, "'fixed'.*W"),
    ({"profile": "nowhere-64"}, "'profile'.*nowhere-64"),
    ({"objectives": ["speed:avg"]}, "'objectives'.*unknown metric"),
    ({"slo_mix": "MIX9"}, "'slo_mix'.*known mixes"),
    ({"warm_start": "yes"}, "'warm_start': must be true or false"),
    ({"out": None}, "'out': is required"),
])
def test_spec_errors_name_the_field_and_value(tmp_path: Path, change: dict[str, Any],
                                              message: str) -> None:
    with pytest.raises(ParetoSearchError, match=message) as err:
        RetuneSpec.load(write_spec(tmp_path, **change))
    assert str(tmp_path / "retune.yaml") in str(err.value)


def test_the_deploy_example_spec_loads() -> None:
    spec = RetuneSpec.load(ROOT / "deploy" / "retune.yaml")
    assert (spec.config.policy, spec.min_jobs, spec.max_jobs, spec.window_s) == (
        "wfq", 500, 4000, 604800.0)
    assert spec.out == ROOT / "deploy" / "/var/lib/paretosearch"
    assert (spec.workers, spec.workers_named) == (2, False)  # cluster files may be used


def test_the_window_is_the_newest_jobs_of_all_files(tmp_path: Path) -> None:
    write_trace(tmp_path / "day1.csv", 700)
    # the next file repeats 100 jobs of the first (a re-export): kept once
    write_trace(tmp_path / "day2.csv", 1200, first=600)
    spec = RetuneSpec.load(write_spec(tmp_path, trace="day*.csv",
                                      window={"seconds": 86400 * 3, "min_jobs": 10}))
    window = read_window(spec)
    frame = window.workload.to_frame()
    submit = [float(line.split(",")[1]) for line in LINES[1:1201]]
    expected = [t for t in submit if t >= submit[-1] - 86400 * 3]
    assert window.jobs_in_trace == 1200
    assert len(frame) == len(expected) and window.end_s == submit[-1]
    assert window.start_s == expected[0] and frame["arrival_s"].iloc[0] == 0.0
    assert frame["arrival_s"].iloc[-1] == pytest.approx(expected[-1] - expected[0])
    capped = read_window(RetuneSpec.load(write_spec(
        tmp_path, trace="day*.csv", window={"seconds": 1e9, "min_jobs": 10, "max_jobs": 75})))
    assert len(capped.workload) == 75 and capped.end_s == submit[-1]
    with pytest.raises(TooFewJobs, match="min_jobs is 5000"):
        read_window(RetuneSpec.load(write_spec(tmp_path, trace="day*.csv",
                                               window={"min_jobs": 5000})))


def test_a_missing_trace_stops_the_retune_before_it_writes_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, trace="nightly-*.csv")
    assert main(["retune", "--spec", str(spec)]) == Exit.BAD_INPUT
    assert "nightly-*.csv: no trace file matches" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # no lock file, no folder


def test_jobs_of_different_files_that_reuse_ids_are_all_kept(tmp_path: Path) -> None:
    write_trace(tmp_path / "day1.csv", 300)
    rows = LINES[301:601]  # the next 300 jobs, numbered from 0 again (a per-file app_id)
    renumbered = [f"{i},{row.split(',', 1)[1]}" for i, row in enumerate(rows)]
    (tmp_path / "day2.csv").write_text("\n".join([LINES[0], *renumbered]) + "\n")
    spec = RetuneSpec.load(write_spec(tmp_path, trace="day*.csv",
                                      window={"seconds": 1e9, "min_jobs": 10}))
    assert read_window(spec).jobs_in_trace == 600


def test_a_relative_spec_path_publishes_new_runs_and_never_rewrites_current(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    write_spec(tmp_path, warm_start=False)
    monkeypatch.chdir(tmp_path)
    first = retune(RetuneSpec.load("retune.yaml"))
    again = retune(RetuneSpec.load("retune.yaml"))  # same window: a new run, from the cache
    assert not again.summary.start.resumed and again.run != first.run
    assert again.summary.previous == str(first.run.resolve())
    # retune.json holds the summary as returned, and reads back as the same record
    assert json.loads((first.run / "retune.json").read_text()) == json.loads(
        json.dumps(first.summary.to_dict()))
    assert RunStore(first.run).read_retune() == first.summary


# --- drift ------------------------------------------------------------------------------------

def test_drift_finds_the_dominating_configs_and_the_gains() -> None:
    objectives = parse_objectives(["jct:avg", "utilization:avg"])  # utilization is maximised
    front = [FrontEntry({}, m, m) for m in (
        {"jct:avg": 90.0, "utilization:avg": 0.5},    # better jct, worse util
        {"jct:avg": 80.0, "utilization:avg": 0.8},    # dominates: +20 %, +33 %
        {"jct:avg": 50.0, "utilization:avg": 0.61},   # dominates: +50 %, +1.7 %
        {"jct:avg": 100.0, "utilization:avg": 0.6})]  # equal: does not dominate
    d = drift(front, {"jct:avg": 100.0, "utilization:avg": 0.6}, objectives)
    assert d.dominated and d.dominated_by == (1, 2)
    assert d.best == 1  # its smallest gain (20 %) beats #2's (1.7 %)
    assert d.objectives["jct:avg"].gain == pytest.approx(0.2)
    assert d.objectives["utilization:avg"].gain == pytest.approx(1 / 3)
    clean = drift(front, {"jct:avg": 40.0, "utilization:avg": 0.9}, objectives)
    assert not clean.dominated and clean.best is None
    assert clean.objectives["jct:avg"] == ObjectiveDrift(40.0)  # no switch, no gain


# --- nightly runs -----------------------------------------------------------------------------

def test_nightly_runs_publish_versions_warm_start_and_report_drift(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    spec = RetuneSpec.load(write_spec(tmp_path))
    first = retune(spec)
    out = tmp_path / "out"
    assert first.exit == Exit.PUBLISHED and (out / "current").resolve() == first.run
    assert first.summary.start.warm_start == WarmStart(None, 0)
    for name in ("report.md", "report.png", "report.html", "retune.json", "front.json",
                 "records.parquet"):
        assert (first.run / name).stat().st_size > 0
    # the operator puts the knee of the first front in production
    assert main(["select", str(out / "current"), "--knee",
                 "--out", str(tmp_path / "production.json")]) == 0
    chosen = json.loads((tmp_path / "production.json").read_text())
    assert chosen["fitted"]["thresholds"][-1] is None  # deployed classes, infinity last

    kept = front_of(first.run), (first.run / "report.md").read_text()
    write_trace(tmp_path / "trace.csv", 1100)  # the trace grew overnight
    spec = RetuneSpec.load(write_spec(tmp_path, production="production.json"))
    second = retune(spec)
    assert second.run != first.run and (out / "current").resolve() == second.run
    assert (front_of(first.run), (first.run / "report.md").read_text()) == kept  # untouched
    # the first generation: the previous front, then more of the previous run's evaluations
    # by rank (it made more than a population's worth), one per objective vector, none random
    pop = spec.config.settings.archive
    assert second.summary.start.warm_start == WarmStart(str(first.run), pop)
    opening = [row["params"] for row in journal(second.run)[:pop]]
    before = journal(first.run)

    def same(a: dict[str, float], b: dict[str, float]) -> bool:
        return all(math.isclose(a[k], v, rel_tol=1e-9) for k, v in b.items())

    def scored(params: dict[str, float]) -> list[tuple[float, ...]]:
        return [tuple(row["record"][label] for label in ("jct:avg", "pred_err:avg"))
                for row in before if same(row["params"], params)]

    assert all(any(same(p, seed) for p in opening) for seed, _ in front_of(first.run))
    vectors = [scored(p) for p in opening]
    assert all(len(v) == 1 for v in vectors)  # each from the previous run
    assert len({v[0] for v in vectors}) == pop  # no two scored alike
    # and the published front holds no two configurations that score alike
    assert len({tuple(o.values()) for _, o in front_of(first.run)}) == len(front_of(first.run))
    prod = second.summary.production
    assert prod is not None and prod.config == chosen["fitted"]
    # where it came from: the file itself and the hash select gave the config, not links
    assert chosen["run"] == str(first.run)
    assert (prod.source, prod.config_sha256) == (
        str((tmp_path / "production.json").resolve()), chosen["config_sha256"])
    front = json.loads((second.run / "front.json").read_text())["front"]
    labels = ("jct:avg", "pred_err:avg")  # both minimised
    for sample, key, d in (("train", "metrics", prod.drift_train),
                           ("test", "test_metrics", prod.drift_test)):
        values = getattr(prod, sample)
        mine = tuple(i for i, e in enumerate(front)  # dominance, by hand
                     if all(e[key][lab] <= values[lab] for lab in labels)
                     and any(e[key][lab] < values[lab] for lab in labels))
        assert d.dominated_by == mine
    both = prod.drift_train.dominated and prod.drift_test.dominated
    assert second.exit == (Exit.DRIFT if both else Exit.PUBLISHED)
    report = (second.run / "report.md").read_text()
    assert "production.json" in report and f"from {first.run}" in report
    page = (second.run / "report.html").read_text()  # the interactive report: drift too
    assert "<h2>Production config</h2>" in page and "production.json" in page
    assert "Production config" not in (first.run / "report.html").read_text()  # none then
    # 'paretosearch report' reads retune.json again: the same page; a damaged one is named
    page_path = second.run / "report.html"
    page_path.unlink()
    assert main(["report", str(second.run)]) == 0 and "production.json" in page_path.read_text()
    doc = json.loads((second.run / "retune.json").read_text())
    doc["production"]["drift_test"]["dominated_by"] = ["x"]
    (second.run / "retune.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["report", str(second.run)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "retune.json" in err and "production.drift_test.dominated_by[0]" in err, err


def test_a_warm_start_seeds_one_configuration_per_objective_vector(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    first = retune(RetuneSpec.load(write_spec(tmp_path)))
    records = pd.read_parquet(first.run / "records.parquet")
    # every configuration gets a twin that scored exactly alike (as all the T that leave WFQ
    # one class do), listed right after it
    twins = records.assign(**{"param.delta": records["param.delta"] / 2})
    both = pd.concat([records, twins]).sort_index(kind="stable").reset_index(drop=True)
    both.to_parquet(first.run / "records.parquet")
    roomy = RetuneSpec.load(write_spec(tmp_path, search={
        "budget": 24, "pop_size": 3 * len(both), "offspring": 6, "seed": 3}))
    seeds = _warm_seeds(first.run, roomy)
    names, labels = ["T", "W", "zeta_min", "delta"], ["jct:avg", "pred_err:avg"]
    scored = {tuple(row[:4]): tuple(row[4:])
              for row in both[[f"param.{n}" for n in names] + labels].to_numpy()}
    vectors = [scored[tuple(p[n] for n in names)] for p in seeds]
    # one per objective vector (the run itself made some alike): every vector, none twice
    assert sorted(vectors) == sorted(set(scored.values()))
    assert seeds[:len(front_of(first.run))] == [p for p, _ in front_of(first.run)]


def test_the_cache_makes_a_rerun_on_the_same_window_free(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    spec = RetuneSpec.load(write_spec(tmp_path, warm_start=False))
    first = retune(spec)
    again = retune(spec)
    assert again.run != first.run
    assert again.summary.evaluations_run == 0
    assert again.summary.evaluations_from_cache >= spec.config.settings.budget
    assert front_of(again.run) == front_of(first.run)


def test_the_drift_exit_code(tmp_path: Path) -> None:
    """Max-min fair sharing in production (slower and less predictable than WFQ's front on
    this window) is dominated on both samples: exit 5."""
    write_trace(tmp_path / "trace.csv", 1500)
    (tmp_path / "production.json").write_text(json.dumps({"policy": "maxmin", "params": {}}))
    code = main(["retune", "--spec", str(write_spec(tmp_path, production="production.json"))])
    summary = RunStore(tmp_path / "out" / "current").read_retune()
    assert summary.production is not None and summary.production.drifted
    assert code == Exit.DRIFT == summary.exit


def test_exit_codes_for_bad_input_thin_windows_and_a_held_lock(tmp_path: Path,
                                                              capsys: Any) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    assert main(["retune", "--spec", str(write_spec(tmp_path, policy="lottery"))]) == 2
    assert main(["retune", "--spec", str(write_spec(tmp_path,
                                                    window={"min_jobs": 5000}))]) == 3
    assert "nothing published" in capsys.readouterr().err
    out = tmp_path / "out"
    assert not out.exists()  # bad input and thin windows stop before the lock: nothing written
    out.mkdir()
    with open(out / "retune.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242\n")
        held.flush()
        assert main(["retune", "--spec", str(write_spec(tmp_path))]) == 4
    assert "another retune (pid 4242)" in capsys.readouterr().err
    assert not (out / "runs").exists() and not (out / "current").exists()
    spec = write_spec(tmp_path, production="missing.json")
    assert main(["retune", "--spec", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "cannot read the production config" in err and "missing.json: cannot read" in err
    (tmp_path / "bad.json").write_text('{"params": {}}')
    assert main(["retune", "--spec", str(write_spec(tmp_path, production="bad.json"))]) == 2
    assert "bad.json, column 'policy': expected a policy name" in capsys.readouterr().err


# --- faults -----------------------------------------------------------------------------------
