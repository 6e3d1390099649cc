"""Reading files as untrusted data: bounded in size, never blocking, YAML without surprises."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from simulator.errors import ParetoSearchError

__all__ = ["MAX_DOCUMENT", "MAX_TABLE", "MAX_YAML_NODES", "read_bounded", "read_data",
           "read_json", "read_yaml", "to_numbers"]

MAX_DOCUMENT = 64 * 2**20
"""The most bytes a document (JSON or YAML: a front, a spec, a profile) may have."""
MAX_TABLE = 2**30
"""The most bytes a table (a trace, a scaling or throughput table, profiling data) may have."""
MAX_YAML_NODES = 100_000
"""The most nodes a YAML document may expand to, its aliases followed (an alias bomb of a
few lines expands to billions)."""


def read_bounded(path: str | Path, limit: int, *, inside: str | Path | None = None) -> bytes:
    """The bytes of ``path``, read as untrusted data: a regular file (a FIFO or a device is
    refused, never waited on) of at most ``limit`` bytes, and, with ``inside``, one that
    lies inside that folder once links are followed (a run directory from a shared or
    someone else's folder cannot point us at other files)."""
    path = Path(path)
    real = path.resolve()
    if inside is not None and not real.is_relative_to(Path(inside).resolve()):
        raise ParetoSearchError(f"{path}: a link to {real}, outside {inside}; refused (files of "
                                "a run directory are read only from inside it)")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO does not wait
    except OSError as exc:
        raise ParetoSearchError(f"{path}: cannot read: {exc.strerror}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before a file object: one of a folder raises
        os.close(fd)
        kind = "a folder, " if stat.S_ISDIR(info.st_mode) else ""
        raise ParetoSearchError(f"{path}: {kind}not a regular file; refused")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > limit:
            raise ParetoSearchError(f"{path}: {info.st_size:,} bytes, more than the {limit:,} "
                                    "such a file may have; refused")
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise ParetoSearchError(f"{path}: more than {limit:,} bytes; refused")
    return data


def read_data(path: str | Path, error: type[ParetoSearchError], what: str,
              limit: int = MAX_TABLE) -> io.BytesIO:
    """The bytes of the ``what`` at ``path`` (:func:`read_bounded`: a regular file, never a
    folder, a FIFO or a device, of at most ``limit`` bytes), or ``error`` naming the file and
    what is wrong with it."""
    try:
        return io.BytesIO(read_bounded(path, limit))
    except ParetoSearchError as exc:
        raise error(f"cannot read the {what}: {exc}") from exc


def read_json(path: str | Path, error: type[ParetoSearchError], what: str) -> Any:
    """The JSON document ``what`` at ``path`` (:func:`read_data`, at most
    :data:`MAX_DOCUMENT` bytes), or ``error`` naming the file and what is wrong: unreadable,
    too large, not JSON, nested too deep."""
    data = read_data(path, error, what, MAX_DOCUMENT)
    try:
        return json.loads(data.getvalue())
    except (ValueError, RecursionError) as exc:
        raise error(f"{path}: cannot read the {what}: {exc}") from exc


def read_yaml(path: str | Path, error: type[ParetoSearchError], what: str) -> Any:
    """The YAML document at ``path`` (``yaml.safe_load``: plain data, no tags that build
    objects), or ``error`` naming the file and what is wrong: unreadable, too large, not
    text, not YAML (a bad date such as 2017-13-45 included), nested too deep, a key given twice
    in one mapping, or expanding past :data:`MAX_YAML_NODES` nodes through its aliases."""
    try:
        text = read_bounded(path, MAX_DOCUMENT).decode()
        _check_expansion(yaml.compose(text, Loader=yaml.SafeLoader), MAX_YAML_NODES)
        return _int64s(yaml.safe_load(text))
    except ParetoSearchError as exc:
        raise error(f"cannot read the {what}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot read the {what}: not UTF-8 text ({exc})") from exc
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        problem = " ".join(str(exc).split()) or type(exc).__name__
        raise error(f"{path}: cannot read the {what}: not valid YAML ({problem})") from exc


def _check_expansion(root: yaml.Node | None, limit: int) -> None:
    """Raise if the node graph, every alias expanded, has more than ``limit`` nodes, or a
    mapping in it gives a key twice."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) not in sizes:
            sizes[id(node)] = 1  # a node that holds itself counts once
            if isinstance(node, yaml.MappingNode):
                _check_unique(node)
            children = (node.value if isinstance(node, yaml.SequenceNode) else
                        [n for pair in node.value for n in pair]
                        if isinstance(node, yaml.MappingNode) else [])
            sizes[id(node)] = min(limit + 1, 1 + sum(size(c) for c in children))
        return sizes[id(node)]

    if root is not None and size(root) > limit:
        raise ValueError(f"its aliases expand it past {limit:,} nodes (an alias bomb?)")


def _check_unique(node: yaml.MappingNode) -> None:
    """Raise if a key is given twice in one mapping (YAML keeps the last without a word)."""
    seen: set[str] = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value != "<<":
            if key.value in seen:
                raise ValueError(f"the key {key.value!r} is given twice in one mapping (line "
                                 f"{key.start_mark.line + 1}); keep one")
            seen.add(key.value)


def _int64s(doc: Any) -> Any:
    """``doc``, if every integer in it fits int64 (no field holds more, and float() cannot
    take 10^400), else ValueError naming the integer."""
    todo = [doc]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            todo += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            todo += value
        elif isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise ValueError(f"the integer {str(value)[:24]}... is past int64's range")
    return doc


def to_numbers(raw: pd.Series) -> pd.Series:
    """A column of cells as floats, NaN where a cell is not a number. An integer too large
    for a float (400 nines) is inf, as it is written with a decimal point, not an
    OverflowError."""
    try:
        return pd.to_numeric(raw, errors="coerce")
    except OverflowError:
        return pd.to_numeric(raw.astype(str), errors="coerce")
