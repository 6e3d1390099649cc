"""Compiled kernels: compiled when first used, cached per module, compiled once per machine.

**When.** A kernel the engines take as a first-class function has one signature
(:data:`simulator.fluid.engine.KERNEL_SIG`, :data:`simulator.rounds.view.ROUND_KERNEL_SIG`). It
is declared with :func:`njit_lazily` instead of ``numba.njit(SIG)``, which would compile it
at import; :func:`compiled` compiles it for that signature (or loads it from the cache) when
an engine first needs it, then refuses other signatures, as an eager ``njit(SIG)`` does. So
importing the project compiles nothing, and a run compiles its own engine and policy only.

**Where.** Every module under ``simulator/`` and ``policies/`` is cached in
:func:`cache_dir`: ``PARETOSEARCH_CACHE_DIR``, else ``NUMBA_CACHE_DIR``, else
``$XDG_CACHE_HOME/paretosearch/numba`` (``~/.cache/...``). A folder filled by
``paretosearch compile`` can be shared by every process and machine that runs the same
installed files from the same path (an image, a shared file system).

**What invalidates.** numba checks only the file that defines a function, so a kernel that
inlines or calls a helper from another module (``speed_at``, ``water_fill``) would keep a
stale copy of it. The cache entries of a module are keyed instead on :func:`module_stamp`: a
digest of the module and of every project module it imports, transitively. An edit to one
policy recompiles that policy and what imports it; an edit to a helper recompiles its callers;
other policies keep their kernels.

**Once.** :func:`compiled` holds an exclusive file lock (``fcntl.flock``) per kernel around
compile-and-save, so processes that need the same kernel at once (Dask workers on one node)
compile it once: the others wait, then load it.

**One copy.** numba compiles a callee for every distinct tuple of argument types its callers
pass, and types a constant argument as its own literal type, so ``f(x, True)`` and
``f(x, False)`` were two compilations of ``f``, and typing a caller compiled more for the
transient types it tried. Helpers declared with :func:`njit` compile the non-literal
signature once. Together with loops in place of array-to-slice copies (whose shape-mismatch
message compiles numba's string formatting, 3-4 CPU-s) and :mod:`simulator.order` in place of
numba's sorts, this took the fluid engine and WFQ from 38 to 16 CPU-s to compile
(docs/startup.md).

Helpers that allocate nothing are compiled with ``_nrt=False`` (no reference counting). numba
otherwise increfs every array of a tuple argument on entry to a call and decrefs it on each
exit - 22 arrays for an OJPP pack, 34 for the round engine's job arrays - and its pruning pass
leaves most of these in branchy code; they were over half of the unified policy's time. An
allocation in such a helper, or a call to one that allocates, is a compile-time typing error,
so nothing can leak.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, overload

import numba
from numba.core import caching, event

from simulator.errors import ParetoSearchError

__all__ = ["KernelCacheError", "cache_dir", "compile_cpu_s", "compile_notice", "compiled",
           "configure_cache", "module_stamp", "njit", "njit_lazily", "source_digest"]

_LOG = logging.getLogger(__name__)
_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("simulator", "policies")
_SIGNATURES: dict[Any, Any] = {}
_SPENT = [0.0]


@functools.cache
def source_digest() -> str:
    """A digest of the simulator's and policies' source and numba's version: what a
    simulation's result depends on besides its inputs."""
    digest = hashlib.sha256(numba.__version__.encode())
    for package in _PACKAGES:
        for path in sorted((_ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """The folder compiled kernels are cached in (module docstring)."""
    for name in ("PARETOSEARCH_CACHE_DIR", "NUMBA_CACHE_DIR"):
        if os.environ.get(name):
            return Path(os.environ[name])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "paretosearch" / "numba"


@functools.cache
def _module_file(name: str, root: Path) -> Path | None:
    """The source of project module ``name`` under ``root`` (a package's ``__init__``)."""
    if name.split(".")[0] not in _PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|.*)"
                     r"|import[ \t]+(.*))", re.M)


