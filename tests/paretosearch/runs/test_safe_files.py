"""Safe files: what users read or exchange is JSON / YAML / Parquet / CSV; nothing in the
project unpickles anything (a search resumes by replaying its journal); YAML is read with
``safe_load``."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from paretosearch.cli import main
from paretosearch.io import MAX_DOCUMENT
from paretosearch.runs.store import RunStore
from paretosearch.search.spea2 import Progress
from paretosearch.service.api import PolicySearch, SearchConfig
from paretosearch.service.retune import Exit, RetuneSpec, retune
from simulator.errors import ParetoSearchError
from tests.helpers.data import ROOT
from tests.helpers.runs import SMALL, front_key, journal_keys, write_spec, write_trace

UNSAFE = re.compile(r"\b(import|from) (pickle|cloudpickle|dill|joblib|marshal|shelve)\b|"
                    r"pickle\.|yaml\.load\(|yaml\.unsafe_load|Loader=yaml\.(Unsafe|Full)?Loader|"
                    r"read_pickle|allow_pickle=True|joblib\.load|dill\.load|marshal\.load")


def test_no_code_deserialises_unsafely() -> None:
    assert UNSAFE.search("blob = pickle.loads(data)") and UNSAFE.search("import cloudpickle")
    assert UNSAFE.search("np.load(path, allow_pickle=True)")  # the pattern catches them
    found = [(path.relative_to(ROOT).as_posix(), line.strip())
             for package in ("paretosearch", "simulator", "policies", "benchmarks")
             for path in sorted((ROOT / package).rglob("*.py"))
             for line in path.read_text().splitlines() if UNSAFE.search(line)]
    # the one exception: the unpickler that builds exceptions and plain values only, for what
    # distributed unpickles itself (docs/security.md); test_hostile_catalogue.py attacks it
    trust = "paretosearch/search/trust.py"
    assert [f for f in found if f[0] != trust] == []
    assert "def find_class(" in (ROOT / trust).read_text()


class _Planted:
    """A pickle that, if ever loaded, leaves a mark on disk."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.mark),))  # type: ignore[return-value]


def _plant(folder: Path, mark: Path) -> None:
    """Hostile pickles, with matching checksums, where the old checkpoints lived."""
    blob = pickle.dumps(_Planted(mark))
    (folder / "checkpoints").mkdir(exist_ok=True)
    for generation in (1, 2, 3):
        pkl = folder / "checkpoints" / f"gen-{generation:05d}.pkl"
        pkl.write_bytes(blob)
        pkl.with_suffix(".sha256").write_text(hashlib.sha256(blob).hexdigest() + "\n")


