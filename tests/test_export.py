"""Exporters: schema-valid Kubernetes objects, a real slurmctld, documented YARN properties."""

from __future__ import annotations

import contextlib
import functools
import json
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

import jsonschema
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from paretosearch.cli import main
from paretosearch.export import (
    FORMATS,
    ExportError,
    ExportOptions,
    InvalidConfigDocument,
    build_plan,
    export,
    write_export,
)
from paretosearch.export.hpc import YARN_PROPERTIES, slurm_time
from paretosearch.store import choice_entry
from policies import WFQ, Unified, UniSched, WFQHetero
from tests.conftest import SHARED

SCHEMAS = SHARED / "schemas"
CRDS = {"ResourceFlavor": "kueue_resourceflavors.yaml", "Cohort": "kueue_cohorts.yaml",
        "ClusterQueue": "kueue_clusterqueues.yaml", "LocalQueue": "kueue_localqueues.yaml",
        "WorkloadPriorityClass": "kueue_workloadpriorityclasses.yaml",
        "Queue": "volcano_queues.yaml"}
HETERO = {"k80": 20, "v100": 20, "p100": 20}  # gavel-hetero-60, listed slowest first
INF = math.inf


def _doc(policy: Any, gpus: dict[str, int], profile: str = "custom", **extra: Any
         ) -> dict[str, Any]:
    """A config document as chosen.json carries it."""
    return {"policy": policy.name, "params": {}, "fitted": policy.to_dict()["params"],
            "objectives": {"jct:avg": 1000.0}, "cluster": {"profile": profile,
                                                           "gpus_by_type": gpus}, **extra}


def _pcs_wfq(entry: dict[str, Any]) -> dict[str, Any]:
    return _doc(WFQ.from_pcs_config(entry), {"generic": 64}, "pcs-64")


def _unified(preempt: bool = True) -> dict[str, Any]:
    policy = Unified(W_1=1.0, W_2=0.0, W_3=-1.0, preempt=preempt, be_lease_s=300.0,
                     slo_lease_multiple=3, slo_reward=200.0, be_reward_scale=2.0,
                     thresholds=(1e3, 1e5, INF))
    return _doc(policy, HETERO, "gavel-hetero-60")


def _unisched() -> dict[str, Any]:
    return _doc(UniSched(be_lease_s=600.0, slo_lease_multiple=2), {"A100": 16})


def _fifo() -> dict[str, Any]:
    return {"policy": "fifo", "params": {}, "cluster": {"gpus_by_type": {"V100": 8}}}


# --- schemas ---------------------------------------------------------------------------


@functools.cache
def _schema(kind: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((SCHEMAS / CRDS[kind]).read_text())
    schema: dict[str, Any] = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"]
                                  if v["name"] == version)
    return schema


