"""Exporters: schema-valid Kueue and Volcano objects, the plans, JSON and the command line
(Slurm and YARN: ``test_export_hpc.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paretosearch.cli import main
from paretosearch.definition import SearchDefinition
from paretosearch.export import (
    FORMATS,
    ExportError,
    ExportOptions,
    InvalidConfigDocument,
    build_plan,
    export,
)
from paretosearch.export.plan import _semantics
from paretosearch.runs.records import ChosenConfig, FrontEntry
from policies import REGISTRY, WFQ, Unified, WFQHetero
from tests.helpers.exports import (
    DOCS,
    HETERO,
    INF,
    check_against_crd,
    config_doc,
    crd_schema,
    documents,
    pcs_wfq_doc,
    undeclared_fields,
    unified_doc,
    unisched_doc,
)

# --- Kueue ------------------------------------------------------------------------------


def _kueue(doc: dict[str, Any], version: str = "v1beta2") -> list[dict[str, Any]]:
    result = export(doc, "kueue", options=ExportOptions(kueue_version=version, namespace="ml"))
    return documents(result.files["kueue.yaml"])


def _route(local_queues: list[dict[str, Any]], size: float) -> str:
    """The LocalQueue a job of ``size`` GPU-seconds goes to, by the exported annotations."""
    bounds = [(float(q["metadata"]["annotations"]["paretosearch.io/max-size-gpu-seconds"]
                     .replace("unbounded", "inf")), q["metadata"]["name"]) for q in local_queues]
    return str(next(name for bound, name in sorted(bounds) if size <= bound))


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
@pytest.mark.parametrize("name", sorted(DOCS))
def test_kueue_objects_validate_and_hold_together(name: str, version: str,
                                                  pcs_configs: dict[str, Any]) -> None:
    doc = DOCS[name](pcs_configs)
    plan = build_plan(doc)
    objs = _kueue(doc, version)
    for obj in objs:
        assert obj["apiVersion"] == f"kueue.x-k8s.io/{version}"
        check_against_crd(obj)
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
    v1 = next(o for o in _kueue(unified_doc(), "v1beta1") if o["kind"] == "ClusterQueue")
    v2 = next(o for o in _kueue(unified_doc(), "v1beta2") if o["kind"] == "ClusterQueue")
    assert "cohort" in v1["spec"] and "cohortName" in v2["spec"]
    assert undeclared_fields(v1, crd_schema("ClusterQueue", "v1beta2")) == [".spec.cohort"]
    assert undeclared_fields(v2, crd_schema("ClusterQueue", "v1beta1")) == [".spec.cohortName"]


def test_kueue_preemption_follows_the_policy(pcs_configs: dict[str, Any]) -> None:
    def preemption(doc: dict[str, Any]) -> dict[str, str]:
        cq = next(o for o in _kueue(doc) if o["kind"] == "ClusterQueue")
        return dict(cq["spec"]["preemption"])

    # WFQ reclaims shares; best-effort jobs preemptible by SLO jobs; wfq-hetero never preempts
    assert preemption(pcs_wfq_doc(pcs_configs["0e4a51_bal"]))["reclaimWithinCohort"] == "Any"
    assert preemption(unified_doc(preempt=True)) == {"reclaimWithinCohort": "LowerPriority",
                                                  "withinClusterQueue": "LowerPriority"}
    assert preemption(unified_doc(preempt=False)) == {"reclaimWithinCohort": "Never",
                                                   "withinClusterQueue": "Never"}
    hetero = WFQHetero(thresholds=(10.0, INF))
    assert preemption(config_doc(hetero, HETERO)) == {"reclaimWithinCohort": "Never",
                                                "withinClusterQueue": "Never"}


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 6), types=st.lists(st.integers(1, 300), min_size=1, max_size=4),
       exps=st.tuples(*[st.floats(-3, 3)] * 3), data=st.data())
def test_quotas_sum_to_each_type_and_weights_keep_their_order(
        k: int, types: list[int], exps: tuple[float, float, float], data: st.DataObject) -> None:
    cuts = sorted(set(data.draw(st.lists(st.floats(1, 1e7), min_size=k - 1, max_size=k - 1))))
    policy = WFQHetero(W_1=exps[0], W_2=exps[1], W_3=exps[2], thresholds=(*cuts, INF))
    gpus = {f"t{i}": n for i, n in enumerate(types)}
    plan = build_plan(config_doc(policy, gpus))
    objs = _kueue(config_doc(policy, gpus))
    cqs = [o for o in objs if o["kind"] == "ClusterQueue"]
    for t, n in gpus.items():
        assert sum(f["resources"][0]["nominalQuota"] for q in cqs
                   for f in q["spec"]["resourceGroups"][0]["flavors"] if f["name"] == t) == n
    order = np.argsort([c.weight for c in plan.classes], kind="stable")
    ints = [cqs[i]["spec"]["fairSharing"]["weight"] for i in order]
    assert ints == sorted(ints)
    volcano = [o["spec"]["weight"] for o in documents(export(
        config_doc(policy, gpus), "volcano").files["volcano.yaml"]) if o["kind"] == "Queue"]
    assert [volcano[i] for i in order] == sorted(volcano[i] for i in order)
    locals_ = [o for o in objs if o["kind"] == "LocalQueue"]
    assert {_route(locals_, s) for s in (*cuts, 1e18)} == {c.name for c in plan.classes}


# --- Volcano ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DOCS))
def test_volcano_queues_validate(name: str, pcs_configs: dict[str, Any]) -> None:
    doc = DOCS[name](pcs_configs)
    plan = build_plan(doc)
    objs = documents(export(doc, "volcano").files["volcano.yaml"])
    queues = [o for o in objs if o["kind"] == "Queue"]
    for q in queues:
        check_against_crd(q)
        assert q["spec"]["reclaimable"] == plan.reclaim
        assert q["spec"]["capability"]["nvidia.com/gpu"] == plan.total_gpus
    assert [q["metadata"]["name"] for q in queues] == [c.name for c in plan.classes]
    priorities = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PriorityClass"}
    assert {n: p["value"] for n, p in priorities.items()} == {t.name: t.priority
                                                              for t in plan.tiers}
    for t in plan.tiers:
        expected = "PreemptLowerPriority" if plan.preempts(t) else "Never"
        assert priorities[t.name]["preemptionPolicy"] == expected


# --- JSON and the plans -----------------------------------------------------------------


def test_json_round_trips(pcs_configs: dict[str, Any]) -> None:
    doc = pcs_wfq_doc(pcs_configs["6214e9_jct"])
    out = json.loads(export(doc, "json").files["plan.json"])
    assert out["source"] == json.loads(json.dumps(doc).replace("Infinity", "null"))
    again = json.loads(export(out["source"], "json").files["plan.json"])
    assert again == out
    assert out["plan"]["classes"][-1]["max_size_gpu_s"] is None
    assert out["cannot_express"] == out["plan"]["cannot_express"]


@pytest.mark.parametrize("key", ["0e4a51_bal", "b436b2_jct", "6c71a0_pred", "ee9e8c_bal"])
def test_wfq_plan_has_pcs_rates_and_thresholds(key: str, pcs_configs: dict[str, Any]) -> None:
    entry = pcs_configs[key]
    plan = build_plan(pcs_wfq_doc(entry))
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
            result = export(pcs_wfq_doc(entry), fmt)
            assert result.files and all("zeta_min" in t for t in result.files.values())


def test_unisched_plan_has_tiers_leases_and_priorities() -> None:
    plan = build_plan(unisched_doc())
    assert [c.name for c in plan.classes] == ["all"] and plan.classes[0].weight == 1.0
    slo, be = plan.tiers
    assert (slo.name, slo.lease_s, be.name, be.lease_s) == ("slo", 1200.0, "best-effort", 600.0)
    assert (slo.priority, be.priority) == (1000, 10)  # slo_reward 100 : be_reward_scale 1
    assert plan.preempts(slo) == (be,) and plan.preempts(be) == ()
    lost = "\n".join(plan.unexpressed)
    for name in ("profiler_reward", "reward_decay", "profile_s", "opportunistic",
                 "milp_node_limit", "leases become time limits"):
        assert name in lost
    for name in ("be_lease_s", "slo_lease_multiple", "slo_reward", "be_reward_scale"):
        assert f"{name}=" not in lost


def test_unified_weights_per_gpu_type_follow_speed_ranks() -> None:
    doc = unified_doc(preempt=False)
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
    plan = build_plan(config_doc(policy, {"a": 8, "b": 24}))  # profile "custom": speeds unknown
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


def test_every_registered_policy_declares_how_it_is_exported() -> None:
    """A handler of its own or, by decision, one queue (``ONE_QUEUE``): never by default."""
    default = _semantics.dispatch(object)
    assert [name for name, cls in REGISTRY.items() if _semantics.dispatch(cls) is default] == []


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
    doc = {**pcs_wfq_doc(pcs_configs["0e4a51_bal"]), **change}
    with pytest.raises(InvalidConfigDocument) as err:
        build_plan(doc, source="chosen.json")
    assert str(err.value).startswith("chosen.json")
    for word in words:
        assert word in str(err.value)


def test_bad_options_and_formats_are_errors(pcs_configs: dict[str, Any]) -> None:
    with pytest.raises(ExportError, match="unknown export format 'k8s'"):
        export(pcs_wfq_doc(pcs_configs["0e4a51_bal"]), "k8s")
    with pytest.raises(ExportError, match="v1alpha1"):
        ExportOptions(kueue_version="v1alpha1")
    with pytest.raises(ExportError, match="namespace"):
        ExportOptions(namespace="Not_A_Name")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_file_states_what_it_cannot_express(fmt: str) -> None:
    result = export(unified_doc(), fmt)
    assert result.cannot_express
    for text in result.files.values():
        for item in result.cannot_express:
            assert item.replace("--", "- -") in text


# --- the command line -------------------------------------------------------------------


def _front_entry(thresholds: list[float | None], W: float) -> FrontEntry:
    fitted = WFQ.from_params({"W": W, "thresholds": thresholds,
                              "rates": [0.6, 0.3, 0.1]}).to_dict()["params"]
    objectives = {"jct:avg": 500.0 * W, "pred_err:avg": 10.0 / W}
    return FrontEntry({"W": W}, objectives, dict(objectives), None, fitted)


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
    (run / "front.json").write_text(json.dumps({"front": [e.to_dict() for e in front]}))
    chosen = ChosenConfig.of(SearchDefinition.from_dict(spec, "run.json"), front[1],
                             front_index=1, run=str(run))
    (run / "chosen.json").write_text(json.dumps(chosen.to_dict()))
    return run


def test_cli_exports_the_chosen_config(run_dir: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    assert main(["export", str(run_dir), "--format", "kueue", "--namespace", "ml"]) == 0
    out = capsys.readouterr().out
    path = run_dir / "export" / "kueue" / "kueue.yaml"
    assert str(path) in out and "cannot express" in out and "zeta_min" in out
    objs = documents(path.read_text())
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
    assert "class0: size <= 100 (0.0278 GPU-h)," in conf  # front entry 0's first threshold
    chosen = tmp_path / "mine.json"
    chosen.write_text(json.dumps(unisched_doc()))
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
    bad.write_text(json.dumps({**unisched_doc(), "cluster": {"gpus_by_type": {"A100": -2}}}))
    assert main(["export", str(bad), "--format", "yarn"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(bad) in err and "'cluster.gpus_by_type'" in err and "-2" in err
    assert not (tmp_path / "export").exists()
