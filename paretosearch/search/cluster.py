"""Which Dask cluster evaluates a search: chosen by configuration, never by code.

A cluster file uses dask-ctl's spec format (read here without depending on dask-ctl)::

    version: 1
    module: dask.distributed        # imported only when the cluster is started
    class: LocalCluster
    args: []
    kwargs: {n_workers: 2, threads_per_worker: 1}

:func:`open_client` takes the first of: an explicit scheduler address; Dask's
``scheduler-address`` setting (``DASK_SCHEDULER_ADDRESS``); a cluster file (an explicit path,
else ``$PARETOSEARCH_DASK_CLUSTER``, else ``./dask-cluster.yaml`` if it exists, these two only
when the user named no worker count); else nothing,
which tells the caller to start its embedded ``LocalCluster`` (or evaluate serially). A client
of a ``tls://`` address uses Dask's configured security (``distributed.comm.tls.*``); plain
``tcp://`` to another machine needs ``plain_tcp``. A cluster file may start a Dask cluster
manager (a subclass of ``distributed``'s ``Cluster``) and nothing else. Every client decodes
plain data only (:mod:`paretosearch.search.trust`; docs/security.md).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask.config

from paretosearch.search.trust import DESERIALIZERS, check_address, guarded_unpickling
from simulator.errors import ParetoSearchError
from simulator.inputs.files import read_yaml

__all__ = ["CLUSTER_FILE", "CLUSTER_FILE_ENV", "ClusterSpec", "InvalidClusterConfig",
           "connect", "ctrl_c", "load_cluster_spec", "open_client", "remote_client"]

logger = logging.getLogger(__name__)

CLUSTER_FILE = Path("dask-cluster.yaml")
"""The cluster file used when nothing else names one (relative to the working directory)."""
CLUSTER_FILE_ENV = "PARETOSEARCH_DASK_CLUSTER"
"""Environment variable naming a cluster file."""

FIELDS: dict[str, tuple[type, str]] = {
    "version": (int, "the integer 1"),
    "module": (str, "a module path such as dask.distributed or dask_jobqueue"),
    "class": (str, "a class name such as LocalCluster or SLURMCluster"),
    "args": (list, "a list of positional arguments"),
    "kwargs": (dict, "a mapping of keyword arguments"),
}
"""Each field of a cluster file: its type and what it should hold."""
REQUIRED = ("version", "module", "class")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class InvalidClusterConfig(ParetoSearchError, ValueError):
    """A cluster file that cannot describe or start a Dask cluster."""


def _bad(source: str, name: str, value: object, problem: str, fix: str) -> InvalidClusterConfig:
    return InvalidClusterConfig(f"{source}, field {name!r}: {problem} (got {value!r}); {fix}")


@dataclass(frozen=True)
class ClusterSpec:
    """A validated cluster file: which cluster manager to start, with which arguments."""

    source: str
    module: str
    class_name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def cluster_class(self) -> type:
        """Import the module and return the class (an install hint if the module is missing);
        only a Dask cluster manager (a subclass of ``distributed.deploy.Cluster``) is returned:
        a cluster file cannot start anything else (``subprocess.Popen``, say)."""
        from distributed.deploy.cluster import Cluster

        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            package = self.module.split(".")[0].replace("_", "-")
            raise _bad(self.source, "module", self.module, f"cannot import it ({exc})",
                       f"install it (pip install {package}) or fix the name") from exc
        cls = getattr(module, self.class_name, None)
        if not isinstance(cls, type):
            known = sorted(n for n in dir(module) if n.endswith("Cluster"))
            raise _bad(self.source, "class", self.class_name, f"{self.module} has no such class",
                       f"use one of {', '.join(known)}" if known else "check the spelling")
        if not issubclass(cls, Cluster):
            raise _bad(self.source, "class", f"{self.module}.{self.class_name}",
                       "not a Dask cluster manager (a subclass of distributed's Cluster); "
                       "refused", "name a cluster class such as dask.distributed.LocalCluster "
                       "or dask_jobqueue.SLURMCluster")
        return cls

    def start(self) -> Any:
        """Start the cluster: ``cls(*args, **kwargs)``; a failure names the file."""
        cls = self.cluster_class()
        try:
            return cls(*self.args, **self.kwargs)
        except Exception as exc:
            raise InvalidClusterConfig(f"{self.source}: {self.module}.{self.class_name} did not "
                                       f"start: {exc}; check its args and kwargs") from exc


def load_cluster_spec(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster file without importing the module it names.

    Raises:
        InvalidClusterConfig: unreadable file, unknown or missing field, wrong type, a version
            other than 1, or a module or class that is not a valid Python name.
    """
    source = str(path)
    doc = read_yaml(path, InvalidClusterConfig, "cluster file")
    if not isinstance(doc, dict):
        raise InvalidClusterConfig(f"{source}: expected a mapping with the fields "
                                   f"{', '.join(FIELDS)} (got {type(doc).__name__})")
    for name, value in doc.items():
        if name not in FIELDS:
            raise _bad(source, name, value, "unknown field", f"the fields are {', '.join(FIELDS)}; "
                       "the cluster's own arguments go under kwargs")
        kind, meaning = FIELDS[name]
        optional_null = value is None and name in ("args", "kwargs")
        if not optional_null and (not isinstance(value, kind) or isinstance(value, bool)):
            raise _bad(source, name, value, f"expected {meaning}", "fix its type")
    for name in REQUIRED:
        if name not in doc:
            raise InvalidClusterConfig(f"{source}, field {name!r}: missing; add it: "
                                       f"{FIELDS[name][1]}")
    if doc["version"] != 1:
        raise _bad(source, "version", doc["version"], "only version 1 is understood",
                   "write version: 1")
    if not _DOTTED.fullmatch(doc["module"]):
        raise _bad(source, "module", doc["module"], f"expected {FIELDS['module'][1]}",
                   "fix the name")
    if not doc["class"].isidentifier():
        raise _bad(source, "class", doc["class"], f"expected {FIELDS['class'][1]}",
                   "fix the name")
    kwargs = doc.get("kwargs") or {}
    for key in kwargs:
        if not isinstance(key, str):
            raise _bad(source, "kwargs", key, "keyword names must be text", "quote the name")
    return ClusterSpec(source, doc["module"], doc["class"], tuple(doc.get("args") or ()), kwargs)