def _undeclared(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields the schema does not declare (the API server would prune them silently, so
    jsonschema alone would not catch a field of the wrong version, e.g. v1beta1's cohort)."""
    if isinstance(obj, dict) and "properties" in schema:
        out = []
        for key, value in obj.items():
            if key in schema["properties"]:
                out += _undeclared(value, schema["properties"][key], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{path}.{key}")
        return out
    if isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        return [x for k, v in obj.items()
                for x in _undeclared(v, schema["additionalProperties"], f"{path}.{k}")]
    if isinstance(obj, list) and "items" in schema:
        return [x for i, v in enumerate(obj) for x in _undeclared(v, schema["items"],
                                                                   f"{path}[{i}]")]
    return []


def _check_against_crd(doc: dict[str, Any]) -> None:
    version = doc["apiVersion"].split("/")[1]
    schema = _schema(doc["kind"], version)
    jsonschema.validate(doc, schema)
    assert not _undeclared(doc, schema), (doc["kind"], _undeclared(doc, schema))


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


# --- Kueue ------------------------------------------------------------------------------


def _kueue(doc: dict[str, Any], version: str = "v1beta2") -> list[dict[str, Any]]:
    result = export(doc, "kueue", options=ExportOptions(kueue_version=version, namespace="ml"))
    return _documents(result.files["kueue.yaml"])


def _route(local_queues: list[dict[str, Any]], size: float) -> str:
    """The LocalQueue a job of ``size`` GPU-seconds goes to, by the exported annotations."""
    bounds = [(float(q["metadata"]["annotations"]["paretosearch.io/max-size-gpu-seconds"]
                     .replace("unbounded", "inf")), q["metadata"]["name"]) for q in local_queues]
    return str(next(name for bound, name in sorted(bounds) if size <= bound))


DOCS = {"wfq": lambda pcs: _pcs_wfq(pcs["0e4a51_bal"]), "unified": lambda pcs: _unified(),
        "unisched": lambda pcs: _unisched(), "fifo": lambda pcs: _fifo()}


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
@pytest.mark.parametrize("name", sorted(DOCS))
def test_kueue_objects_validate_and_hold_together(name: str, version: str,
                                                  pcs_configs: dict[str, Any]) -> None:
    doc = DOCS[name](pcs_configs)
    plan = build_plan(doc)
    objs = _kueue(doc, version)
    for obj in objs:
        assert obj["apiVersion"] == f"kueue.x-k8s.io/{version}"
        _check_against_crd(obj)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objs:
        by_kind.setdefault(obj["kind"], []).append(obj)
    cohort = by_kind["Cohort"][0]["metadata"]["name"]
    flavors = {f["metadata"]["name"] for f in by_kind["ResourceFlavor"]}
    queues = {q["metadata"]["name"]: q["spec"] for q in by_kind["ClusterQueue"]}
    assert list(queues) == [c.name for c in plan.classes]
    cohort_field = "cohortName" if version == "v1beta2" else "cohort"
    for spec in queues.values():
        assert spec[cohort_field] == cohort
        assert {f["name"] for f in spec["resourceGroups"][0]["flavors"]} == flavors
    for lq in by_kind["LocalQueue"]:
        assert lq["spec"]["clusterQueue"] in queues and lq["metadata"]["namespace"] == "ml"
    # quotas: per flavor, integers summing to that GPU type's count
    for gpu_type, n in plan.gpus_by_type.items():
        total = sum(f["resources"][0]["nominalQuota"] for spec in queues.values()
                    for f in spec["resourceGroups"][0]["flavors"] if f["name"] == gpu_type.lower())
        assert total == n
    # weights ordered as the class weights
    weights = [queues[c.name]["fairSharing"]["weight"] for c in plan.classes]
    for (a, wa), (b, wb) in zip(zip(plan.classes, weights, strict=True),
                                zip(plan.classes[1:], weights[1:], strict=True), strict=False):
        assert (a.weight > b.weight) <= (wa >= wb) and (a.weight < b.weight) <= (wa <= wb)
    # every class reachable: a job of each class's largest size lands in that class
    locals_ = by_kind["LocalQueue"]
    for c in plan.classes:
        assert _route(locals_, c.max_size_gpu_s if c.max_size_gpu_s < INF else 1e18) == c.name
    # tiers: a priority class each, its labels (lease as max-exec-time) on every LocalQueue
    assert {p["metadata"]["name"]: p["value"] for p in by_kind.get("WorkloadPriorityClass", [])
            } == {t.name: t.priority for t in plan.tiers}
    for t in plan.tiers:
        for lq in locals_:
            labels = lq["metadata"]["annotations"][f"paretosearch.io/{t.name}-job-labels"]
            assert f"kueue.x-k8s.io/max-exec-time-seconds={math.ceil(t.lease_s)}" in labels


def test_kueue_version_fields_differ_and_the_check_catches_a_wrong_one() -> None:
    v1 = next(o for o in _kueue(_unified(), "v1beta1") if o["kind"] == "ClusterQueue")
    v2 = next(o for o in _kueue(_unified(), "v1beta2") if o["kind"] == "ClusterQueue")
    assert "cohort" in v1["spec"] and "cohortName" in v2["spec"]
    assert _undeclared(v1, _schema("ClusterQueue", "v1beta2")) == [".spec.cohort"]
    assert _undeclared(v2, _schema("ClusterQueue", "v1beta1")) == [".spec.cohortName"]


def test_kueue_preemption_follows_the_policy(pcs_configs: dict[str, Any]) -> None:
    def preemption(doc: dict[str, Any]) -> dict[str, str]:
        cq = next(o for o in _kueue(doc) if o["kind"] == "ClusterQueue")
        return dict(cq["spec"]["preemption"])

    # WFQ reclaims shares; best-effort jobs preemptible by SLO jobs; wfq-hetero never preempts
    assert preemption(_pcs_wfq(pcs_configs["0e4a51_bal"]))["reclaimWithinCohort"] == "Any"
    assert preemption(_unified(preempt=True)) == {"reclaimWithinCohort": "LowerPriority",
                                                  "withinClusterQueue": "LowerPriority"}
    assert preemption(_unified(preempt=False)) == {"reclaimWithinCohort": "Never",
                                                   "withinClusterQueue": "Never"}
    hetero = WFQHetero(thresholds=(10.0, INF))
    assert preemption(_doc(hetero, HETERO)) == {"reclaimWithinCohort": "Never",
                                                "withinClusterQueue": "Never"}


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 6), types=st.lists(st.integers(1, 300), min_size=1, max_size=4),
       exps=st.tuples(*[st.floats(-3, 3)] * 3), data=st.data())
def test_quotas_sum_to_each_type_and_weights_keep_their_order(
        k: int, types: list[int], exps: tuple[float, float, float], data: st.DataObject) -> None:
    cuts = sorted(set(data.draw(st.lists(st.floats(1, 1e7), min_size=k - 1, max_size=k - 1))))
    policy = WFQHetero(W_1=exps[0], W_2=exps[1], W_3=exps[2], thresholds=(*cuts, INF))
    gpus = {f"t{i}": n for i, n in enumerate(types)}
    plan = build_plan(_doc(policy, gpus))
    objs = _kueue(_doc(policy, gpus))
    cqs = [o for o in objs if o["kind"] == "ClusterQueue"]
    for t, n in gpus.items():
        assert sum(f["resources"][0]["nominalQuota"] for q in cqs
                   for f in q["spec"]["resourceGroups"][0]["flavors"] if f["name"] == t) == n
    order = np.argsort([c.weight for c in plan.classes], kind="stable")
    ints = [cqs[i]["spec"]["fairSharing"]["weight"] for i in order]
    assert ints == sorted(ints)
    volcano = [o["spec"]["weight"] for o in _documents(export(
        _doc(policy, gpus), "volcano").files["volcano.yaml"]) if o["kind"] == "Queue"]
    assert [volcano[i] for i in order] == sorted(volcano[i] for i in order)
    locals_ = [o for o in objs if o["kind"] == "LocalQueue"]
    assert {_route(locals_, s) for s in (*cuts, 1e18)} == {c.name for c in plan.classes}


# --- Volcano ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DOCS))
def test_volcano_queues_validate(name: str, pcs_configs: dict[str, Any]) -> None:
    doc = DOCS[name](pcs_configs)
    plan = build_plan(doc)
    objs = _documents(export(doc, "volcano").files["volcano.yaml"])
    queues = [o for o in objs if o["kind"] == "Queue"]
    for q in queues:
        _check_against_crd(q)
        assert q["spec"]["reclaimable"] == plan.reclaim
        assert q["spec"]["capability"]["nvidia.com/gpu"] == plan.total_gpus
    assert [q["metadata"]["name"] for q in queues] == [c.name for c in plan.classes]
    priorities = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PriorityClass"}
    assert {n: p["value"] for n, p in priorities.items()} == {t.name: t.priority
                                                              for t in plan.tiers}
    for t in plan.tiers:
        expected = "PreemptLowerPriority" if plan.preempts(t) else "Never"
        assert priorities[t.name]["preemptionPolicy"] == expected


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
def _slurmctld(tmp: Path, fragment: Path) -> Iterator[Callable[..., str]]:
    """munged and slurmctld on localhost with a private key, socket and port, the exported
    fragment included; yields ``scontrol(*args)``."""
    assert SLURMCTLD and MUNGED and SCONTROL
    key, sock = tmp / "munge.key", tmp / "m.sock"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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
        f"Include {fragment}", ""]))
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
    doc = _unified() if name == "unified" else _pcs_wfq(pcs_configs["0e4a51_bal"])
    plan = build_plan(doc)
    result = export(doc, "slurm", options=ExportOptions(nodes="gpu[1-4]"))
    fragment = write_export(result, tmp_path / "out")[0]
    exported = {f["PartitionName"]: f for f in map(_fields, fragment.read_text().splitlines())
                if "PartitionName" in f}
    assert list(exported) == [c.name for c in plan.classes]
    with _slurmctld(tmp_path, fragment) as scontrol:
        config = dict(re.findall(r"^(\w+)\s+= (\S+)", scontrol("show", "config"), re.M))
        shown = {name: _fields(scontrol("show", "partition", name)) for name in exported}
    assert config["PriorityType"] == "priority/multifactor"
    for part, fields in exported.items():
        got = shown[part]
        for key in ("PriorityJobFactor", "PriorityTier", "MaxTime", "PreemptMode"):
            assert got[key] == fields[key], (part, key)
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
    else:  # WFQ: no leases; its reclaiming cannot be expressed, so no preemption
        assert {p["MaxTime"] for p in shown.values()} == {"UNLIMITED"}
        assert {p["PreemptMode"] for p in shown.values()} == {"OFF"}