def test_a_resume_replays_the_journal_and_never_opens_a_planted_pickle(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    whole = PolicySearch(config=SearchConfig(settings=SMALL, jobs=200), store=tmp_path / "whole")
    whole.SetPreference("jct")
    expected = whole.run()

    def stop(progress: Progress) -> None:
        if progress.generation == 2:
            raise KeyboardInterrupt

    run = tmp_path / "run"
    cut = PolicySearch(config=SearchConfig(settings=SMALL, jobs=200), store=run)
    cut.SetPreference("jct")
    with pytest.raises(KeyboardInterrupt):
        cut.run(stop)
    evaluated = journal_keys(run)
    mark = tmp_path / "unpickled"
    _plant(run, mark)
    again = PolicySearch(config=SearchConfig(settings=SMALL, jobs=200), store=run)
    again.SetPreference("jct")
    with caplog.at_level(logging.WARNING, logger="paretosearch"):
        front = again.run(resume=True)
    assert not mark.exists()
    assert "never read (a pickle can run code)" in caplog.text and "replaying" in caplog.text
    assert front_key(front) == front_key(expected)
    keys = journal_keys(run)
    assert keys[:len(evaluated)] == evaluated and len(keys) == len(set(keys))  # none twice
    assert len(keys) == len(journal_keys(tmp_path / "whole"))


def test_a_warm_start_reads_the_previous_front_not_its_pickles(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    first = retune(RetuneSpec.load(write_spec(tmp_path)))
    # someone plants a pickle in the published run, with a matching checksum
    mark = tmp_path / "unpickled"
    _plant(first.run, mark)
    write_trace(tmp_path / "trace.csv", 1000)
    second = retune(RetuneSpec.load(write_spec(tmp_path)))
    assert second.summary.start.warm_start.configs > 0 and not mark.exists()
    # everything a run publishes for people and other tools is plain data
    for path in sorted(second.run.rglob("*")):
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".parquet":
            assert len(pd.read_parquet(path)) > 0
        elif path.suffix in (".yaml", ".yml"):
            yaml.safe_load(path.read_text())
        elif path.suffix == ".html":  # the interactive report: one page, nothing fetched
            assert path.read_text().startswith("<!DOCTYPE html>") and "<script src" not in \
                path.read_text()
        else:
            assert path.is_dir() or path.suffix in (".jsonl", ".md", ".png", ".db", ".log",
                                                    ".lock"), path


# --- run folders from untrusted places ----------------------------------------------------

def _copy(small_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    return run


@pytest.mark.parametrize("name", ["front.json", "run.json", "chosen.json"])
def test_a_link_out_of_a_run_folder_is_refused(small_run: Path, tmp_path: Path, name: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(small_run, tmp_path)
    secret = tmp_path / "secret.json"  # another file of the user's, valid JSON even
    shutil.copy(run / name, secret)
    (run / name).unlink()
    (run / name).symlink_to(secret)
    capsys.readouterr()
    command = {"front.json": ["front", str(run)], "run.json": ["select", str(run), "--knee"],
               "chosen.json": ["export", str(run), "--format", "kueue"]}[name]
    assert main(command) == Exit.BAD_INPUT
    err = " ".join(capsys.readouterr().err.split())
    assert f"a link to {secret}, outside {run}; refused" in err
    inside = run / f"copy-{name}"  # a link that stays inside the run is followed
    secret.rename(inside)
    (run / name).unlink()
    (run / name).symlink_to(inside.name)
    assert main(command) == 0


def test_a_fifo_or_an_oversized_file_is_refused_without_waiting(
        small_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(small_run, tmp_path)
    (run / "front.json").unlink()
    os.mkfifo(run / "front.json")  # opening it for reading would block forever
    capsys.readouterr()
    assert main(["front", str(run)]) == Exit.BAD_INPUT
    assert "front.json: not a regular file; refused" in capsys.readouterr().err
    (run / "front.json").unlink()
    with open(run / "front.json", "wb") as f:  # sparse: takes no disk
        f.truncate(MAX_DOCUMENT + 1)
    assert main(["front", str(run)]) == Exit.BAD_INPUT
    err = " ".join(capsys.readouterr().err.split())
    assert f"{MAX_DOCUMENT + 1:,} bytes, more than the {MAX_DOCUMENT:,}" in err


def test_a_journal_linked_out_of_the_run_stops_a_resume(small_run: Path,
                                                        tmp_path: Path) -> None:
    run = _copy(small_run, tmp_path)
    (tmp_path / "elsewhere.jsonl").write_text((run / "evaluations.jsonl").read_text())
    (run / "evaluations.jsonl").unlink()
    (run / "evaluations.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(ParetoSearchError, match="outside"):
        RunStore(run).read_journal()


def test_current_is_followed_only_into_the_runs_folder(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    spec = write_spec(tmp_path)
    first = retune(RetuneSpec.load(spec))
    out = tmp_path / "out"
    planted = tmp_path / "planted"  # someone's run, outside OUT/runs/
    shutil.copytree(first.run, planted)
    (out / "current").unlink()
    (out / "current").symlink_to(planted)
    capsys.readouterr()
    assert main(["retune", "--spec", str(spec)]) == Exit.BAD_INPUT
    err = " ".join(capsys.readouterr().err.split())
    assert f"points at {planted}, not at a run in {out / 'runs'}; refused" in err
    (out / "current").unlink()
    (out / "current").symlink_to(Path("runs") / first.run.name)
    # a link planted among the runs is not taken for an interrupted run to resume
    (out / "runs" / "99999999-999999").symlink_to(planted)
    write_trace(tmp_path / "trace.csv", 1000)
    second = retune(RetuneSpec.load(spec))
    assert second.run.parent == out / "runs" and not second.run.is_symlink()
    assert second.run != planted and second.summary.start.warm_start.source == str(first.run)