def _cluster_file(config: str | Path | None, files: bool) -> Path | None:
    """The cluster file to use: explicit, else (if ``files``) from the environment, else
    ./dask-cluster.yaml."""
    if config is not None:
        return Path(config)
    if not files:
        return None
    if os.environ.get(CLUSTER_FILE_ENV):
        return Path(os.environ[CLUSTER_FILE_ENV])
    if not CLUSTER_FILE.exists():
        return None
    # named where it shows (the CLI shows warnings): a file nobody named is about to start
    # something
    logger.warning("using the cluster file %s found in the working directory %s (pass "
                   "--workers N to ignore it)", CLUSTER_FILE, Path.cwd())
    return CLUSTER_FILE


@contextlib.contextmanager
def open_client(scheduler: str | None = None, config: str | Path | None = None, *,
                workers: int = 2, files: bool = True, plain_tcp: bool = False
                ) -> Iterator[Any]:
    """A ``distributed.Client`` of the configured cluster, or None; closed on exit.

    Args:
        scheduler: a scheduler address (``tcp://host:8786``, ``tls://host:8786``); wins over
            everything else.
        config: a cluster file; used only when no address is given or configured in Dask.
        workers: the size of the caller's embedded ``LocalCluster`` (0: serial), used only
            to log what happens when nothing is configured.
        files: whether a cluster file named by ``$PARETOSEARCH_DASK_CLUSTER`` or found in
            the working directory may be used (not when the user named a worker count).
        plain_tcp: whether a ``tcp://`` address of another machine may be used.

    Yields:
        A client (of a running scheduler, or of the cluster the file starts, which is closed
        with it), or None when nothing is configured: the caller starts its own cluster.

    Raises:
        ParetoSearchError: a bad or refused address, a scheduler that does not answer, or a
            bad cluster file.
    """
    address = scheduler or dask.config.get("scheduler-address", None)
    if address:
        origin = "--scheduler" if scheduler else "DASK_SCHEDULER_ADDRESS (scheduler-address)"
        if config is not None:
            logger.warning("cluster file %s ignored: %s names a scheduler", config, origin)
        logger.info("Dask: the running scheduler at %s, from %s", address, origin)
        with remote_client(check_address(str(address), plain_tcp=plain_tcp)) as client:
            yield client
        return
    path = _cluster_file(config, files)
    if path is None:
        logger.info("Dask: no scheduler or cluster file configured; %s",
                    f"an embedded LocalCluster of {workers} workers" if workers > 0
                    else "serial evaluation")
        yield None
        return
    spec = load_cluster_spec(path)
    logger.info("Dask: %s.%s from the cluster file %s", spec.module, spec.class_name, path)
    with _client_of(spec.start) as client:
        yield client