def test_slurm_qos_script_sets_priority_wall_time_and_preemption() -> None:
    script = export(_unified(), "slurm").files["sacctmgr-qos.sh"]
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


# --- JSON and the plans -----------------------------------------------------------------


def test_json_round_trips(pcs_configs: dict[str, Any]) -> None:
    doc = _pcs_wfq(pcs_configs["6214e9_jct"])
    out = json.loads(export(doc, "json").files["plan.json"])
    assert out["source"] == json.loads(json.dumps(doc).replace("Infinity", "null"))
    again = json.loads(export(out["source"], "json").files["plan.json"])
    assert again == out
    assert out["plan"]["classes"][-1]["max_size_gpu_s"] is None
    assert out["cannot_express"] == out["plan"]["cannot_express"]


@pytest.mark.parametrize("key", ["0e4a51_bal", "b436b2_jct", "6c71a0_pred", "ee9e8c_bal"])
def test_wfq_plan_has_pcs_rates_and_thresholds(key: str, pcs_configs: dict[str, Any]) -> None:
    entry = pcs_configs[key]
    plan = build_plan(_pcs_wfq(entry))
    rates = [n / d for n, d in entry["class_rates"]]
    assert [c.weight for c in plan.classes] == pytest.approx(rates, rel=1e-12)
    assert [c.max_size_gpu_s for c in plan.classes] == [INF if t is None else t
                                                        for t in entry["class_thresholds"]]
    assert plan.reclaim and not plan.tiers
    lost = "\n".join(plan.unexpressed)
    assert f"zeta_min={entry['clip_demand_factor']:g}" in lost and "delta=" in lost
    assert "T=" not in lost and "W=" not in lost