@functools.cache
def _imports(path: Path, root: Path) -> frozenset[Path]:
    """The project modules ``path`` imports anywhere in it (a line-based reading, fast enough
    for import time; a false match only widens a key): ``from pkg import mod`` reads ``mod``,
    ``from pkg import name`` reads the package."""
    found: set[Path] = set()
    for m in _IMPORT.finditer(path.read_text()):
        listed = re.sub(r"#.*", "", m[2] or m[3]).strip("()\n ")
        names = [n.split()[0] for n in listed.replace("\n", " ").split(",") if n.strip()]
        if m[1] is not None:
            names = [f"{m[1]}.{n}" if _module_file(f"{m[1]}.{n}", root) else m[1] for n in names]
        found.update(p for p in (_module_file(n, root) for n in names) if p is not None)
    return frozenset(found)


@functools.cache
def module_stamp(path: Path, root: Path = _ROOT) -> str:
    """A digest of module ``path`` (under ``root``) and of every project module it imports,
    transitively: all the source its compiled functions can inline or call."""
    seen: set[Path] = set()
    todo = [path]
    while todo:
        here = todo.pop()
        if here not in seen:
            seen.add(here)
            todo.extend(_imports(here, root))
    digest = hashlib.sha256()
    for p in sorted(seen):
        digest.update(str(p.relative_to(root)).encode())
        digest.update(_file_digest(p))
    return digest.hexdigest()[:16]


@functools.cache
def _file_digest(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


class _ProjectLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):  # type: ignore[misc]
    """numba's cache locator for our modules: :func:`cache_dir`, keyed on
    :func:`module_stamp` instead of the file's own content."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._path = cache_dir() / self.get_suitable_cache_subpath(py_file)

    def get_cache_path(self) -> str:
        return str(self._path)

    def get_source_stamp(self) -> str:
        return module_stamp(Path(self._py_file).resolve())

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        path = Path(py_file).resolve()
        if path.parent == _ROOT or not path.is_relative_to(_ROOT) or (
                path.relative_to(_ROOT).parts[0] not in _PACKAGES):
            return None
        # numba would pass over a folder it cannot write to another cache (the source tree's
        # __pycache__); ours is the one named, so a read-only one still serves what is in it
        # and a save there is a KernelCacheError
        with contextlib.suppress(OSError):
            os.makedirs(cache_dir(), exist_ok=True)
        return cls(py_func, py_file)


class _GuardedCache(caching.FunctionCache):  # type: ignore[misc]
    """numba's cache of one function, where a damaged entry (a truncated or garbled index or
    data file) is compiled again and overwritten, and a folder that cannot take a save is a
    :class:`KernelCacheError`, wherever in a compile the save happens."""

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            return super().load_overload(sig, target_context)
        except OSError:  # a folder that cannot be read: nothing cached (a save will say why)
            return None
        except Exception as exc:  # unpickling a damaged file raises anything
            if isinstance(exc, ImportError):  # written by an older version whose types moved
                _LOG.debug("%s: a stale kernel cache entry; compiling it again",
                           self._cache_file._index_path)
            else:
                _LOG.warning("%s: a damaged kernel cache entry (%s: %s); compiling it again",
                             self._cache_file._index_path, type(exc).__name__, exc)
            with contextlib.suppress(OSError):
                os.unlink(self._cache_file._index_path)
            return None

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            super().save_overload(sig, data)
        except OSError as exc:  # a full disk, a read-only folder
            raise KernelCacheError(
                f"{cache_dir()}: cannot save the compiled kernels there "
                f"({exc.strerror or exc}); make it a writable folder with free space, or set "
                "PARETOSEARCH_CACHE_DIR (or NUMBA_CACHE_DIR) to one") from exc


def _guarded(dispatcher: Any) -> Any:
    dispatcher._cache = _GuardedCache(dispatcher.py_func)
    return dispatcher


def _cache_error(exc: BaseException) -> KernelCacheError | None:
    """The :class:`KernelCacheError` behind ``exc``: numba wraps an error raised while it
    types a caller (a helper compiled and saved on the way) in its own."""
    seen: set[int] = set()
    here: BaseException | None = exc
    while here is not None and id(here) not in seen:
        if isinstance(here, KernelCacheError):
            return here
        seen.add(id(here))
        here = here.__cause__ or here.__context__
    return None


@contextmanager
def _cache_errors_plain() -> Iterator[None]:
    """Raise a :class:`KernelCacheError` behind a compile error as itself."""
    try:
        yield
    except Exception as exc:
        found = _cache_error(exc)
        if found is None or found is exc:
            raise
        raise found from found.__cause__


def configure_cache() -> Path:
    """Have numba cache our modules' functions in :func:`cache_dir` (idempotent; before any
    ``njit(cache=True)`` of ours); return the folder."""
    locators = caching.CacheImpl._locator_classes
    if _ProjectLocator not in locators:
        locators.insert(0, _ProjectLocator)
    return cache_dir()


configure_cache()


def _compile_unliteral(dispatcher: Any, sig: Any) -> Any:
    if isinstance(sig, tuple):
        sig = tuple(numba.types.unliteral(t) for t in sig)
    with _cache_errors_plain():
        return type(dispatcher).compile(dispatcher, sig)


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def njit(function: _F) -> _F: ...
@overload
def njit(function: None = None, **options: Any) -> Callable[[_F], _F]: ...
def njit(function: Any = None, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)`` that compiles one copy per signature its
    callers pass, not one per constant: numba types a constant argument (``True``, ``-1``, a
    variable's first value ``0``) as its own literal type and compiles the callee for it,
    even for the transient types it tries while typing the caller; this compiles the
    non-literal signature, which every such call then converts to. Type checkers see the
    function's own signature (a numba dispatcher at run time), as with :func:`njit_lazily`."""
    def wrap(function: Any) -> Any:
        dispatcher = _guarded(numba.njit(cache=True, **options)(function))
        dispatcher.compile = functools.partial(_compile_unliteral, dispatcher)
        return dispatcher
    return wrap if function is None else wrap(function)


