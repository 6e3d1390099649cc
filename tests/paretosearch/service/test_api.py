"""The preference API, the run directory and the search CLI, for real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paretosearch.cli import main
from paretosearch.io import json_text
from paretosearch.runs import select as choose
from paretosearch.runs.optuna_copy import load_study
from paretosearch.runs.records import FrontEntry, config_hash
from paretosearch.runs.store import RunStore
from paretosearch.search.spea2 import Progress
from paretosearch.service.api import (
    BASELINES,
    PolicySearch,
    SearchConfig,
    SearchSettings,
    baselines_for,
    split_workload,
)
from simulator import (
    InvalidObjective,
    InvalidPolicyParams,
    ParetoSearchError,
    generate,
    load_profile,
)
from simulator.inputs.generate import add_slos
from simulator.inputs.scaling import TypeSpeeds
from tests.helpers.data import ROOT
from tests.helpers.runs import (
    SMALL,
    CtrlCInFinaliser,
    WorkerKiller,
    front_key,
    journal,
    journal_keys,
)


def test_preference_front_and_choice(tmp_path: Path) -> None:
    search = PolicySearch(config=SearchConfig(settings=SMALL, jobs=200), store=tmp_path)
    assert [o.label for o in search.objectives] == list(SearchConfig.objectives)
    search.SetPreference(("jct", "avg"), "pred_err:p99")  # in place of the config's
    assert search.config.objectives == ("jct:avg", "pred_err:p99")
    front = search.run()
    assert front == search.get_pareto_front()
    values = [tuple(e.objectives.values()) for e in front]
    assert len(set(values)) == len(values)  # no two entries with the same objectives
    for a in values:  # nobody on the front dominates anybody else on it
        assert not any(b != a and all(x <= y for x, y in zip(b, a, strict=True))
                       for b in values)
    assert all(e.test_metrics["jct:avg"] > 0 for e in front)
    published = RunStore(tmp_path).read_front()
    assert front_key(published.front) == front_key(front) and published.done
    assert set(published.baselines) == set(published.baselines_test) == set(BASELINES)
    train, test = search.evaluate("srsf", {})  # the baselines are run on both samples
    assert published.baselines["srsf"]["jct:avg"] == train["jct:avg"]
    assert published.baselines_test["srsf"]["jct:avg"] == test["jct:avg"] != train["jct:avg"]
    assert len(pd.read_parquet(tmp_path / "records.parquet")) == 32
    assert len(journal_keys(tmp_path)) == 32
    chosen = search.SetConfig(search.knee())
    assert (chosen.front_index, chosen.run) == (search.knee(), str(tmp_path.resolve()))
    assert chosen.test_metrics == front[search.knee()].test_metrics
    assert json.loads(json_text(chosen.to_dict())) == json.loads(
        (tmp_path / "chosen.json").read_text())
    best = search.where("pred_err:p99 <= 1e9", minimize="jct:avg", include_dominated=True)
    assert front[best].objectives["jct:avg"] == min(v[0] for v in values)
    # all weight on JCT: the fastest entry
    assert search.by_weights(1.0, 0.0, include_dominated=True) == best
    labels = [o.label for o in search.objectives]
    for e in front:  # by hand: the baselines no worse on every objective on test, and unlike
        assert e.dominated_by == tuple(
            name for name, b in published.baselines_test.items()
            if all(b[lab] <= e.test_metrics[lab] for lab in labels)
            and any(b[lab] < e.test_metrics[lab] for lab in labels))
    with pytest.raises(ParetoSearchError, match="out of range"):
        search.select(len(front))
    table = search.front_dataframe()  # one flat row per configuration
    assert table["W"].tolist() == [e.params["W"] for e in front]
    assert table["jct:avg"].tolist() == [e.objectives["jct:avg"] for e in front]
    assert table["test:pred_err:p99"].tolist() == [e.test_metrics["pred_err:p99"]
                                                  for e in front]
    assert table["dominated_by"].tolist() == [", ".join(e.dominated_by or ()) for e in front]
    # a configuration by its parameters: simulated on both samples, recorded with its metrics
    params = {**front[0].params, "W": front[0].params["W"] / 2}
    own = search.SetConfig(params)
    train, test = search.evaluate("wfq", {**search.task.fixed, **params})
    assert own.params == {**search.task.fixed, **params}
    assert own.objectives == {"jct:avg": train["jct:avg"], "pred_err:p99": train[
        "pred_err:p99"]}
    assert own.front_index is None and own.run is None  # not from the front
    assert json.loads(json_text(own.to_dict())) == json.loads(
        (tmp_path / "chosen.json").read_text())
    with pytest.raises(InvalidPolicyParams, match="nonsense"):
        search.SetConfig({"nonsense": 1})
    with pytest.raises(ParetoSearchError, match="already holds a run"):
        PolicySearch(config=SearchConfig(settings=SMALL, jobs=200),
                     store=tmp_path).SetPreference("jct") or \
            _run(tmp_path)


def test_a_ctrl_c_that_a_finaliser_swallows_between_generations_stops_the_search(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Outside any runner (here while a generation is published) Python would only print
    it and the search would run to its end; it stops at the next evaluation instead."""
    search = PolicySearch(config=SearchConfig(settings=SMALL, jobs=150), store=tmp_path)
    heard: list[int] = []

    def on_generation(p: Progress) -> None:
        heard.append(len(p.evaluated))
        CtrlCInFinaliser()  # made and finalised at once

    unraisable = sys.unraisablehook
    with pytest.raises(KeyboardInterrupt):
        search.run(on_generation)
    assert heard == [SMALL.pop_size]  # the next generation's first evaluation stopped it
    assert len(journal(tmp_path)) == SMALL.pop_size + 1  # and it was kept
    assert sys.unraisablehook is unraisable
    assert "Exception ignored" not in capfd.readouterr().err