def ctrl_c(exc: BaseException | None) -> bool:
    """Whether ``exc`` is Ctrl-C, or an error raised while unwinding from it (Optuna's journal
    lock, stopped half taken, fails to release; a cluster closes mid-task): an interruption
    either way, not a failure."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__context__
    return False


@contextlib.contextmanager
def connect(client: Any, workers: int) -> Iterator[Any]:
    """Where a search evaluates: ``client`` (a ``distributed.Client``, or a scheduler address,
    connected to here and closed on exit), else an embedded ``LocalCluster`` of ``workers``
    processes (:func:`_local_client`), else, with no workers, nowhere: None (serial). The
    configured cluster, if any, comes first from :func:`open_client`."""
    if isinstance(client, str):
        with remote_client(check_address(client, plain_tcp=True)) as connected:
            yield connected
    elif client is None and workers > 0:
        with _local_client(workers) as local:
            yield local
    else:
        yield client


@contextlib.contextmanager
def remote_client(address: str) -> Iterator[Any]:
    """A client of the running scheduler at ``address`` (Dask's configured security, TLS
    certificates included), decoding plain data only, with this process's unpickling guarded
    while it is open (:func:`~paretosearch.search.trust.guarded_unpickling`).

    Raises:
        ParetoSearchError: the scheduler did not answer, or the address is not one.
    """
    from distributed import Client

    with guarded_unpickling():
        try:
            client = Client(address, deserializers=list(DESERIALIZERS))  # type: ignore[no-untyped-call]
        except (OSError, ValueError, TypeError) as exc:  # unreachable, refused, bad scheme
            raise ParetoSearchError(f"the Dask scheduler at {address} did not answer: "
                                    f"{type(exc).__name__}: {exc}; is it running, and is the "
                                    "address right?") from exc
        with client:
            yield client


QUIET_SCHEDULER = {"dashboard_address": "127.0.0.1:0"}
"""A local scheduler's HTTP server (health checks; with no dashboard it still starts one) on
a free local port: by default it asks for 8787, and says so ("Port 8787 is already in use")
whenever another search on the machine holds it."""
_TEARDOWN_LOGS = ("distributed.nanny", "distributed.worker", "distributed.core")
"""Dask's loggers that complain while a finished search's cluster closes (a worker process
slow to exit on a busy machine is killed after 4 s, with a warning): nothing is lost then."""


def _local_client(workers: int) -> contextlib.AbstractContextManager[Any]:
    """A client of an embedded ``LocalCluster`` of ``workers`` single-threaded processes
    (:func:`_client_of`: Ctrl-C stops it quietly)."""
    def start() -> Any:
        from distributed import LocalCluster

        return LocalCluster(n_workers=workers, threads_per_worker=1,  # type: ignore[no-untyped-call]
                            processes=True, dashboard_address=None,
                            scheduler_kwargs=QUIET_SCHEDULER)

    return _client_of(start)


@contextlib.contextmanager
def _client_of(start: Callable[[], Any]) -> Iterator[Any]:
    """A client of the cluster ``start()`` returns, both closed on exit.

    Ctrl-C in a terminal reaches every process of its group. The cluster is started with
    SIGINT ignored, so the worker processes it starts here inherit that and only this
    process, which runs the search, stops. The cluster is then closed mid-task: its
    complaints (lost connections, cancelled tasks, from Dask and the Tornado loop it runs
    on), here and on the workers, are not logged.
    """
    from distributed import Client

    main = threading.current_thread() is threading.main_thread()
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = start()
    finally:
        if main:
            signal.signal(signal.SIGINT, handler)
    interrupted = False
    levels = {name: logging.getLogger(name).level for name in _TEARDOWN_LOGS}
    try:
        with cluster:
            try:
                with Client(cluster,  # type: ignore[no-untyped-call]
                            deserializers=list(DESERIALIZERS)) as client:
                    try:
                        yield client
                    except KeyboardInterrupt:
                        interrupted = True
                        _quiet_logs()
                        with contextlib.suppress(Exception):
                            client.run(_quiet_logs)
                        raise
                    # the workers next: one whose heartbeat finds the scheduler closed first
                    # (a busy machine) logs an error and its traceback; nothing is lost then
                    with contextlib.suppress(Exception):
                        client.run(_quiet_logs)
            finally:  # the client is closed; the cluster closes next
                for name in _TEARDOWN_LOGS:
                    logging.getLogger(name).setLevel(logging.ERROR)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if interrupted:
            logging.disable(logging.NOTSET)


def _quiet_logs() -> None:
    logging.disable(logging.CRITICAL)
