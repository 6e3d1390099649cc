"""Kubernetes targets: Kueue (ClusterQueues in a cohort) and Volcano (weighted Queues).

Objects follow the CRDs in ``shared/schemas`` (Kueue ``kueue.x-k8s.io`` v1beta2 and v1beta1,
Volcano ``scheduling.volcano.sh/v1beta1``); the tests validate them against those schemas.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import yaml

from paretosearch.export.plan import Plan, scaled_integers
from paretosearch.export.render import (
    Export,
    ExportOptions,
    header,
    size_bound,
    weight_losses,
)

__all__ = ["GPU", "render_kueue", "render_volcano"]

GPU = "nvidia.com/gpu"
"""The GPU resource name (NVIDIA's device plugin)."""
COHORT = "paretosearch"
TYPE_LABEL = "paretosearch.io/gpu-type"
"""The node label each ResourceFlavor selects (label the nodes, or edit nodeLabels)."""
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"


def _name(text: str) -> str:
    """A Kubernetes object name from a GPU type name (``A100-80GB`` -> ``a100-80gb``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def _yaml(plan: Plan, target: str, notes: list[str], lost: list[str],
          docs: list[dict[str, Any]], warnings: Sequence[str] = ()) -> str:
    comment = "".join(f"# {line}\n" for line in header(plan, target, notes, lost, warnings))
    return comment + "---\n" + yaml.safe_dump_all(docs, sort_keys=False)


def _job_labels(plan: Plan, queue: str) -> dict[str, str]:
    """LocalQueue annotations: the size bound and the labels each tier's jobs carry."""
    c = next(c for c in plan.classes if c.name == queue)
    out = {"paretosearch.io/max-size-gpu-seconds": size_bound(c.max_size_gpu_s),
           "paretosearch.io/job-labels": f"kueue.x-k8s.io/queue-name={queue}"}
    for t in plan.tiers:
        out[f"paretosearch.io/{t.name}-job-labels"] = (
            f"kueue.x-k8s.io/queue-name={queue}, {PRIORITY_CLASS}={t.name}, "
            f"{MAX_EXEC}={math.ceil(t.lease_s)}")
    return out


def render_kueue(plan: Plan, options: ExportOptions) -> Export:
    """A ResourceFlavor per GPU type, a Cohort, a ClusterQueue and a LocalQueue per class, a
    WorkloadPriorityClass per tier (multi-document YAML)."""
    api = f"kueue.x-k8s.io/{options.kueue_version}"
    cohort_field = "cohortName" if options.kueue_version == "v1beta2" else "cohort"
    flavors = {t: _name(t) for t in plan.gpus_by_type}
    quotas = plan.quotas()
    weights = scaled_integers([c.weight for c in plan.classes])
    lower = any(plan.preempts(t) for t in plan.tiers)
    preemption = {"reclaimWithinCohort": "Any" if plan.reclaim
                  else "LowerPriority" if lower else "Never",
                  "withinClusterQueue": "LowerPriority" if lower else "Never"}
    docs: list[dict[str, Any]] = [
        {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": flavors[t]},
         "spec": {"nodeLabels": {TYPE_LABEL: flavors[t]}}} for t in plan.gpus_by_type]
    docs.append({"apiVersion": api, "kind": "Cohort", "metadata": {"name": COHORT}, "spec": {}})
    for k, (c, w) in enumerate(zip(plan.classes, weights, strict=True)):
        spec = {cohort_field: COHORT, "namespaceSelector": {},
                "queueingStrategy": "BestEffortFIFO", "fairSharing": {"weight": w},
                "preemption": preemption,
                "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                    {"name": flavors[t], "resources": [{"name": GPU, "nominalQuota": q[k]}]}
                    for t, q in quotas.items()]}]}
        docs.append({"apiVersion": api, "kind": "ClusterQueue",
                     "metadata": {"name": c.name,
                                  "annotations": {"paretosearch.io/share": f"{c.weight:.6g}"}},
                     "spec": spec})
    for c in plan.classes:
        docs.append({"apiVersion": api, "kind": "LocalQueue",
                     "metadata": {"name": c.name, "namespace": options.namespace,
                                  "annotations": _job_labels(plan, c.name)},
                     "spec": {"clusterQueue": c.name}})
    for t in plan.tiers:
        docs.append({"apiVersion": api, "kind": "WorkloadPriorityClass",
                     "metadata": {"name": t.name}, "value": t.priority,
                     "description": f"paretosearch tier {t.name}, lease {t.lease_s:g} s"})
    notes = ["fairSharing.weight acts only with fair sharing enabled in Kueue's Configuration "
             "(fairSharing.enable: true)",
             f"each ResourceFlavor selects nodes labelled {TYPE_LABEL}=<type>: label the nodes "
             "or edit nodeLabels",
             f"the ClusterQueues cover only {GPU}: add cpu and memory to coveredResources if "
             "jobs request them",
             "each class's nominal quotas are its share of each GPU type; the cohort lends "
             "unused quota, so idle GPUs are never held back",
             "jobs carry the labels in their LocalQueue's paretosearch.io/*job-labels annotations"
             + (f" ({MAX_EXEC} is a label on each Job, not a queue setting)" if plan.tiers
                else "")]
    lost = [*plan.unexpressed, *weight_losses(plan, "Kueue", quotas_by_type=True)]
    empty = [c.name for k, c in enumerate(plan.classes) if not any(q[k] for q in quotas.values())]
    warnings = [f"{', '.join(empty)}: no nominal quota (a share below one GPU of each type): "
                "their jobs run only on GPUs borrowed from the cohort"
                + (", which other queues reclaim by preemption" if plan.reclaim else "")
                + "; merge classes (--max-classes) or move quota to them"] if empty else []
    return Export("kueue", {"kueue.yaml": _yaml(plan, f"Kueue {options.kueue_version}", notes,
                                                lost, docs, warnings)},
                  tuple(lost), tuple(warnings))


def render_volcano(plan: Plan, options: ExportOptions) -> Export:
    """A Volcano Queue per class (weight, reclaimable, capability) and a PriorityClass per
    tier."""
    weights = scaled_integers([c.weight for c in plan.classes])
    docs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": c.name, "annotations": {
             "paretosearch.io/max-size-gpu-seconds": size_bound(c.max_size_gpu_s),
             "paretosearch.io/share": f"{c.weight:.6g}"}},
         "spec": {"weight": w, "reclaimable": plan.reclaim,
                  "capability": {GPU: plan.total_gpus}}}
        for c, w in zip(plan.classes, weights, strict=True)]
    for t in plan.tiers:
        docs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": t.name}, "value": t.priority,
                     "preemptionPolicy": "PreemptLowerPriority" if plan.preempts(t) else "Never",
                     "description": f"paretosearch tier {t.name}, lease {t.lease_s:g} s"})
    notes = ["queue weights act through Volcano's proportion plugin (enable it in the "
             "scheduler configuration)",
             "capability is the whole cluster: a queue may use every idle GPU"]
    lost = [*plan.unexpressed, *weight_losses(plan, "Volcano")]
    if plan.tiers:
        lost.append("leases: Volcano queues have no time limit; set the pods' "
                    "activeDeadlineSeconds to their tier's lease")
    return Export("volcano", {"volcano.yaml": _yaml(plan, "Volcano", notes, lost, docs)},
                  tuple(lost))