def test_every_pcs_config_exports_to_every_format(pcs_configs: dict[str, Any]) -> None:
    for entry in pcs_configs.values():
        for fmt in FORMATS:
            result = export(_pcs_wfq(entry), fmt)
            assert result.files and all("zeta_min" in t for t in result.files.values())


def test_unisched_plan_has_tiers_leases_and_priorities() -> None:
    plan = build_plan(_unisched())
    assert [c.name for c in plan.classes] == ["all"] and plan.classes[0].weight == 1.0
    slo, be = plan.tiers
    assert (slo.name, slo.lease_s, be.name, be.lease_s) == ("slo", 1200.0, "best-effort", 600.0)
    assert (slo.priority, be.priority) == (1000, 10)  # slo_reward 100 : be_reward_scale 1
    assert plan.preempts(slo) == (be,) and plan.preempts(be) == ()
    lost = "\n".join(plan.unexpressed)
    for name in ("profiler_reward", "reward_decay", "profile_s", "opportunistic",
                 "milp_time_limit_s", "leases become time limits"):
        assert name in lost
    for name in ("be_lease_s", "slo_lease_multiple", "slo_reward", "be_reward_scale"):
        assert f"{name}=" not in lost


def test_unified_weights_per_gpu_type_follow_speed_ranks() -> None:
    doc = _unified(preempt=False)
    policy = Unified.from_params(doc["fitted"])
    plan = build_plan(doc)
    assert list(plan.gpus_by_type) == ["v100", "p100", "k80"]  # by the profile's speeds
    for tier, gpu_type in enumerate(plan.gpus_by_type):
        got = [c.weight_by_type[gpu_type] for c in plan.classes]
        assert got == pytest.approx(policy.weights(tier, 3).tolist(), rel=1e-12)
    shares = [np.mean([policy.weights(t, 3)[k] for t in range(3)]) for k in range(3)]
    assert [c.weight for c in plan.classes] == pytest.approx(shares)  # equal GPUs per type
    assert [t.preemptible for t in plan.tiers] == [True, False]  # preempt=False keeps BE jobs
    lost = "\n".join(plan.unexpressed)
    for name in ("tau_max", "theta_max", "theta_balance", "overcommit", "zeta_min", "delta"):
        assert f"{name}=" in lost
    assert "W_1=" not in lost and "preempt=" not in lost


