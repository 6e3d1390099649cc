"""Scale-out by configuration: cluster files, which cluster open_client picks, and searches on
real ``dask scheduler`` / ``dask worker`` processes (TCP and TLS) that must give the serial
search's front exactly (evaluation is pure and seeded, so the front is the oracle)."""

from __future__ import annotations

import contextlib
import json
import logging
import operator
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask.config
import pytest
from distributed import Client, LocalCluster, Security, get_task_stream

from paretosearch.cli import main
from paretosearch.runs.store import RunStore
from paretosearch.search.cluster import (
    CLUSTER_FILE_ENV,
    InvalidClusterConfig,
    load_cluster_spec,
    open_client,
)
from paretosearch.service.api import PolicySearch, SearchConfig, SearchSettings
from tests.helpers.data import ROOT

DASK = Path(sys.executable).with_name("dask")  # the venv's dask command
SETTINGS = SearchSettings(budget=24, pop_size=8, n_offsprings=8, seed=1)
JOBS = 150
OBJECTIVES = ("jct:avg", "pred_err:avg")
SEARCH_ARGS = ["search", "--generate", str(JOBS), "--budget", "24", "--pop-size", "8",
               "--offspring", "8", "--seed", "1", "--objective", OBJECTIVES[0],
               "--objective", OBJECTIVES[1], "--replicates", "1"]
