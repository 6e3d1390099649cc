"""Exporters to HPC schedulers: a real slurmctld loads the Slurm export; the YARN XML parses and
uses only documented property names."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from paretosearch.export import ExportOptions, build_plan, export, write_export
from paretosearch.export.hpc import YARN_PROPERTIES, slurm_time
from tests.helpers.exports import DOCS, pcs_wfq_doc, unified_doc
from tests.helpers.slurm import needs_slurm, reserved_port, slurm

# --- Slurm: a real slurmctld ------------------------------------------------------------

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
    nodes = ["NodeName=gpu[1-4] CPUs=8 Gres=gpu:4 State=FUTURE",  # no slurmd needed
             f"Include {fragment}", f"Include {cluster}"]
    with reserved_port() as port, slurm(tmp_path, port, nodes) as scontrol:
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
