"""Files users read: written atomically (temp file in the same folder, then rename); files
of a run directory read as untrusted data (:func:`read_bounded`) and written in place only as
plain files (:func:`open_plain`: never through a link, never into a FIFO or a device)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.errors import ParetoSearchError
from simulator.inputs.files import MAX_DOCUMENT, read_bounded

__all__ = ["MAX_DOCUMENT", "MAX_TABLE", "Busy", "atomic_write", "check_plain", "exclusive",
           "json_text", "load_json", "open_plain", "plain_dir", "read_bounded", "regular_file",
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


def regular_file(path: str | Path) -> Path:
    """``path``, if it is a regular file (links followed) or missing (the reader says so):
    for inputs read by a library that would wait on a FIFO or read a device forever.

    Raises:
        ParetoSearchError: a FIFO, a device, a socket or a folder.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return path
    if not stat.S_ISREG(mode):
        raise ParetoSearchError(f"{path}: not a regular file; refused (a FIFO or a device is "
                                "never read)")
    return path


def open_plain(path: str | Path, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags)`` for a file written in place (a journal, a lock): a link is not
    followed and anything but a regular file is refused (a FIFO is never waited on).

    Raises:
        ParetoSearchError: a link, a FIFO, a device or a folder at ``path``; or it cannot be
            opened.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise _not_plain(path) from exc
        raise ParetoSearchError(f"{path}: cannot write here: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_plain(path)
    return fd


def check_plain(path: str | Path) -> Path:
    """``path`` if nothing or a regular file is there (not a link): for a file that another
    library opens itself (SQLite, Optuna).

    Raises:
        ParetoSearchError: a link or anything but a regular file at ``path``.
    """
    path = Path(path)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise _not_plain(path)
    return path


def plain_dir(path: str | Path) -> Path:
    """The folder ``path`` (made if missing), not a link: a folder of a run written into
    (``export/``), which a link would move elsewhere.

    Raises:
        ParetoSearchError: a link or anything but a folder at ``path``, or it cannot be made.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise _not_plain(path, "a folder") from exc
    except OSError as exc:
        raise ParetoSearchError(f"{path}: cannot make this folder: {exc.strerror}") from exc
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise _not_plain(path, "a folder")
    return path


def _not_plain(path: str | Path, kind: str = "a regular file") -> ParetoSearchError:
    return ParetoSearchError(f"{path}: a link or not {kind}; refused (what paretosearch writes "
                             "is never written through a link; remove it)")


class Busy(ParetoSearchError):
    """Another process holds the lock (:func:`exclusive`); ``holder`` is its pid, as it wrote
    it."""

    def __init__(self, message: str, holder: str) -> None:
        super().__init__(message)
        self.holder = holder


@contextlib.contextmanager
def exclusive(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (made if missing, a plain file; released by
    the OS if this process dies), with this process's pid written in it.

    Raises:
        Busy: another process holds it.
        ParetoSearchError: ``path`` cannot be made, or is a link or not a regular file.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParetoSearchError(f"{path.parent}: cannot write here: {exc.strerror}") from exc
    fd = open_plain(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise ParetoSearchError(f"{path}: cannot lock: {exc.strerror}") from exc
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise Busy(f"{path}: held by pid {holder}", holder) from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            raise ParetoSearchError(f"{path}: cannot write: {exc.strerror}") from exc
        yield
    finally:
        os.close(fd)


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


def load_json(data: str | bytes, *, finite: bool = True) -> Any:
    """``json.loads`` for a document paretosearch did not write: an integer past int64's range
    (which no field holds, and which float() cannot take), a key given twice (which of the two
    would count?) and, with ``finite``, ``NaN``, ``Infinity`` or a number past a float's range
    (``1e400``) are refused: paretosearch writes none of these in a document (only a journal
    line may record a NaN metric).

    Raises:
        ValueError: not UTF-8, not JSON, or such a number or key (JSONDecodeError and
            UnicodeDecodeError are ValueErrors).
        RecursionError: nested too deep.
    """
    if not finite:
        return json.loads(data, parse_int=_int64, object_pairs_hook=_unique)
    doc = json.loads(data, parse_int=_int64, parse_float=_float, parse_constant=_NotFinite,
                     object_pairs_hook=_unique)
    todo: list[tuple[str, Any]] = [("", doc)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, dict):
            todo += [(f"{where}.{k}" if where else k, v) for k, v in value.items()]
        elif isinstance(value, list):
            todo += [(f"{where}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, _NotFinite):
            raise ValueError(f"field {where or '(the document)'}: the number {value.text[:24]} "
                             "is not finite (NaN, or past a float's range); give a finite number")
    return doc


class _NotFinite:
    def __init__(self, text: str) -> None:
        self.text = text


def _float(text: str) -> float | _NotFinite:
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) < len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {twice!r} is given twice in one object; keep one")
    return doc


def _int64(text: str) -> int:
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"the integer {text[:24]}... is past int64's range")
    return value


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
