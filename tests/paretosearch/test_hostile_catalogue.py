"""The hostile catalogue (issue 41): inputs an attacker controls, each with its verdict.

Every case asserts one of: refused with the project's error naming the file, field or value
(exit 2 in the CLI); or handled as documented (docs/security.md). Never a traceback, a hang
(each case has a timeout), garbage accepted, code run or data lost. The hostile Dask worker
is a real ``dask worker`` process; links and FIFOs are real files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from distributed import Client

from paretosearch.cli import main
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
