"""Files users read: written atomically (temp file in the same folder, then rename); files
of a run directory read as untrusted data (:func:`read_bounded`)."""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.errors import ParetoSearchError
from simulator.files import MAX_DOCUMENT, read_bounded

__all__ = ["MAX_DOCUMENT", "MAX_TABLE", "atomic_write", "json_text", "read_bounded",
           "write_json", "write_table", "write_text"]

MAX_TABLE = 2 * 2**30
"""The most bytes a journal or table of a run may have."""


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temp file beside ``path``, then rename it over ``path``.

    A reader never sees a half-written file, and a failure leaves no debris. The file gets
    the permissions of any plainly created file (0666 less the umask).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise ParetoSearchError(f"{path}: cannot write here: {exc.strerror}") from exc
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ParetoSearchError(f"{path}: write failed: {exc.strerror}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a table as CSV or Parquet, chosen by the file's suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ParetoSearchError(f"{path}: unsupported output format {suffix!r}; "
                                "use .csv or .parquet")
    if suffix == ".csv":
        return atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))
    return atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))


def write_text(path: str | Path, text: str) -> Path:
    """Write a text file."""

    def write(tmp: Path) -> None:
        tmp.write_text(text)

    return atomic_write(path, write)


def json_text(obj: Any) -> str:
    """JSON text (indented, NaN and infinity as null, numpy scalars as numbers)."""
    return json.dumps(_clean(obj), indent=2, allow_nan=False, default=_jsonable) + "\n"


def write_json(obj: Any, path: str | Path) -> Path:
    """Write JSON (indented, NaN as null)."""
    return write_text(path, json_text(obj))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {value!r}")


def _clean(value: Any) -> Any:
    """NaN and infinity become null: JSON has no spelling for them."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
