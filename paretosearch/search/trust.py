"""What the search takes from a Dask cluster: plain data only (docs/security.md).

A worker that joins the scheduler is not trusted. Its task results come back through a
client that decodes msgpack only (:data:`DESERIALIZERS`: numbers, text, lists and mappings,
never a pickle) and are then checked for shape (:func:`plain_records`). A task's failure
comes back as text, never as a pickled exception (:func:`plain_work`). While the search talks
to a scheduler it did not start, whatever ``distributed`` still unpickles on its own (error
replies, pickled frames) goes through :func:`guarded_unpickling`, which builds exceptions
and plain values, nothing else. Plain ``tcp://`` to another machine is refused unless asked for
(:func:`check_address`): TLS is the way.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from paretosearch.search.journal import MAX_RECORD_FIELDS, plain_record
from simulator.errors import ParetoSearchError

__all__ = ["DESERIALIZERS", "MAX_RECORD_FIELDS", "UntrustedResult", "check_address",
           "guarded_unpickling", "plain_record", "plain_records", "plain_work"]

DESERIALIZERS = ("msgpack",)
"""What the search's Dask clients decode from workers: msgpack, which builds only plain
data (pickle and Dask's own serializers can build any object, and so run code)."""
LOOPBACK_NAMES = ("localhost",)
EXCEPTION_BUILDERS = frozenset({("tblib.pickling_support", "unpickle_exception"),
                                ("tblib.pickling_support", "unpickle_exception_with_attrs")})
"""Functions ``distributed`` pickles exceptions with (through tblib): each builds an
exception of a class this unpickler let through, and nothing else."""
PLAIN_TYPES = frozenset({"bytes", "bytearray", "str", "int", "float", "complex", "bool",
                         "tuple", "list", "dict", "set", "frozenset"})
"""Builtin types a guarded unpickling may name (``distributed`` pickles the type of the bytes
it frames): building one runs no code of anyone's choosing."""


class UntrustedResult(ParetoSearchError):
    """A worker returned something other than plain records."""


def plain_work(work: Callable[..., list[dict[str, float]]], *args: Any
               ) -> dict[str, Any]:
    """Runs on a worker: ``work(*args)``'s records, or its failure as text (a pickled
    exception would have to be unpickled here to be read)."""
    try:
        return {"records": work(*args)}
    except Exception as exc:  # any failure goes back as text
        return {"error": f"{type(exc).__name__}: {exc}"}


def plain_records(result: Any, expected: int) -> list[dict[str, float]]:
    """The records of a worker's answer, checked: a mapping with ``records``, a list of
    ``expected`` mappings of text to numbers (finite, or NaN for a metric a workload does not
    define).

    Raises:
        UntrustedResult: anything else (the message says what came).
        ParetoSearchError: the worker reported that the evaluation failed.
    """
    if isinstance(result, dict) and set(result) == {"error"} and isinstance(result["error"], str):
        raise ParetoSearchError(f"an evaluation failed on a Dask worker: {result['error'][:2000]}")
    records = result.get("records") if isinstance(result, dict) and len(result) == 1 else None
    if not isinstance(records, list | tuple) or len(records) != expected:
        raise UntrustedResult(f"{_shape(result)}, not {expected} records")
    out = []
    for record in records:
        checked = plain_record(record)
        if checked is None:
            raise UntrustedResult(f"a record that is {_shape(record)} (records map names to "
                                  "finite numbers)")
        out.append(checked)
    return out


def _shape(value: Any) -> str:
    text = repr(value) if isinstance(value, int | float | str) else type(value).__name__
    return text[:80]


def check_address(address: str, *, plain_tcp: bool) -> str:
    """``address`` if the search may connect to it: ``tls://`` anywhere, ``tcp://`` (or no
    scheme, which Dask reads as tcp) only to this machine unless ``plain_tcp``.

    Raises:
        ParetoSearchError: another scheme, no host, or plain tcp to another machine.
    """
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls", "inproc") or not parts.hostname:
        raise ParetoSearchError(f"scheduler address {address!r}: expected tls://HOST:PORT "
                                "(or tcp://HOST:PORT on this machine)")
    if parts.scheme == "tcp" and not plain_tcp and not _loopback(parts.hostname):
        raise ParetoSearchError(
            f"scheduler address {address!r}: plain tcp to another machine lets anyone on the "
            "network join the cluster as a worker; use tls:// (docs/security.md), or pass "
            "--allow-plain-tcp if the network is yours alone")
    return address


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _TypeRefused(pickle.UnpicklingError, TypeError):
    """Raised for a refused type (a TypeError too: ``distributed`` drops a traceback it
    cannot unpickle on a TypeError and goes on)."""


class _ExceptionsOnly(pickle.Unpickler):
    """An unpickler that builds exceptions and plain builtin values, nothing else (no
    functions, no other classes: the way a pickle runs code)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module == "builtins" and name in PLAIN_TYPES) or (module, name) in EXCEPTION_BUILDERS:
            return super().find_class(module, name)
        if module in ("builtins", "asyncio.exceptions") or module.startswith("distributed."):
            found = super().find_class(module, name)
            if isinstance(found, type) and issubclass(found, BaseException):
                return found
        raise _TypeRefused(f"refused to unpickle {module}.{name} from the Dask cluster")


def _exceptions_only(data: bytes | bytearray | memoryview, *, buffers: Sequence[Any] = ()
                     ) -> Any:
    return _ExceptionsOnly(io.BytesIO(bytes(data)), buffers=buffers).load()


@contextlib.contextmanager
def guarded_unpickling() -> Iterator[None]:
    """While connected to a scheduler this process did not start: what ``distributed``
    unpickles here (a worker's error reply, a pickled frame) may build exceptions only.
    Not for a cluster this process runs, whose scheduler unpickles the search's tasks."""
    from distributed.protocol import pickle as dask_pickle

    original = dask_pickle.loads
    dask_pickle.loads = _exceptions_only
    try:
        yield
    finally:
        dask_pickle.loads = original
