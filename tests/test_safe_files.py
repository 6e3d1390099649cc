"""Safe files: what users read or exchange is JSON / YAML / Parquet / CSV; the only pickle
read is a run's own checkpoint, after its checksum; YAML is read with ``safe_load``."""

from __future__ import annotations

import hashlib
import json
import pickle
import re
from pathlib import Path

import pandas as pd
import yaml

from paretosearch.retune import RetuneSpec, retune
from tests.test_retune import write_spec, write_trace

ROOT = Path(__file__).resolve().parents[1]
UNSAFE = re.compile(r"pickle\.loads?\(|yaml\.load\(|yaml\.unsafe_load|Loader=yaml\.(Unsafe|Full)?"
                    r"Loader|read_pickle|allow_pickle=True|joblib\.load|dill\.load|marshal\.load")


def test_no_code_deserialises_unsafely_but_the_checksummed_checkpoint() -> None:
    found = [(path.relative_to(ROOT).as_posix(), line.strip())
             for package in ("paretosearch", "simulator", "policies", "benchmarks")
             for path in sorted((ROOT / package).rglob("*.py"))
             for line in path.read_text().splitlines() if UNSAFE.search(line)]
    assert found == [("paretosearch/store.py",
                      "return pickle.loads(blob)  # our own file, checksum verified")]


class _Planted:
    """A pickle that, if ever loaded, leaves a mark on disk."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.mark),))  # type: ignore[return-value]


def test_a_warm_start_reads_the_previous_front_not_its_pickles(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.csv", 900)
    first = retune(RetuneSpec.load(write_spec(tmp_path)))
    # someone plants a pickle in the published run, with a matching checksum
    mark = tmp_path / "unpickled"
    blob = pickle.dumps(_Planted(mark))
    for pkl in (first.run / "checkpoints").glob("gen-*.pkl"):
        pkl.write_bytes(blob)
        pkl.with_suffix(".sha256").write_text(hashlib.sha256(blob).hexdigest())
    write_trace(tmp_path / "trace.csv", 1000)
    second = retune(RetuneSpec.load(write_spec(tmp_path)))
    assert second.summary["warm_start"]["configs"] > 0 and not mark.exists()
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
            assert path.is_dir() or path.suffix in (".jsonl", ".md", ".png", ".db", ".pkl",
                                                    ".sha256"), path
