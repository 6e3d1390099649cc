"""The project's one error model.

Every error the project raises on purpose derives from :class:`ParetoSearchError`; the
subclasses also derive from the builtin that callers would expect (``ValueError`` for bad
input), so ``except ValueError`` keeps working. Messages say what was expected, what was
received, and where (file, row, column or field).
"""

from __future__ import annotations

__all__ = [
    "InvalidPolicyParams",
    "InvalidProfile",
    "InvalidWorkload",
    "ParetoSearchError",
    "located",
]


class ParetoSearchError(Exception):
    """Root of every error raised by paretosearch, simulator and policies."""


class InvalidWorkload(ParetoSearchError, ValueError):
    """A trace, CDF file, scaling table or DataFrame that cannot be a workload."""


class InvalidProfile(ParetoSearchError, ValueError):
    """A cluster profile with unknown keys or impossible values."""


class InvalidPolicyParams(ParetoSearchError, ValueError):
    """Policy parameters outside their declared domain, or unknown names."""


def located(
    source: str,
    *,
    row: int | None = None,
    column: str | None = None,
    value: object = None,
    problem: str,
    fix: str = "",
) -> str:
    """Format a message naming where the bad input is and how to fix it.

    Args:
        source: the file path, or a description such as ``"DataFrame"``.
        row: the 1-based data row (header excluded), if one row is at fault.
        column: the column or field at fault.
        value: the offending value (shown with ``repr``).
        problem: what is wrong, e.g. ``"must be > 0"``.
        fix: an optional hint on how to fix it.

    Returns:
        A one-line message, e.g. ``"trace.csv, row 3, column 'service': must be > 0 (got -1.0)"``.
    """
    where = [source]
    if row is not None:
        where.append(f"row {row}")
    if column is not None:
        where.append(f"column {column!r}")
    if hasattr(value, "item"):  # numpy scalar: show 0, not np.int64(0)
        value = value.item()
    got = "" if value is None else f" (got {value!r})"
    hint = f"; {fix}" if fix else ""
    return f"{', '.join(where)}: {problem}{got}{hint}"
