"""``paretosearch compile`` and the line a command prints before it compiles (docs/startup.md):
real processes on an empty kernel cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data import ROOT

LINE = "compiling the simulator's kernels for fifo (first run on this machine, ~"


def _cli(cache: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PARETOSEARCH_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "paretosearch.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)


def _saved(cache: Path) -> set[str]:
    """The source folders whose functions have entries saved (numba's index files)."""
    return {p.parent.name.rsplit("_", 1)[0] for p in cache.rglob("*.nbi")}


@pytest.mark.slow
def test_compile_says_so_once_and_fills_the_cache_for_what_runs(tmp_path: Path) -> None:
    first = _cli(tmp_path, "compile", "--policy", "fifo")
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(LINE) == 1  # piped, not a terminal: said all the same
    # the fluid engine (simulator/fluid), its helpers (simulator/) and FIFO (policies/pcs), no other
    assert _saved(tmp_path) == {"simulator", "fluid", "pcs"}
    again = _cli(tmp_path, "simulate", "--policy", "fifo", "--generate", "50")
    assert again.returncode == 0, again.stderr
    assert "compiling" not in again.stderr  # loaded, not compiled


def test_compile_names_an_unknown_policy() -> None:
    done = _cli(Path("/nonexistent/cache"), "compile", "--policy", "no-such-policy")
    assert done.returncode == 2
    assert "unknown policy 'no-such-policy'" in done.stderr
