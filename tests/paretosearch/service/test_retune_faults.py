"""The nightly retune under faults: a killed retune or Dask worker, full and read-only disks,
writes failing anywhere, a failed run left behind, an unreachable scheduler."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from paretosearch.cli import main
from paretosearch.service.retune import Exit, RetuneSpec, retune
from tests.helpers.data import ROOT
from tests.helpers.runs import front_of, journal, write_spec, write_trace


def _cli(spec: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "paretosearch.cli", "retune", "--spec",
                             str(spec)], cwd=ROOT, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _two_nights(folder: Path, settings: dict[str, Any]) -> Path:
    """Night 1 published in ``folder``; the trace grown for night 2; night 2's spec."""
    folder.mkdir(exist_ok=True)
    write_trace(folder / "trace.csv", 900)
    retune(RetuneSpec.load(write_spec(folder, search=settings)))
    write_trace(folder / "trace.csv", 1100)
    return write_spec(folder, search=settings)


@pytest.mark.slow
@pytest.mark.dask
def test_ctrl_c_stops_a_retune_cleanly_and_the_next_one_resumes(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.csv", 1000)
    spec = write_spec(tmp_path, workers=2, window={"seconds": 1e7, "min_jobs": 50},
                      search={"budget": 200, "pop_size": 20, "offspring": 20, "seed": 5})
    proc = subprocess.Popen([sys.executable, "-m", "paretosearch.cli", "retune", "--spec",
                             str(spec)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    runs = tmp_path / "out" / "runs"
    deadline = time.time() + 120
    while not [r for r in runs.glob("*/evaluations.jsonl") if len(journal(r.parent)) >= 20]:
        if time.time() > deadline:
            pytest.fail(f"retune made no progress to stop in 120 s: {proc.communicate()!r}")
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: to every process of the group
    _, err = proc.communicate(timeout=120)
    text = " ".join(err.decode().split())
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "Error" not in text and "WARNING" not in text, text
    assert "interrupted: stopped; nothing was published" in text
    assert not (tmp_path / "out" / "current").exists()
    (run,) = runs.iterdir()
    done = len(journal(run))
    outcome = retune(RetuneSpec.load(spec))
    assert outcome.run == run and outcome.summary.start.resumed
    keys = [row["key"] for row in journal(run)]
    assert len(keys) == len(set(keys)) == 200 > done  # went on, nothing evaluated twice


@pytest.mark.slow
@pytest.mark.parametrize("when", ["at the first evaluation", "after a generation"])
def test_sigkill_then_rerun_resumes_and_never_publishes_a_partial_run(tmp_path: Path,
                                                                      when: str) -> None:
    settings = {"budget": 40, "pop_size": 10, "offspring": 10, "seed": 5}
    expected = retune(RetuneSpec.load(_two_nights(tmp_path / "undisturbed", settings)))
    spec = _two_nights(tmp_path / "killed", settings)
    night1 = (tmp_path / "killed" / "out" / "current").resolve()
    proc = _cli(spec)
    runs = tmp_path / "killed" / "out" / "runs"
    deadline = time.time() + 120
    while not [r for r in runs.glob("*/evaluations.jsonl") if r.parent != night1
               and (when.startswith("at") or len(journal(r.parent)) > settings["pop_size"])]:
        if time.time() > deadline:
            pytest.fail(f"retune made no progress to kill in 120 s: {proc.communicate()[0]!r}")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (run,) = [r for r in runs.iterdir() if r != night1]
    assert (tmp_path / "killed" / "out" / "current").resolve() == night1  # nothing published
    assert 0 < len(journal(run)) < 40
    rerun = _cli(spec)
    output = rerun.communicate(timeout=300)[0].decode()
    assert rerun.returncode == 0, output
    assert f"resuming {run}" in output and "warm start from" in output
    assert (tmp_path / "killed" / "out" / "current").resolve() == run
    keys = [row["key"] for row in journal(run)]
    assert len(keys) == len(set(keys))  # nothing ran twice
    assert front_of(run) == front_of(expected.run)


@pytest.mark.dask
def test_a_killed_dask_worker_still_gives_the_same_run(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    settings = {"budget": 36, "pop_size": 6, "offspring": 6, "seed": 8}
    serial = tmp_path / "serial"
    serial.mkdir()
    write_trace(serial / "trace.csv", 900)
    expected = retune(RetuneSpec.load(write_spec(serial, search=settings)))
    write_trace(tmp_path / "trace.csv", 900)
    spec = RetuneSpec.load(write_spec(tmp_path, search=settings))
    killed: list[int] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        def kill_one(progress: Any) -> None:
            if not killed:  # after the first generation: one worker dies, the nanny restarts it
                pid = next(iter(client.run(os.getpid).values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        outcome = retune(spec, connect=lambda: contextlib.nullcontext(client),
                         on_generation=kill_one)
        assert killed and killed[0] not in client.run(os.getpid).values()
    assert outcome.exit == Exit.PUBLISHED
    assert front_of(outcome.run) == front_of(expected.run)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A small tmpfs at ``path`` (real ENOSPC and EROFS); skips where mounting is not allowed."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def _publish_one(fs: Path) -> tuple[Path, Path]:
    """A first night published on ``fs``: (its spec, the run ``current`` points at)."""
    write_trace(fs / "trace.csv", 900)
    spec = write_spec(fs)
    assert main(["retune", "--spec", str(spec)]) == 0
    return spec, (fs / "out" / "current").resolve()


def test_a_full_disk_fails_clearly_and_leaves_current_alone(tmp_path: Path,
                                                            capsys: Any) -> None:
    with tmpfs(tmp_path / "fs", "64m") as fs:
        spec, published = _publish_one(fs)
        used = os.statvfs(fs)
        used_kib = (used.f_blocks - used.f_bfree) * used.f_frsize // 1024
        _remount(fs, f"size={used_kib + 96}k")  # room for a little, not for a new run
        write_trace(fs / "trace.csv", 1100)
        assert main(["retune", "--spec", str(spec)]) == Exit.FAILED
        err = capsys.readouterr().err
        assert "No space left on device" in err or "disk is full" in err
        assert f"'current' still points at {published}" in err
        assert (fs / "out" / "current").resolve() == published
        _remount(fs, "size=64m")  # space freed: the rerun resumes and publishes
        assert main(["retune", "--spec", str(spec)]) == 0
        assert (fs / "out" / "current").resolve() != published


ENOSPC = OSError(errno.ENOSPC, "No space left on device")
FULL_SQLITE = sqlite3.OperationalError("database or disk is full")


def _fail(error: BaseException) -> Any:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise error
    return fail


@pytest.mark.parametrize(("target", "error"), [
    ("paretosearch.io.os.replace", ENOSPC),  # the first file published atomically
    ("paretosearch.runs.store.RunStore.append", ENOSPC),  # the journal
    ("paretosearch.runs.store.RunStore.write_progress", ENOSPC),  # a generation's front
    ("paretosearch.search.cache.EvaluationCache.put", FULL_SQLITE),
    ("paretosearch.runs.optuna_copy.OptunaCopy.add", ENOSPC),
    ("paretosearch.runs.report.plot_front", ENOSPC),  # the report, at the very end
    ("paretosearch.service.retune._point", ENOSPC),  # moving current itself
])
def test_a_write_failing_anywhere_fails_clearly_and_a_rerun_publishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, target: str,
        error: BaseException) -> None:
    spec, published = _publish_one(tmp_path)
    write_trace(tmp_path / "trace.csv", 1000)
    monkeypatch.setattr(target, _fail(error))
    assert main(["retune", "--spec", str(spec)]) == Exit.FAILED
    err = capsys.readouterr().err
    assert str(error).split("] ")[-1] in err and "Nothing was published" in err
    assert f"'current' still points at {published}" in err
    assert (tmp_path / "out" / "current").resolve() == published
    monkeypatch.undo()
    assert main(["retune", "--spec", str(spec)]) == 0
    assert (tmp_path / "out" / "current").resolve() != published


def _ctrl_c_then_cleanup_fails(*args: Any, **kwargs: Any) -> None:
    """Ctrl-C inside Optuna's journal lock, whose cleanup then fails in turn (seen once in a
    full suite: a rename of a lock file the interruption had already moved)."""
    try:
        raise KeyboardInterrupt
    finally:
        raise FileNotFoundError(2, "No such file or directory", "optuna.log.lock.rename")


@pytest.mark.parametrize("command", ["retune", "search"])
def test_an_error_while_ctrl_c_unwinds_is_still_an_interruption(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, command: str) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    spec = write_spec(tmp_path)
    monkeypatch.setattr("paretosearch.runs.optuna_copy.OptunaCopy.add",
                        _ctrl_c_then_cleanup_fails)
    args = (["retune", "--spec", str(spec)] if command == "retune" else
            ["search", "--generate", "100", "--budget", "12", "--pop-size", "4",
             "--offspring", "4", "--workers", "0", "--run-dir", str(tmp_path / "run")])
    assert main(args) == 130
    err = capsys.readouterr().err
    assert "interrupted:" in err and "FileNotFoundError" not in err
    assert not (tmp_path / "out" / "current").exists()


def test_a_failed_run_on_an_older_window_is_named_and_left_as_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    spec, published = _publish_one(tmp_path)
    write_trace(tmp_path / "trace.csv", 1000)
    monkeypatch.setattr("paretosearch.runs.store.RunStore.write_progress", _fail(ENOSPC))
    assert main(["retune", "--spec", str(spec)]) == Exit.FAILED
    monkeypatch.undo()
    (failed,) = [r for r in (tmp_path / "out" / "runs").iterdir() if r != published]
    before = sorted(p.name for p in failed.rglob("*"))
    write_trace(tmp_path / "trace.csv", 1100)  # the trace grew: the failed run's window is gone
    capsys.readouterr()
    assert main(["retune", "--spec", str(spec)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    current = (tmp_path / "out" / "current").resolve()
    assert current not in (published, failed) and "resuming" not in out
    why = "it was interrupted on another window or spec"
    assert f"not resumed: {failed} ({why}), left as it is" in out
    assert json.loads((current / "retune.json").read_text())["not_resumed"] == {
        "run": str(failed), "why": why}
    assert f"- not resumed: `{failed}` ({why})" in (current / "report.md").read_text()
    assert sorted(p.name for p in failed.rglob("*")) == before  # left as it is
    assert main(["retune", "--spec", str(spec)]) == 0  # the next night: nothing passed over
    assert json.loads((tmp_path / "out" / "current" / "retune.json").read_text())[
        "not_resumed"] is None


def test_an_unreachable_scheduler_fails_clearly_before_any_run(tmp_path: Path,
                                                               capsys: Any) -> None:
    import dask.config

    write_trace(tmp_path / "trace.csv", 900)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = main(["retune", "--spec", str(write_spec(tmp_path)),
                     "--scheduler", "tcp://127.0.0.1:9"])
    assert code == Exit.FAILED
    assert "127.0.0.1:9" in capsys.readouterr().err
    assert not (tmp_path / "out" / "runs").exists()


def test_a_read_only_folder_fails_clearly_and_leaves_current_alone(tmp_path: Path,
                                                                   capsys: Any) -> None:
    with tmpfs(tmp_path / "fs", "64m") as fs:
        spec, published = _publish_one(fs)
        _remount(fs, "ro")
        assert main(["retune", "--spec", str(spec)]) == Exit.FAILED
        err = capsys.readouterr().err
        assert "cannot write here: Read-only file system" in err
        assert (fs / "out" / "current").resolve() == published
        _remount(fs, "rw")