def test_wfq_hetero_on_an_unknown_profile_keeps_the_given_type_order() -> None:
    policy = WFQHetero(W_1=2.0, W_2=-1.0, thresholds=(50.0, 500.0, INF))
    plan = build_plan(_doc(policy, {"a": 8, "b": 24}))  # profile "custom": speeds unknown
    assert list(plan.gpus_by_type) == ["a", "b"]
    for W, gpu_type in ((2.0, "a"), (-1.0, "b")):
        w = np.exp(-W * np.arange(3))
        assert [c.weight_by_type[gpu_type] for c in plan.classes] == pytest.approx(w / w.sum())
    assert not plan.reclaim and "round_s=" in "\n".join(plan.unexpressed)


@pytest.mark.parametrize(("policy", "params"), [("hadar", ("round_s", "eta", "utility")),
                                                ("fifo", ())])
def test_policies_without_classes_become_one_queue(policy: str, params: tuple[str, ...]) -> None:
    plan = build_plan({"policy": policy, "params": {}, "cluster": {"gpus_by_type": {"V": 8}}})
    assert [(c.name, c.weight, c.max_size_gpu_s) for c in plan.classes] == [("all", 1.0, INF)]
    assert not plan.tiers and not plan.reclaim
    assert "one first-come first-served queue" in plan.unexpressed[0]
    assert [item.split("=")[0] for item in plan.unexpressed[1:]] == list(params)


@pytest.mark.parametrize(("change", "words"), [
    ({"policy": "nope"}, ["'policy'", "'nope'", "wfq"]),
    ({"fitted": None, "params": {"T": 1.0}}, ["'fitted'", "re-select", "thresholds"]),
    ({"fitted": {"W": 99.0}}, ["'fitted'", "'W'", "99"]),
    ({"fitted": "x"}, ["'fitted'", "'x'"]),
    ({"cluster": {"gpus_by_type": {"V100": 0}}}, ["'cluster.gpus_by_type'", "'V100': 0"]),
    ({"cluster": None}, ["'cluster.gpus_by_type'", "re-select"]),
])
def test_bad_documents_name_the_field(change: dict[str, Any], words: list[str],
                                      pcs_configs: dict[str, Any]) -> None:
    doc = {**_pcs_wfq(pcs_configs["0e4a51_bal"]), **change}
    with pytest.raises(InvalidConfigDocument) as err:
        build_plan(doc, source="chosen.json")
    assert str(err.value).startswith("chosen.json")
    for word in words:
        assert word in str(err.value)


def test_bad_options_and_formats_are_errors(pcs_configs: dict[str, Any]) -> None:
    with pytest.raises(ExportError, match="unknown export format 'k8s'"):
        export(_pcs_wfq(pcs_configs["0e4a51_bal"]), "k8s")
    with pytest.raises(ExportError, match="v1alpha1"):
        ExportOptions(kueue_version="v1alpha1")
    with pytest.raises(ExportError, match="namespace"):
        ExportOptions(namespace="Not_A_Name")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_file_states_what_it_cannot_express(fmt: str) -> None:
    result = export(_unified(), fmt)
    assert result.cannot_express
    for text in result.files.values():
        for item in result.cannot_express:
            assert item.replace("--", "- -") in text