TLS_ENV = {"ca": "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
           "cert": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
           "key": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"}
LOCAL_FILE = ("version: 1\nmodule: dask.distributed\nclass: LocalCluster\nkwargs: {{name: {name}, "
              "n_workers: 0, processes: false, dashboard_address: ':0'}}\n")
"""A cluster file whose LocalCluster (in this process, no workers) is known by its name."""


def _key(front: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must match between runs: parameters, objectives, the objectives on the test sample."""
    return [(e.params, e.objectives, {o: e.test_metrics[o] for o in OBJECTIVES})
            for e in front]


def _search(client: Any) -> list[tuple[Any, ...]]:
    search = PolicySearch(config=SearchConfig(settings=SETTINGS, jobs=JOBS, replicates=1),
                          client=client,
                          workers=0)
    search.SetPreference(*OBJECTIVES)
    return _key(search.run())


@pytest.fixture(scope="module")
def serial_front() -> list[tuple[Any, ...]]:
    front = _search(None)
    assert len(front) >= 3  # a real trade-off, not a single point
    return front


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., None]]:
    """Set environment variables (read into Dask's config at once), isolated from the caller's
    environment and working directory."""
    monkeypatch.chdir(tmp_path)
    for name in ("DASK_SCHEDULER_ADDRESS", CLUSTER_FILE_ENV, *TLS_ENV.values()):
        monkeypatch.delenv(name, raising=False)

    def set_env(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        dask.config.refresh()

    set_env()
    yield set_env
    monkeypatch.undo()
    dask.config.refresh()


# --- cluster files -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("version: 2\nmodule: dask.distributed\nclass: LocalCluster",
     "field 'version': only version 1 is understood (got 2); write version: 1"),
    ("version: '1'\nmodule: dask.distributed\nclass: LocalCluster",
     "field 'version': expected the integer 1 (got '1')"),
    ("version: true\nmodule: dask.distributed\nclass: LocalCluster",
     "field 'version': expected the integer 1 (got True)"),
    ("version: 1\nmodule: dask.distributed\nclass: LocalCluster\nn_workers: 4",
     "field 'n_workers': unknown field (got 4)"),
    ("version: 1\nmodule: dask.distributed", "field 'class': missing"),
    ("version: 1\nmodule: dask distributed\nclass: LocalCluster",
     "field 'module': expected a module path"),
    ("version: 1\nmodule: dask.distributed\nclass: distributed.LocalCluster",
     "field 'class': expected a class name"),
    ("version: 1\nmodule: dask.distributed\nclass: LocalCluster\nargs: two",
     "field 'args': expected a list of positional arguments (got 'two')"),
    ("version: 1\nmodule: dask.distributed\nclass: LocalCluster\nkwargs: [1, 2]",
     "field 'kwargs': expected a mapping of keyword arguments (got [1, 2])"),
    ("version: 1\nmodule: dask.distributed\nclass: LocalCluster\nkwargs: {1: 2}",
     "field 'kwargs': keyword names must be text (got 1)"),
    ("- version: 1", "expected a mapping with the fields version, module, class, args, kwargs"),
    ("version: [1", "not valid YAML"),
])
def test_bad_cluster_files_name_field_and_value(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "dask-cluster.yaml"
    path.write_text(text)
    with pytest.raises(InvalidClusterConfig) as info:
        load_cluster_spec(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)


def test_missing_module_and_class_say_how_to_fix(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("version: 1\nmodule: dask_jobqueue\nclass: SLURMCluster\n")
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # not installed, whatever is here
    with pytest.raises(InvalidClusterConfig, match=r"field 'module'.*pip install dask-jobqueue"):
        load_cluster_spec(path).start()
    path.write_text("version: 1\nmodule: dask.distributed\nclass: LocalClustr\n")
    with pytest.raises(InvalidClusterConfig, match=r"field 'class'.*use one of .*LocalCluster"):
        load_cluster_spec(path).start()
    path.write_text(LOCAL_FILE.replace("n_workers: 0", "n_workers: 1, bogus: 1").format(name="x"))
    with pytest.raises(InvalidClusterConfig, match=r"LocalCluster did not start: .*'bogus'"):
        load_cluster_spec(path).start()
    with pytest.raises(InvalidClusterConfig, match="cannot read the cluster file"):
        load_cluster_spec(tmp_path / "nope.yaml")


SLURM_KWARGS = {  # SLURMCluster's documented parameters (dask-jobqueue)
    "queue", "account", "walltime", "job_cpu", "job_mem", "job_extra_directives", "cores",
    "memory", "processes", "interface", "nanny", "local_directory", "death_timeout",
    "worker_extra_args", "job_script_prologue", "job_directives_skip", "log_directory",
    "shebang", "python", "config_name", "job_name", "n_workers", "silence_logs", "security",
    "scheduler_options", "shared_temp_directory", "protocol"}
KUBE_KWARGS = {  # KubeCluster's documented parameters (dask_kubernetes.operator)
    "name", "namespace", "image", "n_workers", "resources", "env", "worker_command",
    "port_forward_cluster_ip", "shutdown_on_close", "idle_timeout", "resource_timeout",
    "scheduler_service_type", "custom_cluster_spec", "scheduler_forward_port", "jupyter",
    "quiet"}


@pytest.mark.parametrize(("name", "module", "cls", "known"), [
    ("dask-cluster.slurm.yaml", "dask_jobqueue", "SLURMCluster", SLURM_KWARGS),
    ("dask-cluster.kubernetes.yaml", "dask_kubernetes.operator", "KubeCluster", KUBE_KWARGS),
])
def test_deploy_examples_are_valid(name: str, module: str, cls: str, known: set[str]) -> None:
    spec = load_cluster_spec(ROOT / "deploy" / name)  # validated; the module is not imported
    assert (spec.module, spec.class_name, spec.args) == (module, cls, ())
    assert set(spec.kwargs) <= known, set(spec.kwargs) - known
    assert all(isinstance(v, str) for k, v in spec.kwargs.items() if k in ("walltime", "memory"))


@pytest.mark.dask
def test_local_example_starts_two_workers(env: Callable[..., None]) -> None:
    with open_client(config=ROOT / "dask-cluster.yaml") as client:
        assert isinstance(client.cluster, LocalCluster)
        client.wait_for_workers(2, timeout=60)
        assert client.submit(operator.add, 1, 2).result() == 3
    assert client.status == "closed" and client.cluster.status.name == "closed"


# --- real scheduler and worker processes -----------------------------------------------------

def _pki(folder: Path) -> dict[str, Path]:
    """A self-signed CA and a certificate it signed (for scheduler, workers and client)."""
    folder.mkdir()
    files = {n: folder / f for n, f in [("ca", "ca.pem"), ("ca_key", "ca.key"),
                                         ("cert", "node.pem"), ("key", "node.key")]}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for argv in (["req", "-x509", *ec, "-keyout", files["ca_key"], "-out", files["ca"],
                  "-days", "1", "-subj", "/CN=test-ca"],
                 ["req", *ec, "-keyout", files["key"], "-out", folder / "node.csr",
                  "-subj", "/CN=127.0.0.1"],
                 ["x509", "-req", "-in", folder / "node.csr", "-CA", files["ca"], "-CAkey",
                  files["ca_key"], "-CAcreateserial", "-out", files["cert"], "-days", "1"]):
        subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True)
    return files


@contextlib.contextmanager
def _dask_processes(folder: Path, pki: dict[str, Path] | None = None, *, workers: int = 2,
                    worker_args: tuple[str, ...] = (), env: dict[str, str] | None = None
                    ) -> Iterator[str]:
    """A ``dask scheduler`` and ``workers`` one-thread ``dask worker`` processes (given
    ``worker_args`` and ``env``) on 127.0.0.1 (a free port, read from the scheduler file);
    yields the scheduler's address."""
    tls = [] if pki is None else ["--tls-ca-file", str(pki["ca"]), "--tls-cert",
                                  str(pki["cert"]), "--tls-key", str(pki["key"])]
    folder.mkdir()
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(name: str, *argv: str) -> None:
        with (folder / f"{name}.log").open("wb") as log:
            procs.append(subprocess.Popen([str(DASK), *argv, "--host", "127.0.0.1",
                                           "--no-dashboard", *tls], cwd=ROOT, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          # the code of this checkout, as the search's
                                          env={**os.environ, "PYTHONPATH": str(ROOT),
                                               **(env or {})}))

    try:
        spawn("scheduler", "scheduler", "--port", "0", "--protocol", "tcp" if pki is None
              else "tls", "--dashboard-address", "127.0.0.1:0",  # its HTTP server, not 8787
              "--scheduler-file", str(folder / "scheduler.json"))
        address = json.loads(_wait_for(folder / "scheduler.json"))["address"]
        for i in range(workers):
            spawn(f"worker-{i}", "worker", address, "--name", f"worker-{i}", "--nworkers", "1",
                  "--nthreads", "1", *worker_args)
        yield address
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_for(path: Path, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, json.JSONDecodeError):
            text = path.read_text()
            json.loads(text)  # written completely
            return text
        time.sleep(0.1)
    raise TimeoutError(f"{path} did not appear in {timeout_s} s")


def _tls(pki: dict[str, Path]) -> Security:
    return Security(tls_ca_file=str(pki["ca"]), tls_client_cert=str(pki["cert"]),
                    tls_client_key=str(pki["key"]), require_encryption=True)


@pytest.fixture(scope="module")
def tcp_scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _dask_processes(tmp_path_factory.mktemp("tcp") / "dask") as address:
        with Client(address) as client:
            client.wait_for_workers(2, timeout=60)
        yield address


@pytest.fixture(scope="module")
def tls_scheduler(tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[str, dict[str, Path], dict[str, Path]]]:
    """The address, the cluster's certificates, and another CA's certificates."""
    folder = tmp_path_factory.mktemp("tls")
    pki, stranger = _pki(folder / "pki"), _pki(folder / "other-pki")
    with _dask_processes(folder / "dask", pki) as address:
        with Client(address, security=_tls(pki)) as client:
            client.wait_for_workers(2, timeout=60)
        yield address, pki, stranger


def _connect_elsewhere(address: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Connect a client from a fresh process, configured by ``env``, with a 2 s timeout."""
    code = f"from distributed import Client; Client({address!r}, timeout=2).close()"
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)


def _workers(client: Client) -> set[str]:
    return set(client.scheduler_info()["workers"])


@pytest.mark.dask
@pytest.mark.parametrize(("scheduler", "address", "config", "env_file", "cwd_file", "chosen"), [
    (None, None, None, None, False, None),
    (None, None, None, None, True, "cwd"),
    (None, None, None, "env", True, "env"),
    (None, None, "explicit", "env", True, "explicit"),
    (None, "real", "explicit", "env", True, "real"),
    ("real", "dead", "explicit", "env", True, "real"),
])
def test_precedence(env: Callable[..., None], tmp_path: Path, tcp_scheduler: str,
                    scheduler: str | None, address: str | None, config: str | None,
                    env_file: str | None, cwd_file: bool, chosen: str | None) -> None:
    """--scheduler > DASK_SCHEDULER_ADDRESS > --cluster-config > $PARETOSEARCH_DASK_CLUSTER >
    ./dask-cluster.yaml > nothing (a cluster file's LocalCluster is told apart by its name)."""
    real = {"real": tcp_scheduler, "dead": "tcp://127.0.0.1:9", None: None}
    for name in ("cwd", "env", "explicit"):
        (tmp_path / f"{name}.yaml").write_text(LOCAL_FILE.format(name=name))
    if cwd_file:
        (tmp_path / "cwd.yaml").rename(tmp_path / "dask-cluster.yaml")
    env(**({"DASK_SCHEDULER_ADDRESS": real[address]} if address else {}),
        **({CLUSTER_FILE_ENV: str(tmp_path / f"{env_file}.yaml")} if env_file else {}))
    explicit = tmp_path / f"{config}.yaml" if config else None
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}), \
            open_client(real[scheduler], explicit) as client:
        if chosen is None:
            assert client is None
        elif chosen == "real":
            assert client.cluster is None and client.scheduler.address == tcp_scheduler
        else:
            assert client.cluster.name == chosen


def test_a_named_worker_count_beats_implicit_cluster_files(env: Callable[..., None],
                                                          tmp_path: Path) -> None:
    """--workers N (files=False): neither ./dask-cluster.yaml nor $PARETOSEARCH_DASK_CLUSTER
    is used; --cluster-config still is."""
    for name in ("cwd", "env"):
        (tmp_path / f"{name}.yaml").write_text(LOCAL_FILE.format(name=name))
    (tmp_path / "cwd.yaml").rename(tmp_path / "dask-cluster.yaml")
    with open_client(workers=0) as client:
        assert client.cluster.name == "cwd"
    with open_client(workers=0, files=False) as client:
        assert client is None
    env(**{CLUSTER_FILE_ENV: str(tmp_path / "env.yaml")})
    with open_client(workers=0, files=False) as client:
        assert client is None
    with open_client(config=tmp_path / "env.yaml", workers=0, files=False) as client:
        assert client.cluster.name == "env"


@pytest.mark.dask
def test_search_on_real_workers_matches_serial(tcp_scheduler: str,
                                               serial_front: list[tuple[Any, ...]]) -> None:
    with Client(tcp_scheduler) as observer:
        with get_task_stream(client=observer) as stream:
            assert _search(tcp_scheduler) == serial_front  # PolicySearch given the address
        assert {t["worker"] for t in stream.data} == _workers(observer)  # both did work


@pytest.mark.dask
def test_tls_search_through_open_client(env: Callable[..., None],
                                        tls_scheduler: tuple[str, dict[str, Path],
                                                             dict[str, Path]],
                                        serial_front: list[tuple[Any, ...]]) -> None:
    address, pki, stranger = tls_scheduler
    for key, use, refusal in [
        (None, address, "TLS expects a `ssl_context`"),  # no certificate configured
        (None, address.replace("tls://", "tcp://"), "CommClosedError"),  # plain TCP
        (stranger, address, "TLS certificate does not match"),  # another CA's certificate
        (pki, address, None),  # the cluster's certificate: connects
    ]:
        start = time.monotonic()
        connect = _connect_elsewhere(use, **({TLS_ENV[k]: str(key[k]) for k in TLS_ENV}
                                             if key else {}))
        assert time.monotonic() - start < 20
        assert (connect.returncode == 0) == (refusal is None), connect.stderr
        assert refusal is None or refusal in connect.stderr
    env(DASK_SCHEDULER_ADDRESS=address, **{TLS_ENV[k]: str(pki[k]) for k in TLS_ENV})
    with open_client() as client, get_task_stream(client=client) as stream:
        assert client.scheduler.address == address
        assert _search(client) == serial_front
    assert len({t["worker"] for t in stream.data}) == 2


@pytest.mark.dask
def test_cli_search_prefers_the_scheduler_address(env: Callable[..., None], tmp_path: Path,
                                                  tcp_scheduler: str,
                                                  serial_front: list[tuple[Any, ...]],
                                                  caplog: pytest.LogCaptureFixture) -> None:
    env(DASK_SCHEDULER_ADDRESS=tcp_scheduler)
    caplog.set_level(logging.INFO, logger="paretosearch.search.cluster")
    local = ROOT / "dask-cluster.yaml"  # would start a LocalCluster if chosen
    with Client(tcp_scheduler) as observer:
        with get_task_stream(client=observer) as stream:
            assert main([*SEARCH_ARGS, "--run-dir", str(tmp_path / "run"),
                         "--cluster-config", str(local)]) == 0
        assert {t["worker"] for t in stream.data} == _workers(observer)
    front = RunStore(tmp_path / "run").read_front().front
    assert _key(front) == serial_front
    assert f"cluster file {local} ignored" in caplog.text
    assert f"the running scheduler at {tcp_scheduler}" in caplog.text


def test_cli_reports_a_bad_cluster_file(env: Callable[..., None], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nmodule: dask.distributed\nclass: LocalCluster\nworkers: 2\n")
    assert main(["search", "--generate", "50", "--budget", "4", "--run-dir",
                 str(tmp_path / "run"), "--cluster-config", str(bad)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{bad}, field 'workers': unknown field (got 2)" in err
