"""The hostile catalogue (issue 41), continued: command-line options, absurd sizes in profiles
and documents, and inputs that are not regular files (FIFOs, devices, folders), each with its
verdict: exit 2 and a message naming the option, file, field or value; never a traceback or a
hang (each case has a timeout)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from paretosearch.cli import main
from paretosearch.service.retune import Exit, _read_production
from simulator.errors import ParetoSearchError
from tests.helpers.data import ROOT, SHARED
from tests.helpers.runs import write_spec, write_trace
from tests.paretosearch.test_hostile_catalogue import _chosen

pytestmark = pytest.mark.timeout(120)


# --- 8. options: a message, never a traceback -------------------------------------------------

RUN = "{run}"
OPTIONS: list[tuple[list[str], str]] = [
    (["select", RUN, "--weights", "a,b"], "weights"),
    (["select", RUN, "--weights", "nan,1"], "weights"),
    (["select", RUN, "--weights", "inf,1"], "weights"),
    (["select", RUN, "--weights", "-1,1"], "weights"),
    (["select", RUN, "--weights", "1"], "weights"),
    (["select", RUN, "--weights", ""], "weights"),
    (["select", RUN, "--where", "jct:avg <= 1e", "--minimize", "jct:avg"], "1e"),
    (["select", RUN, "--where", "jct:avg <= nan", "--minimize", "jct:avg"], "nan"),
    (["select", RUN, "--where", "nope:avg <= 1", "--minimize", "jct:avg"], "nope"),
    (["select", RUN, "--where", "jct:avg", "--minimize", "jct:avg"], "jct:avg"),
    (["select", RUN, "--index", "99"], "99"),
    (["select", RUN, "--index", "-99"], "-99"),
    (["search", "--seed", "-1"], "seed"),
    (["search", "--budget", "0"], "budget"),
    (["search", "--budget", "-3"], "budget"),
    (["search", "--set", 'thresholds=[1,"a"]'], "thresholds holds 'a'"),
    (["search", "--set", "thresholds=[1,true]"], "thresholds holds True"),
    (["search", "--set", 'thresholds={"a":1}'], "thresholds"),
    (["search", "--set", "W=nan"], "W"),
    (["search", "--set", "W=1e309"], "W"),
    (["search", "--set", "nope=1"], "nope"),
    (["search", "--set", "=1"], "NAME=VALUE"),
    (["search", "--generate", "1000000000000"], "jobs must be an integer from 1 to"),
    (["search", "--generate", "-5"], "(got -5)"),
    (["search", "--load", "nan"], "load"),
    (["search", "--load", "inf"], "load"),
    (["search", "--load", "-1"], "load"),
    (["search", "--objective", "nope:avg"], "nope"),
    (["search", "--profile", "nope"], "nope"),
    (["simulate", "--generate", "40", "--set", "W=[nan, inf]"], "[nan, inf]"),
    (["search", "--seed", str(2**63)], "--seed"),
    (["simulate", "--generate", "40", "--seed", "-1"], "--seed"),
    (["simulate", "--generate", "40", "--seed", str(10**30)], "--seed"),
    (["simulate", "--generate", str(10**12)], "jobs must be an integer from 1 to"),
    (["simulate", "--generate", "0"], "jobs must be an integer from 1 to"),
    (["simulate", "--gavel", str(SHARED / "data" / "gavel" / "simulation_throughputs.json"),
      "--generate", str(10**12)], "jobs must be an integer from 1 to"),
    (["search", "--set", f"W={10**400}"], "past int64's range"),
    (["simulate", "--generate", "40", "--set", f"W={10**400}"], "past int64's range"),
    (["simulate", "--generate", "40", "--set", "W=" + "[" * 100_000], "nested too deep"),
    (["simulate", "--generate", "40", "--profile", "v100:10000000000000"], "at most 10,000,000"),
    (["search", "--profile", "v100:10000000000000"], "at most 10,000,000"),
    (["simulate", "--generate", "40", "--set", "thresholds=[1,null]", "--set", "rates=[{},1]"],
     "rates holds {}"),
]


@pytest.mark.parametrize(("argv", "message"), OPTIONS,
                         ids=[" ".join(a[:1] + a[2:] if a[1] == RUN else a) for a, _ in OPTIONS])
def test_a_bad_option_is_a_message(small_run: Path, tmp_path: Path, argv: list[str],
                                   message: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.replace(RUN, str(small_run)) for a in argv]
    if argv[0] == "search":
        argv += [*(["--generate", "40"] if "--generate" not in argv else []),
                 *(["--budget", "4"] if "--budget" not in argv else []),
                 "--workers", "0", "--run-dir", str(tmp_path / "run")]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal: exit 2 and a usage line
        code = int(exc.code or 0)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert message in err, err
    assert not (tmp_path / "run" / "evaluations.jsonl").exists()


PROFILES = [("10^13 GPUs a node", "gpus_per_node: 64", "gpus_per_node: 10000000000000",
             "node_groups[0].gpus_per_node"),
            ("10^4 nodes of 10^4 GPUs", "count: 1, gpus_per_node: 64",
             "count: 10000, gpus_per_node: 10000", "at most 10,000,000"),
            ("a 400-digit count", "count: 1", "count: 1" + "0" * 400, "past int64's range"),
            ("a name not its file's", "name: pcs-64", "name: other", "must match the file name")]


@pytest.mark.parametrize(("old", "new", "message"), [p[1:] for p in PROFILES],
                         ids=[p[0] for p in PROFILES])
def test_an_absurd_or_misnamed_profile_is_refused_before_allocating(
        tmp_path: Path, old: str, new: str, message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pcs-64.yaml"
    text = (ROOT / "cluster_profiles" / "pcs-64.yaml").read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    assert main(["simulate", "--generate", "40", "--profile", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(path) in err and message in err, err


@pytest.mark.parametrize("document", ["config", "chosen", "production", "spec"])
def test_a_400_digit_integer_in_a_document_is_named(tmp_path: Path, document: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    doc = _chosen()
    doc["params"] = {**doc["params"], "W": 10**400}
    config = tmp_path / "chosen.json"
    config.write_text(json.dumps(doc))
    if document == "production":
        with pytest.raises(ParetoSearchError, match="past int64's range") as caught:
            _read_production(config)
        assert str(config) in str(caught.value)
        return
    if document == "spec":
        write_trace(tmp_path / "trace.csv", 200)
        config = write_spec(tmp_path, fixed={"W": 10**400})
        argv = ["retune", "--spec", str(config)]
    else:
        argv = (["simulate", "--generate", "40", "--config", str(config)] if document == "config"
                else ["export", str(config), "--format", "slurm"])
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(config) in err and "past int64's range" in err, err


# --- FIFOs and devices as inputs: refused at once, never waited on ---------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv", [
    ["simulate", "--trace", "{fifo}.csv"], ["simulate", "--trace", "{fifo}.trace"],
    ["simulate", "--trace", "{fifo}.parquet"],
    ["simulate", "--generate", "40", "--config", "{fifo}"],
    ["simulate", "--generate", "40", "--profile", "{fifo}.yaml"], ["retune", "--spec", "{fifo}"],
    ["search", "--generate", "40", "--cluster-config", "{fifo}", "--run-dir", "{tmp}/r"],
    ["export", "{fifo}", "--format", "slurm"], ["simulate", "--trace", "/dev/zero"],
    ["simulate", "--trace", "{folder}.csv"],
    ["simulate", "--generate", "40", "--config", "{folder}"],
    ["simulate", "--generate", "40", "--profile", "{folder}.yaml"],
    ["retune", "--spec", "{folder}"],
    ["search", "--generate", "40", "--cluster-config", "{folder}", "--run-dir", "{tmp}/r"],
], ids=["trace", "gavel trace", "parquet", "config", "profile", "spec", "cluster-config",
        "export", "a device", "a folder as trace", "a folder as config",
        "a folder as profile", "a folder as spec", "a folder as cluster-config"])
def test_a_fifo_as_input_is_refused_at_once(tmp_path: Path, argv: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = any("{folder}" in a for a in argv)
    argv = [a.replace("{fifo}", str(tmp_path / "input")).replace("{folder}", str(
        tmp_path / "input")).replace("{tmp}", str(tmp_path)) for a in argv]
    fifo = Path(next(a for a in argv if "input" in a or a == "/dev/zero"))
    if folder:
        fifo.mkdir()
    elif fifo.parent == tmp_path:
        os.mkfifo(fifo)
    assert main(argv) in (2, Exit.BAD_INPUT)
    err = " ".join(capsys.readouterr().err.split())
    assert str(fifo) in err and any(m in err for m in ("not a regular file",
                                                        "unsupported trace format")), err


# --- exit codes: what docs/security.md and the guides document, for every command ------------

EXITS: list[tuple[str, list[str], int]] = [
    ("simulate: bad input", ["simulate", "--generate", "40", "--set", "W=nan"], 2),
    ("search: bad input", ["search", "--generate", "40", "--budget", "0", "--workers", "0"], 2),
    ("front: not a run", ["front", "{tmp}"], 2),
    ("report: not a run", ["report", "{tmp}"], 2),
    ("select: not a run", ["select", "{tmp}", "--knee"], 2),
    ("export: not a config", ["export", "{tmp}/missing.json", "--format", "slurm"], 2),
    ("compile: unknown policy", ["compile", "--policy", "nope"], 2),
    ("retune: bad spec", ["retune", "--spec", "{tmp}/missing.yaml"], Exit.BAD_INPUT),
    ("retune: too few jobs", ["retune", "--spec", "{spec}"], Exit.TOO_FEW_JOBS),
    ("an unknown command", ["nope"], 2),
    ("policies: an unknown option", ["policies", "--nope"], 2),
    ("profiles: fine", ["profiles"], 0),
]


@pytest.mark.parametrize(("argv", "code"), [e[1:] for e in EXITS], ids=[e[0] for e in EXITS])
def test_each_command_exits_as_documented(tmp_path: Path, argv: list[str], code: int,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """0 done, 2 bad input (a one-line message, or argparse's usage), retune's own codes
    (docs/guide/retune.md); never 1, which is a traceback."""
    write_trace(tmp_path / "trace.csv", 20)
    spec = write_spec(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{spec}", str(spec)) for a in argv]
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse
        got = int(exc.code or 0)
    err = capsys.readouterr().err
    assert got == code, err
    assert "Traceback" not in err
    assert code == 0 or err.strip(), "a refusal says why"