# --- the command line -------------------------------------------------------------------


def _front_entry(thresholds: list[float | None], W: float) -> dict[str, Any]:
    fitted = WFQ.from_params({"W": W, "thresholds": thresholds,
                              "rates": [0.6, 0.3, 0.1]}).to_dict()["params"]
    return {"params": {"W": W}, "objectives": {"jct:avg": 500.0 * W, "pred_err:avg": 10.0 / W},
            "metrics": {}, "test_metrics": None, "fitted": fitted}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory as 'paretosearch search' and 'select' leave it, written by hand."""
    run = tmp_path / "run"
    run.mkdir()
    spec = {"policy": "wfq", "profile": "pcs-64",
            "cluster": {"profile": "pcs-64", "gpus_by_type": {"generic": 64}},
            "fixed": {"T": 2.0}, "objectives": ["jct:avg", "pred_err:avg"]}
    front = [_front_entry([100.0, 1e4, None], 1.0), _front_entry([50.0, 5e3, None], 2.0)]
    (run / "run.json").write_text(json.dumps(spec))
    (run / "front.json").write_text(json.dumps({"front": front}))
    (run / "chosen.json").write_text(json.dumps({**choice_entry(spec, front[1]),
                                                 "run": str(run), "front_index": 1}))
    return run


def test_cli_exports_the_chosen_config(run_dir: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    assert main(["export", str(run_dir), "--format", "kueue", "--namespace", "ml"]) == 0
    out = capsys.readouterr().out
    path = run_dir / "export" / "kueue" / "kueue.yaml"
    assert str(path) in out and "cannot express" in out and "zeta_min" in out
    objs = _documents(path.read_text())
    local = [o for o in objs if o["kind"] == "LocalQueue"]
    assert [o["metadata"]["annotations"]["paretosearch.io/max-size-gpu-seconds"]
            for o in local] == ["50", "5000", "unbounded"]  # front entry 1's classes
    assert {o["metadata"]["namespace"] for o in local} == {"ml"}
    assert not list(path.parent.glob(".*.tmp"))


def test_cli_exports_a_front_entry_or_a_file(run_dir: Path, tmp_path: Path) -> None:
    (run_dir / "chosen.json").unlink()
    out = tmp_path / "slurm"
    assert main(["export", str(run_dir), "--index", "0", "--format", "slurm", "--nodes",
                 "gpu[01-08]", "--out", str(out)]) == 0
    conf = (out / "slurm-paretosearch.conf").read_text()
    assert "run " + str(run_dir) + ", front entry 0" in conf and "Nodes=gpu[01-08]" in conf
    assert "class0: size <= 100," in conf  # front entry 0's first threshold
    chosen = tmp_path / "mine.json"
    chosen.write_text(json.dumps(_unisched()))
    assert main(["export", str(chosen), "--format", "json"]) == 0
    plan = json.loads((tmp_path / "export" / "json" / "plan.json").read_text())["plan"]
    assert [t["name"] for t in plan["tiers"]] == ["slo", "best-effort"]


@pytest.mark.parametrize(("args", "words"), [
    (["--format", "kueue"], ["no chosen.json", "paretosearch select", "--index N"]),
    (["--format", "kueue", "--index", "5"], ["--index 5", "2 entries"]),
])
def test_cli_errors_say_how_to_fix(run_dir: Path, args: list[str], words: list[str],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir / "chosen.json").unlink()
    assert main(["export", str(run_dir), *args]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for word in words:
        assert word in err


def test_cli_rejects_a_bad_format_and_a_bad_document(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["export", str(tmp_path), "--format", "k8s"])
    assert exit_.value.code == 2 and "invalid choice: 'k8s'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**_unisched(), "cluster": {"gpus_by_type": {"A100": -2}}}))
    assert main(["export", str(bad), "--format", "yarn"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(bad) in err and "'cluster.gpus_by_type'" in err and "-2" in err
    assert not (tmp_path / "export").exists()
