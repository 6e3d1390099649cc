"""The hostile catalogue, part 1 (issue 41): Dask workers, schedulers and cluster files an
attacker controls, each with its verdict (the rest: ``test_hostile_catalogue.py``).

Every case asserts one of: refused with the project's error naming the file, field or value;
or handled as documented (docs/security.md). Never a traceback, a hang (each case has a
timeout), or code run. The hostile Dask worker is a real ``dask worker`` process.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask.config
import distributed
import distributed.deploy.cluster
import distributed.utils
import pytest
from distributed import Client

from paretosearch.cli import main
from paretosearch.search.cluster import InvalidClusterConfig, load_cluster_spec
from paretosearch.search.trust import (
    MAX_RECORD_FIELDS,
    UntrustedResult,
    check_address,
    guarded_unpickling,
    plain_records,
    plain_work,
)
from simulator.errors import ParetoSearchError
from tests.helpers.data import ROOT
from tests.paretosearch.search.test_cluster import _dask_processes

pytestmark = pytest.mark.timeout(120)

TINY_SEARCH = ["search", "--generate", "40", "--budget", "4", "--pop-size", "2",
               "--offspring", "2", "--seed", "1"]


# --- 1. a hostile Dask worker ------------------------------------------------------------------

@pytest.mark.dask
@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["result", "error"])
def test_a_hostile_worker_runs_no_code_in_the_search(tmp_path: Path, mode: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A worker that answers with a pickle whose loading runs a command: the search refuses
    the answer, names the worker, and the command never runs in the search's process."""
    marker = tmp_path / "marker"
    preload = ROOT / "tests" / "helpers" / "hostile_worker.py"
    with _dask_processes(tmp_path / "dask", workers=1, worker_args=("--preload", str(preload)),
                         env={"HOSTILE_MARKER": str(marker), "HOSTILE_MODE": mode}) as address:
        with Client(address) as probe:
            probe.wait_for_workers(1, timeout=60)
        code = main([*TINY_SEARCH, "--workers", "0", "--scheduler", address,
                     "--run-dir", str(tmp_path / "run")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert "refused" in err and "127.0.0.1" in err, err
    pids = marker.read_text().split() if marker.exists() else []
    assert str(os.getpid()) not in pids


# --- 1. what a worker's answer may be --------------------------------------------------------

GOOD_RECORD = {"jct:avg": 1.0, "wall_s": 0.1}
BAD_ANSWERS: list[tuple[str, Any]] = [
    ("nothing", None), ("text", "records"), ("a number", 3), ("a list", [GOOD_RECORD]),
    ("records as text", {"records": "x"}), ("too few", {"records": []}),
    ("too many", {"records": [GOOD_RECORD, GOOD_RECORD]}),
    ("an extra key", {"records": [GOOD_RECORD], "x": 1}),
    ("a record of text", {"records": ["x"]}), ("an empty record", {"records": [{}]}),
    ("a text value", {"records": [{"jct:avg": "1"}]}),
    ("a bool value", {"records": [{"jct:avg": True}]}),
    ("an infinite value", {"records": [{"jct:avg": math.inf}]}),
    ("a list value", {"records": [{"jct:avg": [1.0]}]}),
    ("a number key", {"records": [{1: 1.0}]}),
    ("an error that is not text", {"error": ["x"]}),
    ("a huge record", {"records": [{f"m{i}": 1.0 for i in range(MAX_RECORD_FIELDS + 1)}]}),
]


@pytest.mark.parametrize("answer", [a for _, a in BAD_ANSWERS], ids=[n for n, _ in BAD_ANSWERS])
def test_a_worker_answer_that_is_not_plain_records_is_refused(answer: Any) -> None:
    with pytest.raises(UntrustedResult, match="record"):
        plain_records(answer, 1)


def test_plain_records_pass_and_a_failure_is_named() -> None:
    assert plain_records({"records": ({"jct:avg": 2, "x": math.nan},)}, 1)[0]["jct:avg"] == 2.0
    with pytest.raises(ParetoSearchError, match="evaluation failed on a Dask worker: Boom"):
        plain_records({"error": "Boom"}, 1)
    assert plain_work(lambda: 1 / 0) == {"error": "ZeroDivisionError: division by zero"}


class _Runs:
    """Unpickled, it would run ``touch MARKER`` (the marker must never appear)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return os.system, (f"touch {self.marker}",)


PAYLOADS: list[tuple[str, Callable[[Path], Any]]] = [
    ("os.system", lambda m: _Runs(m)),
    ("an exception holding os.system", lambda m: ValueError(_Runs(m))),
    ("subprocess.Popen", lambda m: _Reduce(subprocess.Popen, (["touch", str(m)],))),
    ("builtins.eval", lambda m: _Reduce(eval, (f"open({str(m)!r}, 'w')",))),
    ("builtins.exec", lambda m: _Reduce(exec, (f"open({str(m)!r}, 'w')",))),
    ("builtins.open", lambda m: _Reduce(open, (str(m), "w"))),
    ("pathlib.Path.touch", lambda m: _Reduce(Path.touch, (m,))),
    ("a distributed function", lambda m: _Reduce(distributed.utils.import_file, (str(m),))),
]


class _Reduce:
    def __init__(self, call: Any, args: tuple[Any, ...]) -> None:
        self.call, self.args = call, args

    def __reduce__(self) -> tuple[Any, ...]:
        return self.call, self.args


@pytest.mark.parametrize("make", [p for _, p in PAYLOADS], ids=[n for n, _ in PAYLOADS])
def test_guarded_unpickling_builds_no_callable(tmp_path: Path, make: Callable[[Path], Any]
                                               ) -> None:
    marker = tmp_path / "marker"
    data = pickle.dumps(make(marker))
    with guarded_unpickling():
        from distributed.protocol import pickle as dask_pickle

        with pytest.raises(pickle.UnpicklingError, match="refused"):
            dask_pickle.loads(data)
    assert not marker.exists()
    assert dask_pickle.loads is not None  # restored on exit


@pytest.mark.parametrize("value", [ValueError("x"), KeyError("k"), (1, "a", b"b"), bytes,
                                   {"a": [1.5]}, TimeoutError("t")],
                         ids=["ValueError", "KeyError", "a tuple", "the bytes type", "a dict",
                              "TimeoutError"])
def test_guarded_unpickling_keeps_exceptions_and_plain_values(value: Any) -> None:
    from distributed.protocol import pickle as dask_pickle

    with guarded_unpickling():
        back = dask_pickle.loads(pickle.dumps(value))
    assert type(back) is type(value) and repr(back) == repr(value)


# --- 1. which schedulers the search connects to ----------------------------------------------

ADDRESSES: list[tuple[str, bool, str | None]] = [
    ("tls://scheduler.example.org:8786", False, None),
    ("tcp://127.0.0.1:8786", False, None), ("tcp://localhost:8786", False, None),
    ("tcp://[::1]:8786", False, None), ("127.0.0.1:8786", False, None),
    ("tcp://10.1.2.3:8786", True, None),
    ("tcp://10.1.2.3:8786", False, "--allow-plain-tcp"),
    ("tcp://scheduler.example.org:8786", False, "--allow-plain-tcp"),
    ("10.1.2.3:8786", False, "--allow-plain-tcp"), ("tcp://0.0.0.0:8786", False, "plain tcp"),
    ("http://scheduler:8786", False, "expected tls://"), ("ucx://x:1", False, "expected tls://"),
    ("tcp://", False, "expected tls://"), ("tls://", False, "expected tls://"),
]


@pytest.mark.parametrize(("address", "plain_tcp", "refusal"), ADDRESSES)
def test_scheduler_addresses(address: str, plain_tcp: bool, refusal: str | None) -> None:
    if refusal is None:
        assert check_address(address, plain_tcp=plain_tcp) == address
    else:
        with pytest.raises(ParetoSearchError, match=re.escape(refusal)) as caught:
            check_address(address, plain_tcp=plain_tcp)
        assert repr(address) in str(caught.value)


@pytest.mark.parametrize(("address", "message"), [
    ("tcp://10.1.2.3:8786", "--allow-plain-tcp"), ("http://x:1", "expected tls://"),
    ("tcp://127.0.0.1:9", "did not answer")])
def test_cli_search_names_a_refused_or_dead_scheduler(tmp_path: Path, address: str,
                                                      message: str,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        code = main([*TINY_SEARCH, "--scheduler", address, "--run-dir", str(tmp_path / "r")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and message in err and address in err, err


# --- 2. cluster files start Dask cluster managers only -----------------------------------------

CLASSES: list[tuple[str, str, str | None]] = [
    ("subprocess", "Popen", "not a Dask cluster manager"),
    ("builtins", "type", "not a Dask cluster manager"),
    ("builtins", "object", "not a Dask cluster manager"),
    ("pathlib", "Path", "not a Dask cluster manager"),
    ("distributed", "Client", "not a Dask cluster manager"),
    ("distributed", "Scheduler", "not a Dask cluster manager"),
    ("distributed", "Worker", "not a Dask cluster manager"),
    ("os", "system", "has no such class"), ("shutil", "rmtree", "has no such class"),
    ("builtins", "eval", "has no such class"),
    ("dask.distributed", "LocalCluster", None), ("distributed.deploy", "SpecCluster", None),
]


@pytest.mark.parametrize(("module", "cls", "refusal"), CLASSES)
def test_a_cluster_file_names_a_cluster_manager_or_is_refused(tmp_path: Path, module: str,
                                                              cls: str, refusal: str | None
                                                              ) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"version: 1\nmodule: {module}\nclass: {cls}\n"
                    f"args: [[sh, -c, 'touch {tmp_path}/marker']]\n")
    spec = load_cluster_spec(path)
    if refusal is None:
        assert issubclass(spec.cluster_class(), distributed.deploy.cluster.Cluster)
        return
    with pytest.raises(InvalidClusterConfig, match=refusal) as caught:
        spec.start()
    assert str(path) in str(caught.value)
    assert not (tmp_path / "marker").exists()


def test_a_cluster_file_found_in_the_folder_is_named_and_cannot_run_a_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.delenv("PARETOSEARCH_DASK_CLUSTER", raising=False)
    marker = tmp_path / "marker"
    (tmp_path / "dask-cluster.yaml").write_text(
        "version: 1\nmodule: subprocess\nclass: Popen\n"
        f"args: [[sh, -c, 'touch {marker}']]\n")
    assert main([*TINY_SEARCH, "--run-dir", str(tmp_path / "run")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert ("using the cluster file dask-cluster.yaml found in the working directory"
            in caplog.text)  # a warning: shown on stderr by the CLI
    assert "subprocess.Popen" in err and "not a Dask cluster manager" in err
    assert not marker.exists()