def _run(run_dir: Path) -> None:
    s = PolicySearch(config=SearchConfig(settings=SMALL, jobs=200), store=run_dir)
    s.SetPreference("jct")
    s.run()


def test_optuna_study_mirrors_every_evaluation(tmp_path: Path) -> None:
    search = PolicySearch(config=SearchConfig(settings=SMALL, jobs=150), store=tmp_path)
    search.SetPreference("jct:avg", "utilization:avg")
    front = search.run()
    study = load_study(tmp_path / "optuna.log")
    assert len(study.trials) == 32
    assert [d.name for d in study.directions] == ["MINIMIZE", "MAXIMIZE"]
    assert study.metric_names == ["jct:avg", "utilization:avg"]  # the dashboard's names
    assert (study.user_attrs["policy"], study.user_attrs["profile"]) == ("wfq", "pcs-64")
    records = pd.read_parquet(tmp_path / "records.parquet")
    assert [t.values[0] for t in study.trials] == records["jct:avg"].tolist()  # in order
    for trial, wall in zip(study.trials, records["wall_s"], strict=True):  # their durations
        assert trial.duration is not None
        assert trial.duration.total_seconds() == pytest.approx(wall, abs=1e-6)
        assert trial.user_attrs["jct:p99"] == records["jct:p99"][trial.number]
    # the published front: its trials and their test metrics; the baselines on both samples
    published = study.user_attrs["front"]
    assert [study.trials[m["trial"]].params for m in published] == [e.params for e in front]
    assert [m["test_metrics"]["jct:avg"] for m in published] == [
        e.test_metrics["jct:avg"] for e in front]
    assert study.user_attrs["baselines"]["fifo"]["jct:avg"] == search.baselines["fifo"][
        "jct:avg"]
    assert set(study.user_attrs["baselines_test"]) == set(search.baselines_test)
    assert [study.trials[m["trial"]].values for m in published] == [
        list(e.objectives.values()) for e in front]


def test_jcts_are_predicted_only_when_an_objective_needs_them() -> None:
    search = PolicySearch(config=SearchConfig(settings=SMALL, jobs=150))
    search.SetPreference("jct:avg", "utilization:avg")
    front = search.run()
    assert all(np.isnan(e.metrics["pred_err:avg"]) for e in front)
    assert all(np.isnan(b["pred_err:avg"]) and b["jct:avg"] > 0
               for b in search.baselines.values())
    stored = json.loads(json_text([e.to_dict() for e in front]))  # as front.json holds it
    for entries in (front, [FrontEntry.from_dict(e) for e in stored]):
        with pytest.raises(ParetoSearchError, match="predicted no JCTs"):
            choose.by_constraints(entries, ["pred_err:p99 <= 100"], "jct:avg")
    predicting = PolicySearch(config=SearchConfig(settings=SMALL, jobs=150))
    predicting.SetPreference("jct:avg", "pred_err:avg")
    train, test = predicting.evaluate("wfq", front[0].params)
    assert train["pred_err:avg"] >= 0  # predictions change no job's times
    assert train["jct:avg"] == front[0].metrics["jct:avg"]
    assert test["jct:avg"] == front[0].test_metrics["jct:avg"]


