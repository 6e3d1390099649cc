"""The hostile catalogue (issue 41), a run's journals and its Optuna copy: a damaged or altered
line of ``evaluations.jsonl`` or ``started.jsonl`` is skipped with a warning naming the file
and the line (evaluated or bred again, never trusted); a damaged ``optuna.log`` stops the
resume naming the file and the line, and nothing of the run is touched."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from paretosearch.cli import main
from paretosearch.objectives import parse_objectives
from paretosearch.runs.optuna_copy import OptunaCopy
from paretosearch.runs.store import RunStore, param_key
from paretosearch.search.evaluation import SearchSpace
from paretosearch.search.spea2 import _fits
from paretosearch.service.retune import Exit
from simulator.errors import ParetoSearchError
from tests.helpers.data import ROOT
from tests.helpers.runs import write_spec, write_trace

pytestmark = pytest.mark.timeout(120)

OBJECTIVES = parse_objectives(["jct:avg", "pred_err:p99"])
SPACE = SearchSpace.of("wfq")
GOOD = {"T": 4.5, "W": 1.4, "zeta_min": 0.4, "delta": 0.6}
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def run_copy(small_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    return run


def _evaluation(params: object, record: object, key: object = None) -> str:
    key = param_key(params) if key is None and isinstance(params, dict) else key
    return json.dumps({"key": key, "params": params, "record": record})


RECORD = {"jct:avg": 1.0, "pred_err:p99": 2.0}
EVALUATIONS: list[tuple[str, str | bytes]] = [
    ("not JSON", "x"), ("a list", "[]"), ("null", "null"), ("a number", "1"),
    ("deep nesting", DEEP), ("not UTF-8", b"\xff\xfe{}"),
    ("cut short", _evaluation(GOOD, RECORD)[:40]),
    ("a key not its parameters'", _evaluation(GOOD, RECORD, key="{}")),
    ("parameters as a list", _evaluation([1, 2], RECORD, key="[1, 2]")),
    ("a parameter out of its domain", _evaluation({**GOOD, "T": -1e308}, RECORD)),
    ("a parameter as text", _evaluation({**GOOD, "T": "x"}, RECORD)),
    ("a parameter as a list", _evaluation({**GOOD, "T": [1]}, RECORD)),
    ("a NaN parameter", _evaluation({**GOOD, "T": float("nan")}, RECORD)),
    ("a 400-digit parameter", _evaluation({**GOOD, "T": 10**400}, RECORD)),
    ("a parameter the space has not", _evaluation({**GOOD, "evil": 1}, RECORD)),
    ("a parameter missing", _evaluation({"T": 4.5}, RECORD)),
    ("a record as a list", _evaluation(GOOD, [1.0])),
    ("a metric as text", _evaluation(GOOD, {**RECORD, "jct:avg": "1"})),
    ("an infinite metric", _evaluation(GOOD, {**RECORD, "jct:avg": float("inf")})),
    ("a boolean metric", _evaluation(GOOD, {**RECORD, "jct:avg": True})),
    ("a 400-digit metric", _evaluation(GOOD, {**RECORD, "jct:avg": 10**400})),
    ("an empty record", _evaluation(GOOD, {})),
    ("an objective missing", _evaluation(GOOD, {"jct:p50": 1.0})),
]


def _append(path: Path, line: str | bytes) -> int:
    """Append ``line`` to the file; return its line number."""
    with path.open("ab") as f:
        f.write(line if isinstance(line, bytes) else line.encode())
        f.write(b"\n")
    return len(path.read_bytes().splitlines())


@pytest.mark.parametrize("line", [line for _, line in EVALUATIONS],
                         ids=[name for name, _ in EVALUATIONS])
def test_a_damaged_journal_line_is_named_and_evaluated_again(
        run_copy: Path, line: str | bytes, caplog: pytest.LogCaptureFixture) -> None:
    store = RunStore(run_copy)
    before = store.read_journal(_fits(SPACE, OBJECTIVES))
    n = _append(run_copy / "evaluations.jsonl", line)
    store.append(param_key(GOOD), GOOD, RECORD)  # a line after it is read
    with caplog.at_level(logging.WARNING):
        after = store.read_journal(_fits(SPACE, OBJECTIVES))
    assert after == {**before, param_key(GOOD): (GOOD, RECORD)}
    assert f"{run_copy / 'evaluations.jsonl'}, line {n}:" in caplog.text


STARTED: list[tuple[str, str | bytes]] = [
    ("not JSON", "{"), ("a list", "[]"), ("deep nesting", DEEP), ("not UTF-8", b"\xff"),
    ("an infinite 'after'", '{"after": 1e999, "params": ' + json.dumps(GOOD) + "}"),
    ("'after' as text", json.dumps({"after": "1", "params": GOOD})),
    ("a negative 'after'", json.dumps({"after": -5, "params": GOOD})),
    ("a boolean 'after'", json.dumps({"after": True, "params": GOOD})),
    ("parameters as pairs", json.dumps({"after": 0, "params": [["T", 4.5]]})),
    ("a parameter as text", json.dumps({"after": 0, "params": {**GOOD, "T": "x"}})),
    ("a parameter the space has not", json.dumps({"after": 0, "params": {**GOOD, "evil": 1}})),
    ("no parameters", json.dumps({"after": 0})),
]


@pytest.mark.parametrize("line", [line for _, line in STARTED],
                         ids=[name for name, _ in STARTED])
def test_a_damaged_started_line_is_named_and_bred_again(
        tmp_path: Path, line: str | bytes, caplog: pytest.LogCaptureFixture) -> None:
    store = RunStore(tmp_path)
    store.append_started(0, GOOD)
    n = _append(tmp_path / "started.jsonl", line)
    store.append_started(1, {**GOOD, "T": 5.0})
    with caplog.at_level(logging.WARNING):
        assert store.read_started(SPACE.holds) == [(0, GOOD), (1, {**GOOD, "T": 5.0})]
    assert f"{tmp_path / 'started.jsonl'}, line {n}:" in caplog.text


def test_a_resume_over_an_altered_journal_names_the_lines_and_publishes_none_of_them(
        run_copy: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = run_copy / "evaluations.jsonl"
    kept = len(journal.read_bytes().splitlines())
    for _, line in EVALUATIONS[7:16:2]:  # altered evaluations that still parse
        _append(journal, line)
    with caplog.at_level(logging.WARNING):
        assert main(["search", "--resume", str(run_copy), "--workers", "0"]) == 0
    for n in range(kept + 1, kept + 6):
        assert f"evaluations.jsonl, line {n}:" in caplog.text
    table = pd.read_parquet(run_copy / "records.parquet")
    assert len(table) == kept and "param.evil" not in table  # the search's own, nothing else


OPTUNA: list[tuple[str, str | bytes, str]] = [
    ("not JSON", "x", "line 3 is not JSON"),
    ("a list", "[]", "line 3 is not an Optuna operation"),
    ("deep nesting", DEEP, "line 3 is not JSON"), ("not UTF-8", b"\xff\xfe", "line 3 is not JSON"),
    ("op_code as text", '{"op_code": "4"}', "line 3 is not an Optuna operation"),
    ("an unknown operation", '{"op_code": 99, "worker_id": "w"}', "cannot replay it"),
    ("a trial without its fields", '{"op_code": 4, "worker_id": "w"}', "cannot replay it"),
]


@pytest.mark.parametrize(("line", "message"), [(line, m) for _, line, m in OPTUNA],
                         ids=[name for name, _, _ in OPTUNA])
def test_a_damaged_optuna_copy_is_named_with_its_line(run_copy: Path, line: str | bytes,
                                                      message: str) -> None:
    log = run_copy / "optuna.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:2]) + (line if isinstance(line, bytes) else line.encode())
                    + b"\n" + b"".join(lines[2:]))
    before = log.read_bytes()
    with pytest.raises(ParetoSearchError, match=f"{log}: the run's Optuna copy is damaged") as e:
        OptunaCopy(log, OBJECTIVES, SPACE)
    assert message in str(e.value)
    assert log.read_bytes() == before  # left as it is, for whoever looks into it


def test_a_resume_with_a_damaged_optuna_copy_stops_and_touches_nothing(
        run_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _append(run_copy / "optuna.log", "x")
    n = len((run_copy / "optuna.log").read_bytes().splitlines())
    _append(run_copy / "optuna.log", "{}")  # a line after it: the damage is not a cut-short end
    before = {p.name: p.read_bytes() for p in run_copy.iterdir() if p.is_file()}
    assert main(["search", "--resume", str(run_copy), "--workers", "0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{run_copy / 'optuna.log'}: the run's Optuna copy is damaged (line {n}" in err, err
    after = {p.name: p.read_bytes() for p in run_copy.iterdir() if p.is_file()}
    assert {k: v for k, v in after.items() if k != "run.lock"} == \
        {k: v for k, v in before.items() if k != "run.lock"}


# --- a full disk: a file-size limit (RLIMIT_FSIZE) in a child process, the kernel's own EFBIG ---

LIMIT = ("import resource, sys\n"
         "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))\n")


def _limited(limit: int, code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Python ``code`` with ``argv`` in a process that may not write a file past ``limit``
    bytes (a write past it fails with EFBIG, as one on a full disk fails with ENOSPC)."""
    return subprocess.run([sys.executable, "-c", LIMIT + code, str(limit), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=100)


CLI = "from paretosearch.cli import main\nsys.exit(main(sys.argv[2:]))\n"


def test_a_journal_append_past_the_disk_is_named_and_loses_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.append(param_key(GOOD), GOOD, RECORD)
    size = (tmp_path / "evaluations.jsonl").stat().st_size
    child = _limited(size + 100, "from paretosearch.runs.store import RunStore\n"
                     "RunStore(sys.argv[2]).append('k', {}, {f'm{i}': 1.0 for i in range(99)})",
                     str(tmp_path))
    assert child.returncode == 1 and "ParetoSearchError" in child.stderr, child.stderr
    assert f"{tmp_path / 'evaluations.jsonl'}: cannot write: File too large" in child.stderr
    store.append(param_key({**GOOD, "T": 5.0}), {**GOOD, "T": 5.0}, RECORD)  # disk freed
    assert list(store.read_journal().values()) == [(GOOD, RECORD), ({**GOOD, "T": 5.0}, RECORD)]


def test_a_full_disk_at_the_optuna_copy_is_named(run_copy: Path) -> None:
    # a child that compiles nothing: numba writes a cache index before its data, so a
    # compile under the limit would leave an index naming a file never written
    log = run_copy / "optuna.log"
    child = _limited(log.stat().st_size + 100, (
        "from pathlib import Path\n"
        "from paretosearch.runs.optuna_copy import OptunaCopy\n"
        "from paretosearch.runs.store import RunStore\n"
        "from paretosearch.search.evaluation import SearchSpace\n"
        "from paretosearch.objectives import parse_objectives\n"
        "run = Path(sys.argv[2])\n"
        "copy = OptunaCopy(run / 'optuna.log', parse_objectives(['jct:avg', 'pred_err:p99']),\n"
        "                  SearchSpace.of('wfq'))\n"
        "evaluations = list(RunStore(run).read_journal().values())\n"
        "copy.add(evaluations + [({**p, 'T': p['T'] * 1.01}, r) for p, r in evaluations], {})\n"),
        str(run_copy))
    assert child.returncode == 1 and "ParetoSearchError" in child.stderr, child.stderr
    assert f"{log}: cannot write: File too large; free some space and resume" in child.stderr
    OptunaCopy(log, OBJECTIVES, SPACE)  # a cut-short last line is repaired, the rest reads


def test_a_full_disk_at_the_retune_lock_exits_6(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.csv", 200)
    spec = write_spec(tmp_path)
    child = _limited(0, CLI, "retune", "--spec", str(spec))
    assert child.returncode == Exit.FAILED and "Traceback" not in child.stderr, child.stderr
    assert "retune.lock: cannot write: File too large" in " ".join(child.stderr.split())
