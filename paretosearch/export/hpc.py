"""Batch-system targets: Slurm (partitions and QOS) and YARN (CapacityScheduler queues).

Slurm: a ``slurm.conf`` fragment (``Include`` it) with one partition per class, the
cluster-wide settings those need in a file of their own (merged by hand: they apply to every
partition), and a ``sacctmgr`` script with one QOS per class and tier (needs slurmdbd). YARN: a
``capacity-scheduler.xml`` with weight-mode queues and a ``yarn-site.xml`` fragment for
preemption and priorities. Every YARN property name comes from :data:`YARN_PROPERTIES`.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from paretosearch.export.plan import JobTier, Plan, SizeClass, scaled_integers
from paretosearch.export.render import Export, ExportOptions, header, weight_losses

__all__ = ["YARN_PROPERTIES", "render_slurm", "render_yarn", "slurm_time"]

YARN_PROPERTIES = {
    "queues": "yarn.scheduler.capacity.<queue-path>.queues",
    "capacity": "yarn.scheduler.capacity.<queue-path>.capacity",
    "maximum-capacity": "yarn.scheduler.capacity.<queue-path>.maximum-capacity",
    "user-limit-factor": "yarn.scheduler.capacity.<queue-path>.user-limit-factor",
    "maximum-lifetime": "yarn.scheduler.capacity.<queue-path>.maximum-application-lifetime",
    "default-lifetime": "yarn.scheduler.capacity.<queue-path>.default-application-lifetime",
    "disable-preemption": "yarn.scheduler.capacity.<queue-path>.disable_preemption",
    "default-priority": "yarn.scheduler.capacity.<queue-path>.default-application-priority",
    "monitor-enable": "yarn.resourcemanager.scheduler.monitor.enable",
    "monitor-policies": "yarn.resourcemanager.scheduler.monitor.policies",
    "max-priority": "yarn.cluster.max-application-priority",
}
"""Every property the YARN export writes (Hadoop's CapacityScheduler documentation, sections
"Queue Properties", "Queue lifetime for applications", "Setup for application priority",
"Capacity Scheduler container preemption"); ``<queue-path>`` is e.g. ``root.class0``."""

PREEMPTION_POLICY = ("org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity."
                     "ProportionalCapacityPreemptionPolicy")


def slurm_time(seconds: float) -> str:
    """Seconds as a Slurm time limit, rounded up to whole minutes (Slurm's resolution), in
    the form ``scontrol`` prints: ``HH:MM:SS`` or ``D-HH:MM:SS``."""
    days, minutes = divmod(math.ceil(seconds / 60), 24 * 60)
    clock = f"{minutes // 60:02d}:{minutes % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def _qos(c: SizeClass, tier: JobTier | None) -> str:
    return f"{c.name}-{tier.name}" if tier else c.name


def render_slurm(plan: Plan, options: ExportOptions) -> Export:
    """``slurm-paretosearch.conf`` (a partition per class: ``Include`` it),
    ``slurm-cluster.conf`` (the cluster-wide settings the classes need, to merge into
    slurm.conf by hand) and ``sacctmgr-qos.sh`` (a QOS per class and tier: priority, maximum
    wall time, preemption)."""
    factors = scaled_integers([c.weight for c in plan.classes])
    tiers: tuple[JobTier | None, ...] = plan.tiers or (None,)
    preempt = any(plan.preempts(t) for t in plan.tiers)
    limits = ""
    if plan.tiers:
        limits = (f" MaxTime={slurm_time(max(t.lease_s for t in plan.tiers))}"
                  f" DefaultTime={slurm_time(min(t.lease_s for t in plan.tiers))}")
    partitions = [f"PartitionName={c.name} Nodes={options.nodes} PriorityJobFactor={f} "
                  f"PriorityTier=1{limits or ' MaxTime=UNLIMITED'}"
                  f"{' PreemptMode=REQUEUE' if preempt else ''} State=UP"
                  for c, f in zip(plan.classes, factors, strict=True)]
    cluster = ["# the partitions' PriorityJobFactor and the QOS priorities count only with",
               "# the multifactor priority plugin, weighted here",
               "PriorityType=priority/multifactor", "PriorityWeightPartition=1000",
               "PriorityWeightQOS=1000"]
    if preempt:
        cluster += ["# higher tiers preempt lower ones by QOS; preempted jobs are requeued",
                    "PreemptType=preempt/qos", "PreemptMode=REQUEUE"]
    add, modify = [], []
    for c, f in zip(plan.classes, factors, strict=True):
        for t in tiers:
            wall = f" MaxWall={slurm_time(t.lease_s)}" if t else ""
            add.append(f"sacctmgr -i add qos name={_qos(c, t)} "
                       f"Priority={t.priority if t else f}{wall}")
            victims = [_qos(k, v) for k in plan.classes for v in plan.preempts(t)] if t else []
            if victims:
                modify.append(f"sacctmgr -i modify qos where name={_qos(c, t)} "
                              f"set Preempt={','.join(victims)}")
    submit = ("--qos=<class>-<tier> (tiers: " + ", ".join(t.name for t in plan.tiers) + ")"
              if plan.tiers else "--qos=<class>")
    notes = [f"submit with --partition=<class> {submit} and --gres=gpu:N",
             "slurm-paretosearch.conf adds only partitions: Include it in slurm.conf",
             "slurm-cluster.conf holds the cluster-wide settings the classes need (priority/"
             "multifactor" + ("; preempt/qos, REQUEUE" if preempt else "") + "): they apply to "
             "every partition, so merge them into slurm.conf by hand, checking your own",
             f"Nodes={options.nodes}: every partition spans these nodes (classes share the GPUs); "
             "pass --nodes to name your GPU nodes",
             "sacctmgr-qos.sh needs slurmdbd (AccountingStorageType=accounting_storage/slurmdbd)"
             "; then give accounts the QOS: sacctmgr modify account NAME set qos+=..."]
    lost = [*plan.unexpressed, *weight_losses(plan, "Slurm"),
            "Slurm has no weighted GPU shares between partitions: class weights become "
            "PriorityJobFactor, which orders pending jobs but guarantees no share"]
    if plan.reclaim:
        lost.append("reclaiming a class's share by preemption: Slurm preempts by QOS, not by "
                    "share")
    text = "".join(f"# {line}\n" for line in header(plan, "Slurm", notes, lost))
    script = ("#!/bin/sh\n" + text + "set -e\n" + "".join(f"{c}\n" for c in add + modify))
    return Export("slurm", {"slurm-paretosearch.conf": text + "\n".join(partitions) + "\n",
                            "slurm-cluster.conf": text + "\n".join(cluster) + "\n",
                            "sacctmgr-qos.sh": script}, tuple(lost))


def _xml(comment: list[str], properties: dict[str, str]) -> str:
    root = ET.Element("configuration")
    for name, value in properties.items():
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    ET.indent(root)
    text = "\n".join("  " + re.sub("-(?=-)", "- ", line) for line in comment)  # no "--" in it
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<!--\n{text}\n-->\n'
            + ET.tostring(root, encoding="unicode") + "\n")


def _prop(key: str, queue: str = "") -> str:
    return YARN_PROPERTIES[key].replace("<queue-path>", f"root.{queue}" if queue else "root")


def render_yarn(plan: Plan, options: ExportOptions) -> Export:
    """``capacity-scheduler.xml`` (a weight-mode queue per class, lifetimes from leases,
    preemption per queue) and ``yarn-site.xml`` (the preemption monitor, priorities)."""
    weights = scaled_integers([c.weight for c in plan.classes])
    queues = {_prop("queues"): ",".join(c.name for c in plan.classes)}
    for c, w in zip(plan.classes, weights, strict=True):
        queues |= {_prop("capacity", c.name): f"{w}w",
                   _prop("maximum-capacity", c.name): "100",
                   _prop("user-limit-factor", c.name): "-1",
                   _prop("disable-preemption", c.name): str(not plan.reclaim).lower()}
        if plan.tiers:
            queues |= {
                _prop("maximum-lifetime", c.name): str(math.ceil(max(t.lease_s
                                                                     for t in plan.tiers))),
                _prop("default-lifetime", c.name): str(math.ceil(min(t.lease_s
                                                                     for t in plan.tiers))),
                _prop("default-priority", c.name): str(min(t.priority for t in plan.tiers))}
    site = {_prop("monitor-enable"): str(plan.reclaim).lower()}
    if plan.reclaim:
        site[_prop("monitor-policies")] = PREEMPTION_POLICY
    if plan.tiers:
        site[_prop("max-priority")] = str(max(t.priority for t in plan.tiers))
    notes = ["merge yarn-site.xml into your yarn-site.xml; root.queues names only these "
             "queues, so applications must name theirs (or add a default queue)",
             "GPUs are scheduled with yarn.io/gpu and the DominantResourceCalculator",
             *(f"submit {t.name} applications with priority {t.priority}" for t in plan.tiers)]
    lost = [*plan.unexpressed, *weight_losses(plan, "YARN")]
    if any(plan.preempts(t) for t in plan.tiers):
        lost.append("preemption by application priority (higher tiers over lower): YARN "
                    "preempts to restore queue capacities only")
    comment = header(plan, "YARN CapacityScheduler", notes, lost)
    return Export("yarn", {"capacity-scheduler.xml": _xml(comment, queues),
                           "yarn-site.xml": _xml(comment, site)}, tuple(lost))
