"""Config documents as chosen.json carries them, and the check of an exported object against
its CRD schema in ../shared/schemas."""

from __future__ import annotations

import functools
import math
from typing import Any

import jsonschema
import yaml

from policies import WFQ, Unified, UniSched
from tests.helpers.data import SHARED

SCHEMAS = SHARED / "schemas"
CRDS = {"ResourceFlavor": "kueue_resourceflavors.yaml", "Cohort": "kueue_cohorts.yaml",
        "ClusterQueue": "kueue_clusterqueues.yaml", "LocalQueue": "kueue_localqueues.yaml",
        "WorkloadPriorityClass": "kueue_workloadpriorityclasses.yaml",
        "Queue": "volcano_queues.yaml"}
HETERO = {"k80": 20, "v100": 20, "p100": 20}  # gavel-hetero-60, listed slowest first
INF = math.inf


def config_doc(policy: Any, gpus: dict[str, int], profile: str = "custom", **extra: Any
         ) -> dict[str, Any]:
    """A config document as chosen.json carries it."""
    return {"policy": policy.name, "params": {}, "fitted": policy.to_dict()["params"],
            "objectives": {"jct:avg": 1000.0}, "cluster": {"profile": profile,
                                                           "gpus_by_type": gpus}, **extra}


def pcs_wfq_doc(entry: dict[str, Any]) -> dict[str, Any]:
    return config_doc(WFQ.from_pcs_config(entry), {"generic": 64}, "pcs-64")


def unified_doc(preempt: bool = True) -> dict[str, Any]:
    policy = Unified(W_1=1.0, W_2=0.0, W_3=-1.0, preempt=preempt, be_lease_s=300.0,
                     slo_lease_multiple=3, slo_reward=200.0, be_reward_scale=2.0,
                     thresholds=(1e3, 1e5, INF))
    return config_doc(policy, HETERO, "gavel-hetero-60")


def unisched_doc() -> dict[str, Any]:
    return config_doc(UniSched(be_lease_s=600.0, slo_lease_multiple=2), {"A100": 16})


def fifo_doc() -> dict[str, Any]:
    return {"policy": "fifo", "params": {}, "cluster": {"gpus_by_type": {"V100": 8}}}


# --- schemas ---------------------------------------------------------------------------


@functools.cache
def crd_schema(kind: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((SCHEMAS / CRDS[kind]).read_text())
    schema: dict[str, Any] = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"]
                                  if v["name"] == version)
    return schema


def undeclared_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields the schema does not declare (the API server would prune them silently, so
    jsonschema alone would not catch a field of the wrong version, e.g. v1beta1's cohort)."""
    if isinstance(obj, dict) and "properties" in schema:
        out = []
        for key, value in obj.items():
            if key in schema["properties"]:
                out += undeclared_fields(value, schema["properties"][key], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{path}.{key}")
        return out
    if isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        return [x for k, v in obj.items()
                for x in undeclared_fields(v, schema["additionalProperties"], f"{path}.{k}")]
    if isinstance(obj, list) and "items" in schema:
        return [x for i, v in enumerate(obj) for x in undeclared_fields(v, schema["items"],
                                                                   f"{path}[{i}]")]
    return []


def check_against_crd(doc: dict[str, Any]) -> None:
    version = doc["apiVersion"].split("/")[1]
    schema = crd_schema(doc["kind"], version)
    jsonschema.validate(doc, schema)
    assert not undeclared_fields(doc, schema), (doc["kind"], undeclared_fields(doc, schema))


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


DOCS = {"wfq": lambda pcs: pcs_wfq_doc(pcs["0e4a51_bal"]), "unified": lambda pcs: unified_doc(),
        "unisched": lambda pcs: unisched_doc(), "fifo": lambda pcs: fifo_doc()}