def test_a_corrupted_journal_line_is_evaluated_again_and_the_front_is_the_same(
        tmp_path: Path) -> None:
    search = PolicySearch(config=SearchConfig(settings=SMALL, jobs=200), store=tmp_path / "whole")
    search.SetPreference("jct")
    expected = search.run()
    run = tmp_path / "run"
    shutil.copytree(tmp_path / "whole", run)
    lines = (run / "evaluations.jsonl").read_bytes().splitlines(keepends=True)
    damaged = bytearray(lines[5])
    damaged[len(damaged) // 2] ^= 0xFF  # one flipped byte, as a bad disk would do
    lost = json.loads(lines[5])["key"]
    (run / "evaluations.jsonl").write_bytes(b"".join([*lines[:5], bytes(damaged), *lines[6:],
                                                      b'{"key": "cut sh']))
    again = PolicySearch(config=SearchConfig(settings=SMALL, jobs=200), store=run)
    again.SetPreference("jct")
    assert front_key(again.run(resume=True)) == front_key(expected)
    keys = journal_keys(run)  # the damaged line's evaluation ran again, and only it
    assert keys[-1] == lost and sorted(keys) == sorted(journal_keys(tmp_path / "whole"))


def test_readers_never_see_a_partial_front(tmp_path: Path) -> None:
    seen, bad, stop = [0], [], threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                text = (tmp_path / "front.json").read_text()
            except FileNotFoundError:
                continue
            try:
                json.loads(text)
                seen[0] += 1
            except json.JSONDecodeError:
                bad.append(text)

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        settings = SearchSettings(budget=60, pop_size=10, n_offsprings=10)
        search = PolicySearch(config=SearchConfig(settings=settings, jobs=150), store=tmp_path)
        search.SetPreference("jct", "pred_err")
        search.run()
    finally:
        stop.set()
        reader.join()
    assert not bad and seen[0] > 0


CLI = [sys.executable, "-m", "paretosearch.cli", "search", "--generate", "300", "--budget", "60",
       "--pop-size", "12", "--offspring", "12", "--seed", "5", "--workers", "0"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["generational", "async"])
def test_sigkill_then_resume_gives_the_same_front(tmp_path: Path, mode: str) -> None:
    """Serial evaluation finishes candidates in the order they start, so the asynchronous
    mode, too, must reach the uninterrupted run's front."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    cli = [*CLI, "--mode", mode]
    subprocess.run([*cli, "--run-dir", str(whole)], check=True, capture_output=True)
    proc = subprocess.Popen([*cli, "--run-dir", str(cut)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    journal = cut / "evaluations.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:  # kill it in the middle of its third generation
        if journal.exists() and len(journal_keys(cut)) >= 30:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(journal_keys(cut))
    assert 30 <= done_before < 60
    # resumed serially too: the worker count is not part of a run (async's front depends on
    # the order evaluations finish, and so on it)
    subprocess.run([sys.executable, "-m", "paretosearch.cli", "search", "--resume", str(cut),
                    "--workers", "0"], check=True, capture_output=True)
    a, b = RunStore(whole).read_front(), RunStore(cut).read_front()
    assert front_key(a.front) == front_key(b.front)
    keys = journal_keys(cut)
    assert len(keys) == len(set(keys)) == 60  # nothing lost, nothing evaluated twice


@pytest.mark.dask
@pytest.mark.slow
@pytest.mark.parametrize("cluster", [["--workers", "2"],  # the embedded cluster
                                     ["--cluster-config", "dask-cluster.yaml"]])  # the file's
def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path: Path, cluster: list[str]
                                                     ) -> None:
    """Ctrl-C in a terminal: SIGINT to every process of the group, Dask's workers too."""
    run = tmp_path / "run"
    cli = [sys.executable, "-m", "paretosearch.cli", "search", "--generate", "1000",
           "--budget", "120", "--seed", "5"]
    proc = subprocess.Popen([*cli, *cluster, "--run-dir", str(run)],
                            cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (
            (run / "evaluations.jsonl").exists() and len(journal_keys(run)) >= 12):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    text = " ".join(err.decode().split())
    assert "Traceback" not in text and "Error" not in text and "WARNING" not in text, text
    assert f"interrupted: stopped; every finished evaluation is saved in {run}" in text
    assert f"paretosearch search --resume {run}" in text
    done = len(journal_keys(run))
    assert main(["search", "--resume", str(run), "--workers", "0"]) == 0
    keys = journal_keys(run)
    assert len(keys) == len(set(keys)) == 120 > done  # went on, nothing evaluated twice


@pytest.mark.dask
@pytest.mark.slow
def test_killing_a_worker_loses_nothing(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    settings = SearchSettings(budget=48, pop_size=16, n_offsprings=16, seed=9)
    serial = PolicySearch(config=SearchConfig(settings=settings, jobs=250))
    serial.SetPreference("jct", "pred_err")
    expected = front_key(serial.run())
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        search = PolicySearch(config=SearchConfig(settings=settings, jobs=250), client=client,
                              store=tmp_path)
        search.SetPreference("jct", "pred_err")
        kill_one = WorkerKiller(client)
        front = search.run(kill_one)
    assert kill_one.killed and front_key(front) == expected
    keys = journal_keys(tmp_path)
    assert len(keys) == len(set(keys)) == 48


@pytest.mark.parametrize(("argv", "message"), [
    (["--objective", "jct:p200"], "unknown measure"),
    (["--objective", "speed"], "unknown metric"),
    (["--set", "tau=1"], "no parameter 'tau'"),
    (["--set", "W=9"], "parameter 'W'"),
    (["--replicates", "0"], "replicates must be an integer from 1 to 1,000 (got 0)"),
    (["--policy", "fifo"], "nothing left to search"),  # found once the search is made
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
        PolicySearch(config=SearchConfig(settings=SMALL, jobs=50)).SetPreference()
    with pytest.raises(InvalidPolicyParams):
        PolicySearch(config=SearchConfig(settings=SMALL, jobs=50, fixed={"nope": 1}))


def test_cli_search_front_select(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["search", "--generate", "150", "--budget", "24", "--pop-size", "8",
                 "--offspring", "8", "--workers", "0", "--run-dir", str(run)]) == 0
    assert main(["front", str(run)]) == 0
    out = capsys.readouterr().out
    assert "Pareto front" in out and "jct:avg" in out and "srsf" in out
    assert (run / "front.png").read_bytes()[:4] == b"\x89PNG"
    for how in (["--knee"], ["--index", "0"], ["--weights", "1,1"],
                ["--where", "pred_err:avg <= 1000", "--minimize", "jct:avg"]):
        assert main(["select", str(run), *how, "--out", str(tmp_path / "c.json")]) == 0
        chosen = json.loads((tmp_path / "c.json").read_text())
        assert chosen["policy"] == "wfq" and set(chosen["params"]) >= {"T", "W"}
    capsys.readouterr()
    assert main(["select", str(run), "--where", "jct:avg < 0", "--minimize", "jct"]) == 2
    assert "no configuration on the front meets" in capsys.readouterr().err
    assert main(["select", str(run), "--weights", "1"]) == 2
    assert main(["front", str(tmp_path / "nope")]) == 2
    assert main(["search", "--workers", "0", "--run-dir", str(run)]) == 2  # already a run


@pytest.mark.slow
def test_cli_searches_leases_and_rewards_for_slo_objectives(tmp_path: Path) -> None:
    # issue 4: a search over UniSched's leases and reward scalings, slo_miss vs be_jct
    run, trace = tmp_path / "run", tmp_path / "short.csv"
    # short jobs: the round engine's cost grows with makespan / lease, and leases go to 30 s
    generate(120, load=1.5, gpus=16, seed=4, median_service_s=900.0, sigma=1.0
             ).to_frame().to_csv(trace, index=False)
    assert main(["search", "--policy", "unisched", "--slo-mix", "MIX2", "--trace", str(trace),
                 "--profile", "pcs-testbed-16", "--objective", "slo_miss:avg",
                 "--objective", "be_jct:avg", "--budget", "8", "--pop-size", "4",
                 "--offspring", "4", "--workers", "0", "--run-dir", str(run)]) == 0
    doc = json.loads((run / "front.json").read_text())
    assert {"llf", "hydra", "themis", "srsf"} <= set(doc["baselines"])
    for entry in doc["front"]:
        assert list(entry["objectives"]) == ["slo_miss:avg", "be_jct:avg"]
        assert 0.0 <= entry["objectives"]["slo_miss:avg"] <= 1.0
        assert entry["objectives"]["be_jct:avg"] > 0
        assert {"be_lease_s", "slo_lease_multiple", "slo_reward", "be_reward_scale",
                "reward_decay"} <= set(entry["params"])
    evaluated = pd.read_parquet(run / "records.parquet")
    assert len(evaluated) == 8 and evaluated["param.be_lease_s"].nunique() >= 4  # searched


def test_an_objective_the_workload_cannot_measure_stops_with_a_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no SLO jobs: slo_miss is NaN for every configuration, and would steer nothing
    run, trace = tmp_path / "run", tmp_path / "jobs.csv"
    generate(60, gpus=16, seed=1, median_service_s=600.0).to_frame().to_csv(trace, index=False)
    assert main(["search", "--trace", str(trace), "--profile", "pcs-testbed-16",
                 "--objective", "jct:avg", "--objective", "slo_miss:avg", "--budget", "8",
                 "--pop-size", "4", "--offspring", "4", "--workers", "0",
                 "--run-dir", str(run)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "'slo_miss:avg': undefined (NaN) for every configuration" in err
    assert "--slo-mix" in err and "'jct:avg'" not in err
    assert len((run / "evaluations.jsonl").read_text().splitlines()) == 4  # kept
    assert not (run / "front.json").exists()


def test_split_rebases_the_test_half_and_keeps_slos_and_type_speeds() -> None:
    wl = add_slos(generate(100, seed=1), "MIX2")
    wl = replace(wl, type_speed=TypeSpeeds.uniform({"v100": 1.0, "k80": 0.3},
                                                   len(wl.scaling.models)))
    train, test = split_workload(wl)
    assert len(train) == len(test) == 50 and test.arrival_s[0] == 0.0
    assert train.slos is not None and test.slos is not None and wl.slos is not None
    np.testing.assert_array_equal(test.slos.job_class, wl.slos.job_class[50:])
    np.testing.assert_allclose(test.slos.deadlines_s, wl.slos.deadlines_s[50:])
    assert test.type_speed is wl.type_speed and train.type_speed is wl.type_speed


def test_clusters_of_several_gpu_types_are_compared_as_hadar_compares() -> None:
    wl = generate(40, seed=5)
    one_type = baselines_for(wl, load_profile("pcs-64"))
    assert one_type == BASELINES
    # Hadar §V: Gavel, YARN-CS and Tiresias, on top of the fluid baselines
    assert baselines_for(wl, load_profile("gavel-hetero-60")) == (
        *BASELINES, "gavel", "yarn-cs", "tiresias")


def test_a_baseline_that_dominates_the_whole_front_is_warned_of() -> None:
    settings = SearchSettings(budget=3, pop_size=2, seed=1)
    search = PolicySearch(config=SearchConfig(settings=settings, jobs=150))
    search.SetPreference("jct:avg")  # 3 tries: some baselines do better
    with pytest.warns(UserWarning, match="dominates the whole front") as caught:
        front = search.run()
    warned = {str(w.message).split()[2] for w in caught
              if "whole front on the training sample" in str(w.message)}
    assert warned == {name for name, b in search.baselines.items()  # by hand
                      if all(b["jct:avg"] < e.metrics["jct:avg"] for e in front)}


def test_default_run_dir_and_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["search", "--generate", "120", "--budget", "16", "--pop-size", "8",
                 "--offspring", "8", "--workers", "0"]) == 0
    latest = tmp_path / "runs" / "latest"
    assert latest.is_symlink() and (latest / "front.json").exists()
    first = latest.resolve()
    capsys.readouterr()
    assert main(["front", "runs/latest"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"run {first.name}: Pareto front" in out and f"Run folder: {first}" in out
    (tmp_path / "cluster.yaml").write_text("cluster: {module: nowhere.at.all}\n")
    time.sleep(1)  # default run directories are named by the second
    assert main(["search", "--generate", "120", "--budget", "16", "--cluster-config",
                 "cluster.yaml"]) == 2  # fails before it starts: latest stays
    assert latest.resolve() == first
    assert main(["select", "runs/latest", "--index", "0"]) == 0
    chosen = json.loads((first / "chosen.json").read_text())
    assert chosen["run"] == str(first)  # the run itself, not the link
    assert chosen["config_sha256"] == config_hash(chosen)
    with pytest.raises(SystemExit, match="2"):  # which one? not silently the first
        main(["select", "runs/latest"])
    assert json.loads((first / "chosen.json").read_text()) == chosen
