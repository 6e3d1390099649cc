"""A real Slurm on localhost for tests: munged with a private key and socket, slurmctld on a
reserved port and, where jobs must run, slurmd for one node (Debian's packages: apt-get
install slurmctld slurmd slurm-client munge; .ci/run does)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

__all__ = ["SBATCH", "SCONTROL", "SLURMCTLD", "SLURMD", "needs_slurm", "reserved_port",
           "slurm"]

SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])
SLURMCTLD, SLURMD, MUNGED, SCONTROL, SBATCH = (
    shutil.which(n, path=SBIN) for n in ("slurmctld", "slurmd", "munged", "scontrol", "sbatch"))
needs_slurm = pytest.mark.skipif(
    not (SLURMCTLD and MUNGED and SCONTROL),
    reason="slurmctld, munged or scontrol not installed (apt-get install slurmctld "
           "slurm-client munge; .ci/run does)")


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, what: str,
          timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            text = log.read_text() if log.exists() else ""
            pytest.fail(f"{what} did not start (exit {proc.poll()}): {text[-2000:]}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def reserved_port() -> Iterator[int]:
    """A loopback port held (bound, not listening) while the block runs: no other process
    asking for a free port is given it, and a server that binds with SO_REUSEADDR, as
    slurmctld does, can still take it. (A port found free and let go could be taken before
    the server binds it.)"""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@contextlib.contextmanager
def slurm(tmp: Path, port: int, lines: Sequence[str], *, slurmd_port: int | None = None,
          node: str = "") -> Iterator[Callable[..., str]]:
    """munged and slurmctld on localhost with a private key, socket and ``port``, the
    configuration ``lines`` added; with ``slurmd_port``, also slurmd for node ``node`` (which
    ``lines`` declare), so that jobs run. Sets ``SLURM_CONF`` for the block (sbatch, scancel
    and squeue read it); yields ``scontrol(*args)``."""
    assert SLURMCTLD and MUNGED and SCONTROL
    key, sock = tmp / "munge.key", tmp / "m.sock"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (tmp / "state").mkdir()
    (tmp / "spool").mkdir()
    conf = tmp / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=pstest", "SlurmctldHost=localhost", f"SlurmctldPort={port}",
        f"SlurmUser={pwd.getpwuid(os.getuid()).pw_name}", "AuthType=auth/munge",
        f"AuthInfo=socket={sock}", "CredType=cred/munge", f"StateSaveLocation={tmp}/state",
        f"SlurmctldPidFile={tmp}/slurmctld.pid", f"SlurmctldLogFile={tmp}/slurmctld.log",
        *([f"SlurmdPort={slurmd_port}", f"SlurmdSpoolDir={tmp}/spool",
           f"SlurmdPidFile={tmp}/slurmd.pid", f"SlurmdLogFile={tmp}/slurmd.log"]
          if slurmd_port else []),
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "GresTypes=gpu", *lines, ""]))
    env = {**os.environ, "SLURM_CONF": str(conf)}

    def scontrol(*args: str) -> str:
        return subprocess.run([SCONTROL, *args], env=env, capture_output=True, text=True,
                              timeout=10).stdout

    with contextlib.ExitStack() as stack:
        munged = subprocess.Popen([MUNGED, "-F", "-f", "--key-file", str(key), "--socket",
                                   str(sock), "--pid-file", str(tmp / "munged.pid"),
                                   "--log-file", str(tmp / "munged.log"), "--seed-file",
                                   str(tmp / "munge.seed")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(_stop, munged)
        _wait(sock.exists, munged, tmp / "munged.log", "munged")
        ctld = subprocess.Popen([SLURMCTLD, "-D", "-f", str(conf)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(_stop, ctld)
        _wait(lambda: "UP" in scontrol("ping"), ctld, tmp / "slurmctld.log", "slurmctld")
        if slurmd_port:
            assert SLURMD, "slurmd not installed (apt-get install slurmd)"
            slurmd = subprocess.Popen([SLURMD, "-D", "-f", str(conf), "-N", node], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            stack.callback(_stop, slurmd)
            _wait(lambda: "State=IDLE" in scontrol("show", "node", node), slurmd,
                  tmp / "slurmd.log", "slurmd", timeout_s=60.0)
        stack.enter_context(pytest.MonkeyPatch.context()).setenv("SLURM_CONF", str(conf))
        yield scontrol
