"""The command line, run in-process with real files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from paretosearch.cli import main
from tests.helpers.data import PCS, SHARED

TRACE = str(PCS / "traces" / "trace_0e4a51.csv")
TABLE = str(PCS / "scaling_tables.csv")
CONFIGS = str(PCS / "configs" / "pcs_configs.json")


def test_default_simulate_prints_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--generate", "300"]) == 0
    out = capsys.readouterr().out
    assert "wfq on pcs-64" in out and "jct" in out and "utilization" in out


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_pcs_config_with_prediction_writes_records(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"jobs{suffix}"
    rc = main(["simulate", "--trace", TRACE, "--jobs", "200", "--scaling-table", TABLE,
               "--config", f"{CONFIGS}:0e4a51_bal", "--predict", "--out", str(out)])
    assert rc == 0
    df = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    for col in ("job_id", "arrival_s", "start_s", "finish_s", "jct_s", "jct_pred_s"):
        assert col in df
    assert len(df) == 200 and df.jct_pred_s.notna().all()
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write left no temp file


def test_set_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--generate", "200", "--policy", "themis", "--set",
                 "lease_s=120", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"lease_s": 120' in out and '"metrics"' in out


def test_heterogeneous_gavel_workload_and_slo_mix(capsys: pytest.CaptureFixture[str]) -> None:
    gavel = str(SHARED / "data" / "gavel" / "simulation_throughputs.json")
    assert main(["simulate", "--policy", "yarn-cs", "--profile", "gavel-hetero-60", "--gavel",
                 gavel, "--generate", "80", "--jobs-per-hr", "20", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["jct"]["avg"] > 0 and doc["metrics"]["preemptions"]["max"] == 0
    assert main(["simulate", "--policy", "fifo", "--generate", "200", "--load", "3",
                 "--slo-mix", "MIX1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert 0 < doc["metrics"]["slo_miss"]["avg"] <= 1  # contended: some deadlines missed


def test_gavel_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gavel = str(SHARED / "data" / "gavel" / "simulation_throughputs.json")
    trace = tmp_path / "jobs.trace"
    # Gavel's 10 columns: type, command, directory, steps flag, needs data, steps, GPUs,
    # priority weight, SLO, arrival (s)
    trace.write_text("".join(f"{job}\tpython3 train.py\tdir\t--steps\t1\t{steps}\t{gpus}\t1"
                             f"\t-1\t{arrival}\n" for job, steps, gpus, arrival in [
                                 ("ResNet-50 (batch size 128)", 3000, 4, 0),
                                 ("A3C", 20000, 1, 0), ("LM (batch size 20)", 50000, 2, 600)]))
    out = tmp_path / "jobs.csv"
    assert main(["simulate", "--trace", str(trace), "--gavel", gavel, "--policy", "hadar",
                 "--profile", "gavel-hetero-60", "--json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["jobs"] == 3 and doc["metrics"]["jct"]["avg"] > 0
    records = pd.read_csv(out)
    assert records.job_id.tolist() == [0, 1, 2] and records.finish_s.notna().all()
    assert main(["simulate", "--trace", str(trace)]) == 2
    assert "--gavel THROUGHPUTS" in " ".join(capsys.readouterr().err.split())
    assert main(["simulate", "--trace", TRACE, "--gavel", gavel]) == 2
    assert "--gavel with --trace reads a Gavel .trace" in " ".join(
        capsys.readouterr().err.split())


@pytest.mark.parametrize(("argv", "message"), [
    (["--policy", "nope"], "unknown policy 'nope'"),
    (["--set", "W=99"], "parameter 'W': expected a value in [-3, 3], got 99"),
    (["--set", "W"], "expected NAME=VALUE"),
    (["--set", "T", "0.5"], "--set T: expected NAME=VALUE in one word: write --set T=0.5"),
    # only the parameters one may set are offered, not WFQ's fitted thresholds and rates
    (["--set", "nope=1"], "policy 'wfq' has no parameter 'nope'; its parameters are T, W, "
                          "zeta_min, delta"),
    (["--profile", "nope"], "unknown cluster profile"),
    (["--trace", TRACE], "scaling-table"),
    (["--config", f"{CONFIGS}:nope"], "no config 'nope'"),
    (["--out", "x.txt"], "use .csv or .parquet"),
    (["--early-stop", "1.5"], "performance_share must be in [0, 1]"),
])
def test_errors_exit_2_with_a_reason(capsys: pytest.CaptureFixture[str], argv: list[str],
                                     message: str) -> None:
    assert main(["simulate", "--generate", "50", *argv]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_listings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    for name in ("wfq", "fifo", "srsf", "maxmin", "themis", "afs", "zeta_min"):
        assert name in out
    assert main(["profiles"]) == 0
    assert "gavel-hetero-60" in capsys.readouterr().out


def test_search_reads_a_pcs_trace_as_simulate_does(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from paretosearch.cli.runs import scaling_table
    from paretosearch.service.api import split_workload
    from simulator import read_trace

    run = tmp_path / "run"
    assert main(["search", "--trace", TRACE, "--scaling-table", TABLE, "--jobs", "300",
                 "--budget", "8", "--pop-size", "4", "--workers", "0",
                 "--run-dir", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()  # not a terminal: a line per generation
    steps = [line for line in lines if line.startswith("generation ")]
    assert [s.split(",")[0] for s in steps] == ["generation 1: 4/8 evaluations",
                                                "generation 2: 8/8 evaluations"]
    train, test = split_workload(read_trace(TRACE, scaling=scaling_table(TABLE, 64)).head(300))
    spec = json.loads((run / "run.json").read_text())
    assert spec["train_digests"] == [train.digest()] and len(train) == len(test) == 150
    cli = json.loads((run / "cli.json").read_text())  # what a resume reads the trace with
    assert (cli["scaling_table"], cli["jobs"]) == (TABLE, 300)
    assert main(["search", "--trace", TRACE, "--workers", "0",
                 "--run-dir", str(tmp_path / "b")]) == 2
    assert "scaling-table" in " ".join(capsys.readouterr().err.split())
    assert main(["search", "--jobs", "50", "--workers", "0",
                 "--run-dir", str(tmp_path / "c")]) == 2
    assert "--jobs and --scaling-table read a trace" in capsys.readouterr().err


def test_simulate_a_chosen_config_as_deployed(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A chosen config's fitted classes are what production runs: simulate takes them as
    they are, not re-derived from the workload being simulated."""
    from policies import WFQ
    from simulator import generate

    params = {"T": 0.5, "W": 1.0, "zeta_min": 0.5, "delta": 0.1}
    fitted = WFQ(**params).fit(generate(300, load=0.9, gpus=64, seed=7)).to_dict()["params"]
    docs = {"chosen": {"policy": "wfq", "params": params, "fitted": fitted},
            "fitted": {"policy": "wfq", "params": fitted},
            "refit": {"policy": "wfq", "params": params}}
    out = {}
    for name, doc in docs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        capsys.readouterr()
        assert main(["simulate", "--generate", "300", "--seed", "1", "--json",
                     "--config", str(tmp_path / f"{name}.json")]) == 0
        out[name] = json.loads(capsys.readouterr().out)
    assert out["chosen"] == out["fitted"] != out["refit"]