def njit_lazily(signature: Any, **options: Any) -> Callable[[_F], _F]:
    """``numba.njit(signature, cache=True, **options)`` that compiles when :func:`compiled`
    first asks for it, not at import."""
    def wrap(function: Any) -> Any:
        dispatcher = _guarded(numba.njit(cache=True, **options)(function))
        _SIGNATURES[dispatcher] = signature
        return dispatcher
    return wrap


def compiled(function: Any) -> Any:
    """``function`` compiled for its :func:`njit_lazily` signature (loaded from the cache if
    there), under a file lock so that concurrent processes compile it once; afterwards it
    takes no other signature. Any other function is returned as it is."""
    signature = _SIGNATURES.get(function)
    if signature is None or tuple(signature.args) in function.overloads:
        return function
    cpu0 = time.process_time()
    py_func = function.py_func
    with _kernel_lock(f"{py_func.__module__}.{py_func.__qualname__}"), _cache_errors_plain():
        function.compile(signature)
    function.disable_compile()
    _SPENT[0] += time.process_time() - cpu0
    return function


@contextmanager
def _kernel_lock(name: str) -> Iterator[None]:
    """An exclusive lock on ``name`` in the cache folder; none where the folder cannot take a
    lock file (read-only: nothing can be saved there, so there is nothing to race for)."""
    try:
        (cache_dir() / "locks").mkdir(parents=True, exist_ok=True)
        lock = open(cache_dir() / "locks" / f"{name}.lock", "w")  # noqa: SIM115
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


class KernelCacheError(ParetoSearchError):
    """The kernel cache folder cannot take what was compiled."""


def compile_cpu_s() -> float:
    """CPU-seconds this process has spent in :func:`compiled` (compiling, or loading from
    the cache): what a run's own ``cpu_s`` leaves out."""
    return _SPENT[0]


class _Once(event.Listener):  # type: ignore[misc]
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback: Callable[[], None] | None = callback

    def on_start(self, event: Any) -> None:
        if self.callback is not None:
            callback, self.callback = self.callback, None
            callback()

    def on_end(self, event: Any) -> None:
        pass


@contextmanager
def compile_notice(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` once, just before the first function compiles inside the block (not
    when one is loaded from the cache): how a command says it is about to take a while."""
    with event.install_listener("numba:compile", _Once(callback)):
        yield
