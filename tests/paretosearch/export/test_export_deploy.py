"""Shaping an export for deployment: merged classes, queue name prefixes, empty quotas, and
the exported queues simulated as deployed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paretosearch.cli import main
from paretosearch.export import ExportError, ExportOptions, build_plan, export
from policies import WFQ
from tests.helpers.exports import check_against_crd, config_doc, documents, pcs_wfq_doc, unified_doc


def test_classes_merge_to_a_cap_under_a_prefix_and_empty_quotas_are_warned(
        pcs_configs: dict[str, Any]) -> None:
    doc = pcs_wfq_doc(pcs_configs["0e4a51_bal"])
    full = build_plan(doc)
    assert len(full.classes) == 3
    capped = full.shaped(2, "team-a-")
    assert [c.name for c in capped.classes] == ["team-a-class0", "team-a-class1"]
    low = 0.0
    for c in capped.classes:  # each covers whole classes of the plan, and their shares
        inside = [k for k in full.classes if low < k.max_size_gpu_s <= c.max_size_gpu_s]
        assert inside and inside[-1].max_size_gpu_s == c.max_size_gpu_s
        assert c.weight == pytest.approx(sum(k.weight for k in inside))
        low = c.max_size_gpu_s
    assert any("merged to fit 2 queues (team-a-class1 holds class1 to class2)" in item
               for item in capped.unexpressed)
    result = export(doc, "kueue", options=ExportOptions(max_classes=2, prefix="team-a-"))
    objs = documents(result.files["kueue.yaml"])
    for obj in objs:
        check_against_crd(obj)
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "ClusterQueue"] == [
        c.name for c in capped.classes]
    assert "GPU-h)" in result.files["kueue.yaml"]  # sizes for people beside the exact bounds
    with pytest.raises(ExportError, match="prefix"):
        ExportOptions(prefix="Team_A")
    # a class whose share rounds to no GPU at all is warned of, in the file and the result
    plain = export(doc, "kueue")
    empty = [o["metadata"]["name"] for o in documents(plain.files["kueue.yaml"])
             if o["kind"] == "ClusterQueue" and not any(
                 f["resources"][0]["nominalQuota"] for f in o["spec"]["resourceGroups"][0][
                     "flavors"])]
    assert empty == ["class2"]  # 0.3 % of 64 GPUs
    assert "WARNING: class2: no nominal quota" in plain.files["kueue.yaml"]
    assert len(plain.warnings) == 1 and "class2" in plain.warnings[0]
    assert not result.warnings  # merged, every queue has GPUs


def test_the_exported_plan_simulates_as_deployed(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    from paretosearch.export.kube import render_kueue
    from paretosearch.export.plan import deployed_config
    from policies import make_policy
    from simulator import generate, load_profile, simulate, summary

    def jct(policy: str, params: dict[str, Any]) -> float:
        wl = generate(400, load=0.9, gpus=64, seed=3)
        pol = make_policy(policy, params).fit(wl)
        return float(summary(simulate(wl, load_profile("pcs-64"), pol))["jct"]["avg"])

    clipped = config_doc(WFQ.explicit([2e3, 2e5, None], [0.5, 0.3, 0.2], zeta_min=0.6),
                   {"generic": 64}, "pcs-64")
    # the queues as the Kueue export writes them: each class's nominal quota, its weight
    plan = build_plan(clipped).shaped(2)
    queues = [o for o in documents(render_kueue(plan, ExportOptions()).files["kueue.yaml"])
              if o["kind"] == "ClusterQueue"]
    merged = deployed_config(plan)
    assert merged is not None and merged["policy"] == "quota"
    assert merged["params"] == {
        "thresholds": [2e3, None], "reclaim": True,
        "quotas": [q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
                   for q in queues],
        "weights": [q["spec"]["fairSharing"]["weight"] for q in queues]}
    assert sum(merged["params"]["quotas"]) == 64
    # whole gangs on quotas, not WFQ's fluid shares: another schedule, shown beside it
    assert jct("quota", merged["params"]) != jct("wfq", clipped["fitted"])
    assert deployed_config(build_plan(unified_doc())) is None  # leases and priorities: not yet
    (tmp_path / "c.json").write_text(json.dumps(clipped))
    capsys.readouterr()
    assert main(["export", str(tmp_path / "c.json"), "--format", "slurm",
                 "--max-classes", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "what deployment costs" in out and "jct:avg" in out and "as exported" in out
    # the caption names the target it describes: Slurm's queues, modelled on Kueue's cohort
    assert "the slurm queues simulated by the 'quota' policy" in out
    assert "as Kueue runs them" not in out