def test_simulate_replays_the_workload_a_search_with_the_same_seed_trains_on(
        tmp_path: Path) -> None:
    # one sample builder (paretosearch.samples): the jobs, their deadlines and their sharing
    # requirements of ``simulate --seed S`` are the first training sample of a search with S
    # (of any policy family: the samples are the same)
    from paretosearch.config import SearchConfig
    from paretosearch.io import write_table
    from paretosearch.service.api import PolicySearch
    from paretosearch.settings import SearchSettings
    from policies import make_policy
    from simulator import load_profile, simulate

    argv = ["--generate", "150", "--load", "0.7", "--slo-mix", "MIX1", "--sharing"]
    out = tmp_path / "jobs.csv"
    assert main(["simulate", *argv, "--seed", "11", "--policy", "fifo", "--profile",
                 "pcs-testbed-16", "--out", str(out)]) == 0
    config = SearchConfig(policy="themis", profile="pcs-testbed-16", jobs=150, load=0.7,
                          slo_mix="MIX1", sharing=True, settings=SearchSettings(seed=11))
    search = PolicySearch(None, config)
    train = search.train[0]
    write_table(simulate(train, load_profile("pcs-testbed-16"),
                         make_policy("fifo", {}).fit(train)).records(), tmp_path / "search.csv")
    pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(tmp_path / "search.csv"))
    assert train.slos is not None and train.sharing is not None
    other = PolicySearch(None, SearchConfig(
        policy="themis", profile="pcs-testbed-16", jobs=150, load=0.7, slo_mix="MIX1",
        sharing=True, settings=SearchSettings(seed=12))).train[0]
    assert other.digest() != search.train[0].digest()  # the seed is what decides


