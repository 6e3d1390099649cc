"""Exporters to HPC schedulers: a real slurmctld loads the Slurm export; the YARN XML parses and
uses only documented property names."""

from __future__ import annotations

import contextlib
import math
import os
import pwd
import re
import shutil
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from paretosearch.export import ExportOptions, build_plan, export, write_export
from paretosearch.export.hpc import YARN_PROPERTIES, slurm_time
from tests.helpers.exports import DOCS, pcs_wfq_doc, unified_doc

# --- Slurm: a real slurmctld ------------------------------------------------------------

SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])
SLURMCTLD, MUNGED, SCONTROL = (shutil.which(n, path=SBIN)
                               for n in ("slurmctld", "munged", "scontrol"))
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
def _reserved_port() -> Iterator[int]:
    """A loopback port held (bound, not listening) while the block runs: no other process
    asking for a free port is given it, and a server that binds with SO_REUSEADDR, as
    slurmctld does, can still take it. (A port found free and let go could be taken before
    the server binds it.)"""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@contextlib.contextmanager
def _slurmctld(tmp: Path, fragments: list[Path], port: int) -> Iterator[Callable[..., str]]:
    """munged and slurmctld on localhost with a private key, socket and ``port``, the
    exported fragments included; yields ``scontrol(*args)``."""
    assert SLURMCTLD and MUNGED and SCONTROL
    key, sock = tmp / "munge.key", tmp / "m.sock"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (tmp / "state").mkdir()
    conf = tmp / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=pstest", "SlurmctldHost=localhost", f"SlurmctldPort={port}",
        f"SlurmUser={pwd.getpwuid(os.getuid()).pw_name}", "AuthType=auth/munge",
        f"AuthInfo=socket={sock}", "CredType=cred/munge", f"StateSaveLocation={tmp}/state",
        f"SlurmctldPidFile={tmp}/slurmctld.pid", f"SlurmctldLogFile={tmp}/slurmctld.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "GresTypes=gpu",
        "NodeName=gpu[1-4] CPUs=8 Gres=gpu:4 State=FUTURE",  # no slurmd needed
        *(f"Include {f}" for f in fragments), ""]))
    env = {**os.environ, "SLURM_CONF": str(conf)}

    def scontrol(*args: str) -> str:
        return subprocess.run([SCONTROL, *args], env=env, capture_output=True, text=True,
                              timeout=10).stdout

    munged = subprocess.Popen([MUNGED, "-F", "-f", "--key-file", str(key), "--socket", str(sock),
                               "--pid-file", str(tmp / "munged.pid"), "--log-file",
                               str(tmp / "munged.log"), "--seed-file", str(tmp / "munge.seed")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(sock.exists, munged, tmp / "munged.log", "munged")
        ctld = subprocess.Popen([SLURMCTLD, "-D", "-f", str(conf)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(lambda: "UP" in scontrol("ping"), ctld, tmp / "slurmctld.log", "slurmctld")
            yield scontrol
        finally:
            _stop(ctld)
    finally:
        _stop(munged)


def _fields(line: str) -> dict[str, str]:
    return dict(token.split("=", 1) for token in line.split() if "=" in token)


@needs_slurm
@pytest.mark.parametrize("name", ["unified", "wfq"])
def test_slurmctld_loads_the_exported_partitions(name: str, tmp_path: Path,
                                                 pcs_configs: dict[str, Any]) -> None:
    doc = unified_doc() if name == "unified" else pcs_wfq_doc(pcs_configs["0e4a51_bal"])
    plan = build_plan(doc)
    result = export(doc, "slurm", options=ExportOptions(nodes="gpu[1-4]"))
    files = {path.name: path for path in write_export(result, tmp_path / "out")}
    fragment, cluster = files["slurm-paretosearch.conf"], files["slurm-cluster.conf"]
    exported = {f["PartitionName"]: f for f in map(_fields, fragment.read_text().splitlines())
                if "PartitionName" in f}
    assert list(exported) == [c.name for c in plan.classes]
    # the partitions' file sets nothing cluster-wide: an Include cannot switch off an
    # admin's preemption or priority plugin
    assert [line for line in fragment.read_text().splitlines()
            if line and not line.startswith(("#", "PartitionName="))] == []
    with _reserved_port() as port, _slurmctld(tmp_path, [fragment, cluster], port) as scontrol:
        config = dict(re.findall(r"^(\w+)\s+= (\S+)", scontrol("show", "config"), re.M))
        shown = {name: _fields(scontrol("show", "partition", name)) for name in exported}
    assert config["PriorityType"] == "priority/multifactor"
    for part, fields in exported.items():
        got = shown[part]
        for key in ("PriorityJobFactor", "PriorityTier", "MaxTime"):
            assert got[key] == fields[key], (part, key)
        assert got["PreemptMode"] == fields.get("PreemptMode", "OFF")  # or the cluster's
        assert got["DefaultTime"] == fields.get("DefaultTime", "NONE")
        assert got["Nodes"] == "gpu[1-4]"
    factors = [int(shown[c.name]["PriorityJobFactor"]) for c in plan.classes]
    order = np.argsort([c.weight for c in plan.classes], kind="stable")
    assert [factors[i] for i in order] == sorted(factors)
    if name == "unified":  # SLO lease 3 x 300 s, best-effort 300 s; SLO jobs preempt BE jobs
        assert {p["MaxTime"] for p in shown.values()} == {"00:15:00"}
        assert {p["DefaultTime"] for p in shown.values()} == {"00:05:00"}
        assert {p["PreemptMode"] for p in shown.values()} == {"REQUEUE"}
        assert config["PreemptType"] == "preempt/qos"
    else:  # WFQ: no leases; its reclaiming cannot be expressed, so no preemption set at all
        assert {p["MaxTime"] for p in shown.values()} == {"UNLIMITED"}
        settings = [line for f in (cluster, fragment) for line in f.read_text().splitlines()
                    if not line.startswith("#")]
        assert not any("Preempt" in line for line in settings)


def test_slurm_qos_script_sets_priority_wall_time_and_preemption() -> None:
    script = export(unified_doc(), "slurm").files["sacctmgr-qos.sh"]
    adds = {m[0]: _fields(m[1]) for m in re.findall(r"add qos name=(\S+) (.*)", script)}
    assert set(adds) == {f"class{k}-{t}" for k in range(3) for t in ("slo", "best-effort")}
    assert adds["class1-slo"] == {"Priority": "1000", "MaxWall": "00:15:00"}
    assert adds["class1-best-effort"] == {"Priority": "10", "MaxWall": "00:05:00"}
    preempt = dict(re.findall(r"where name=(\S+) set Preempt=(\S+)", script))
    assert set(preempt) == {"class0-slo", "class1-slo", "class2-slo"}
    assert preempt["class0-slo"] == "class0-best-effort,class1-best-effort,class2-best-effort"
    assert "sacctmgr-qos.sh needs slurmdbd" in script


@pytest.mark.parametrize(("seconds", "text"), [(300, "00:05:00"), (301, "00:06:00"),
                                               (86400, "1-00:00:00"), (90061, "1-01:02:00")])
def test_slurm_time_rounds_up_to_minutes(seconds: float, text: str) -> None:
    assert slurm_time(seconds) == text


# --- YARN -------------------------------------------------------------------------------

DOCUMENTED_YARN = [
    # https://hadoop.apache.org/docs/stable/hadoop-yarn/hadoop-yarn-site/CapacityScheduler.html
    # "Setting up queues", "Queue Properties"
    "yarn.scheduler.capacity.<queue-path>.queues",
    "yarn.scheduler.capacity.<queue-path>.capacity",
    "yarn.scheduler.capacity.<queue-path>.maximum-capacity",
    "yarn.scheduler.capacity.<queue-path>.minimum-user-limit-percent",
    "yarn.scheduler.capacity.<queue-path>.user-limit-factor",
    "yarn.scheduler.capacity.<queue-path>.maximum-applications",
    "yarn.scheduler.capacity.<queue-path>.maximum-am-resource-percent",
    "yarn.scheduler.capacity.<queue-path>.max-parallel-apps",
    "yarn.scheduler.capacity.<queue-path>.state",
    # "Queue lifetime for applications"
    "yarn.scheduler.capacity.<queue-path>.maximum-application-lifetime",
    "yarn.scheduler.capacity.<queue-path>.default-application-lifetime",
    # "Setup for application priority"
    "yarn.cluster.max-application-priority",
    "yarn.scheduler.capacity.<queue-path>.default-application-priority",
    # "Capacity Scheduler container preemption"
    "yarn.resourcemanager.scheduler.monitor.enable",
    "yarn.resourcemanager.scheduler.monitor.policies",
    "yarn.resourcemanager.monitor.capacity.preemption.observe_only",
    "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval",
    "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill",
    "yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round",
    "yarn.scheduler.capacity.<queue-path>.disable_preemption",
    "yarn.scheduler.capacity.<queue-path>.intra-queue-preemption.disable_preemption",
]
QUEUE_PATH = r"root(\.[A-Za-z0-9_-]+)*"


def _documented(name: str) -> bool:
    return any(re.fullmatch(re.escape(t).replace(re.escape("<queue-path>"), QUEUE_PATH), name)
               for t in DOCUMENTED_YARN)


def _properties(text: str) -> dict[str, str]:
    root = ET.fromstring(text)
    assert root.tag == "configuration"
    return {p.findtext("name", ""): p.findtext("value", "") for p in root.iter("property")}


@pytest.mark.parametrize("name", sorted(DOCS))
def test_yarn_xml_parses_and_uses_documented_properties(name: str,
                                                        pcs_configs: dict[str, Any]) -> None:
    doc = DOCS[name](pcs_configs)
    plan = build_plan(doc)
    files = export(doc, "yarn").files
    cs, site = (_properties(files[f]) for f in ("capacity-scheduler.xml", "yarn-site.xml"))
    for prop in [*cs, *site]:
        assert _documented(prop), prop
    assert all(_documented(t.replace("<queue-path>", "root.q")) for t in YARN_PROPERTIES.values())
    assert cs["yarn.scheduler.capacity.root.queues"].split(",") == [c.name for c in plan.classes]
    weights = [int(cs[f"yarn.scheduler.capacity.root.{c.name}.capacity"].removesuffix("w"))
               for c in plan.classes]
    order = np.argsort([c.weight for c in plan.classes], kind="stable")
    assert [weights[i] for i in order] == sorted(weights) and max(weights) == 1000
    assert site["yarn.resourcemanager.scheduler.monitor.enable"] == str(plan.reclaim).lower()
    for c in plan.classes:
        lifetime = cs.get(f"yarn.scheduler.capacity.root.{c.name}.maximum-application-lifetime")
        assert lifetime == (str(math.ceil(max(t.lease_s for t in plan.tiers)))
                            if plan.tiers else None)