@pytest.mark.parametrize("saved", ["run.json", "cli.json", "flat options"])
def test_resume_needs_no_option_and_reads_earlier_runs(tmp_path: Path, saved: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # the run keeps its search's config in run.json (cli.json: how the trace was read); runs
    # started before kept it in cli.json, and resume as well; those of before configs were
    # kept (their options saved flat) are named. A resume with other settings than the run's
    # would be refused (run.json's definition), so a clean exit means they were read back
    run = tmp_path / "run"
    argv = ["--generate", "120", "--budget", "6", "--pop-size", "3", "--seed", "4",
            "--policy", "themis", "--profile", "pcs-testbed-16", "--objective", "jct:p99",
            "--objective", "wait:avg", "--replicates", "1"]  # as runs before the default of 3
    assert main(["search", *argv, "--workers", "0", "--run-dir", str(run)]) == 0
    doc = json.loads((run / "run.json").read_text())
    assert doc["config"]["policy"] == "themis" and doc["config"]["settings"]["seed"] == 4
    assert json.loads((run / "cli.json").read_text()) == {
        "trace": None, "scaling_table": None, "jobs": None}
    config = doc.pop("config")
    if saved != "run.json":  # as earlier versions wrote them
        (run / "run.json").write_text(json.dumps(doc))
        (run / "cli.json").write_text(json.dumps(
            {"trace": None, "scaling_table": None, "jobs": None, "config": config}
            if saved == "cli.json" else {"trace": None, "generate": 120, "policy": "themis"}))
    spec = (run / "run.json").read_text()
    if saved == "flat options":
        assert main(["search", "--resume", str(run), "--workers", "0"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{run / 'run.json'}, column 'config': missing" in err
        return
    assert main(["search", "--resume", str(run), "--workers", "0"]) == 0
    assert (run / "run.json").read_text() == spec
    assert main(["search", "--resume", str(run), "--workers", "0", "--seed", "5"]) == 0  # ignored


def test_a_damaged_saved_config_is_named(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "cli.json").write_text(json.dumps({"trace": None}))
    (run / "run.json").write_text(json.dumps({"policy": "wfq", "profile": "pcs-64",
                                              "objectives": ["jct:avg"], "fixed": {},
                                              "config": {"policy": "wfq"}}))
    assert main(["search", "--resume", str(run), "--workers", "0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{run / 'run.json'}, field config: not a search config" in err and "objectives" in err


def test_gavel_cluster_without_a_file_and_dropped_jobs(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Gavel's agnostic FIFO on its 36:36:36 cluster drops jobs 8 and 16 of this trace after 5
    # failed tasks and averages the other 58 (tests/fixtures/gavel/summary.csv)
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "gavel"
    out = tmp_path / "jobs.csv"
    assert main(["simulate", "--trace", str(fixtures / "static_multi.trace"), "--gavel",
                 str(SHARED / "data" / "gavel" / "simulation_throughputs.json"), "--policy",
                 "gavel", "--set", "objective=fifo", "--set", "aware=false", "--cluster",
                 "36:36:36", "--json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"] == "v100:36,p100:36,k80:36" and doc["dropped"] == 2
    assert doc["metrics"]["jct"]["avg"] == pytest.approx(6975.126549032193, rel=1e-9)
    records = pd.read_csv(out)
    assert records.job_id[records.dropped].tolist() == [8, 16]
    assert records.finish_s.notna().all()  # they ran their last steps, outside the average


@pytest.mark.parametrize(("spec", "message"), [
    ("V100:x", "v100 GPU count 'x' must be a positive integer"),
    ("A100:8", "unknown GPU type 'a100'"),
    ("V100:30", "30 v100 GPUs do not fill servers of 4"),
    ("36:36", "Gavel's form has 3 GPU counts"),
])
def test_bad_cluster_specs_name_the_value(spec: str, message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--generate", "10", "--cluster", spec]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--cluster {spec!r}" in err and message in err
