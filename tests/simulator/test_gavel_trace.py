"""Gavel's ``.trace`` files: exact run times from its measurements, rejections, and jobs that
cannot run on a GPU type (Gavel measured 0 steps/s there)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policies import RoundPolicy, get_policy
from simulator import InvalidWorkload, Workload, load_profile, read_trace, simulate
from simulator.inputs.profile import ClusterProfile, NodeGroup
from simulator.inputs.scaling import TypeSpeeds
from simulator.inputs.throughput import ThroughputTable, model_name
from simulator.inputs.traces import read_gavel_trace
from simulator.rounds import Cluster, InvalidPlan, RoundState, job_rates
from tests.helpers.data import SHARED

GAVEL = SHARED / "data" / "gavel" / "simulation_throughputs.json"
RAW = json.loads(GAVEL.read_text())  # the oracle: Gavel's numbers, read without our loader
TYPES = ("k80", "p100", "v100")
RN50 = "ResNet-50 (batch size 128)"  # 0 steps/s on K80 at 2, 4 and 8 GPUs


def measured(job: str, scale: int, gpu: str) -> float:
    """Gavel's isolated steps/s of ``scale``-GPU ``job`` on ``gpu``."""
    return float(RAW[gpu][str((job, scale))]["null"])


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return ThroughputTable.from_gavel_json(GAVEL)


def line(job: str = "ResNet-18 (batch size 64)", steps: object = 1000, scale: object = 1,
         arrival: object = 0, *, weight: object = 1, slo: object = -1, data: object = 1,
         columns: int = 10) -> str:
    """A trace line as Gavel writes it (8 columns: without priority weight and SLO)."""
    head = [job, "python3 main.py --batch_size 64", "image_classification/cifar10",
            "--num_steps", str(data), str(steps), str(scale)]
    tail = [str(weight), f"{slo}", str(arrival)] if columns == 10 else [str(arrival)]
    return "\t".join(head + tail)


def write(tmp_path: Path, lines: list[str], name: str = "jobs.trace") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def one_node_per_type(gpus: int = 8) -> ClusterProfile:
    return ClusterProfile(
        name="one-node-per-type", description="", provenance="test",
        node_groups=tuple(NodeGroup(1, gpus, t, 16.0) for t in TYPES),
        relative_speed=dict.fromkeys(TYPES, 1.0), inter_node_factor=1.0,
        restart_overhead_s=0.0, suspend_overhead_s=0.0)


def test_every_entry_runs_steps_over_its_measured_throughput(
        tmp_path: Path, table: ThroughputTable) -> None:
    """For every (job type, scale) Gavel measured and every GPU type: the simulator's rate
    (``simulator.rounds.job_rates``) of the whole gang on that type takes exactly
    ``total_steps / throughput`` seconds; 0 steps/s is speed 0."""
    entries = list(table.entries)
    steps = 1000 + 7 * np.arange(len(entries))
    path = write(tmp_path, [line(j, n, s) for (j, s), n in zip(entries, steps, strict=True)])
    wl = read_gavel_trace(path, table)
    assert wl.type_speed is not None
    cluster = Cluster.from_profile(one_node_per_type())
    speeds = wl.type_speed.columns(cluster.types, "test")
    zeros = 0
    for i, (job, scale) in enumerate(entries):
        assert wl.scaling.models[wl.model[i]] == model_name(job, scale)
        assert wl.gpus[i] == wl.min_gpus[i] == scale
        for k, gpu in enumerate(cluster.types):
            alloc = np.zeros((1, cluster.nodes), dtype=np.int64)
            alloc[0, k] = scale
            rate = job_rates(alloc, wl.model[i:i + 1], cluster, speeds, wl.scaling)[0]
            expected = measured(job, scale, gpu)
            if expected == 0:
                assert rate == 0 and speeds[wl.model[i], k] == 0
                zeros += 1
            else:
                assert wl.service_s[i] / rate == pytest.approx(steps[i] / expected, rel=1e-12)
    assert zeros == 3  # ResNet-50 (batch size 128) on K80 at 2, 4 and 8 GPUs


def test_models_ids_order_and_interference(tmp_path: Path, table: ThroughputTable) -> None:
    rows = [line("A3C", 500, 1, 0), line(RN50, 800, 4, 10), line("A3C", 900, 1, 10),
            line(RN50, 100, 1, 10.5)]
    wl = read_gavel_trace(write(tmp_path, rows), table)
    assert wl.job_id.tolist() == [0, 1, 2, 3]  # Gavel's job ids, the file's order
    assert wl.arrival_s.tolist() == [0.0, 10.0, 10.0, 10.5]
    assert [wl.scaling.models[m] for m in wl.model] == ["A3C", f"{RN50} (4 GPUs)", "A3C", RN50]
    # a model's speed-up curve is its job type's, measured on V100
    m4 = wl.scaling.index(f"{RN50} (4 GPUs)")
    assert wl.scaling.speedup[m4, 4] == pytest.approx(
        measured(RN50, 4, "v100") / measured(RN50, 1, "v100"))
    assert wl.service_s[1] == pytest.approx(800 / measured(RN50, 1, "v100"))
    assert wl.interference is not None
    assert wl.interference.slowdown.shape == (3, 3, 3)


def test_eight_and_ten_column_lines_read_alike(tmp_path: Path, table: ThroughputTable) -> None:
    jobs = [("LM (batch size 20)", 4000, 2, 0.0), (RN50, 1200, 8, 30.5), ("CycleGAN", 10, 1, 31)]
    ten = read_gavel_trace(write(tmp_path, [line(*j) for j in jobs], "ten.trace"), table)
    eight = read_gavel_trace(
        write(tmp_path, [line(*j, columns=8) for j in jobs], "eight.trace"), table)
    mixed = read_gavel_trace(write(tmp_path, [line(*jobs[0]), line(*jobs[1], columns=8),
                                              line(*jobs[2])], "mixed.trace"), table)
    for wl in (eight, mixed):
        assert wl.to_frame().equals(ten.to_frame())
        assert wl.digest() == ten.digest()


def test_simulate_replays_gavel_run_times(tmp_path: Path, table: ThroughputTable) -> None:
    """Jobs far apart, each alone on gavel-hetero-60: under FIFO (the fluid engine, reference
    type) a job takes ``steps / throughput on V100``; under Gavel ``steps / throughput`` on the
    one type it ran on, one where it can run."""
    jobs = [("ResNet-18 (batch size 64)", 5000, 1), ("Recommendation (batch size 2048)", 3000, 1),
            (RN50, 2000, 2), ("Transformer (batch size 32)", 4000, 4)]
    path = write(tmp_path, [line(j, n, s, 50_000 * i) for i, (j, n, s) in enumerate(jobs)])
    wl = read_gavel_trace(path, table)
    profile = load_profile("gavel-hetero-60")
    fifo = simulate(wl, profile, get_policy("fifo")())
    assert fifo.jct_s == pytest.approx([n / measured(j, s, "v100") for j, n, s in jobs],
                                       rel=1e-9)
    gavel = simulate(wl, profile, get_policy("gavel")().fit(wl))
    for jct, (j, n, s) in zip(gavel.jct_s, jobs, strict=True):
        times = [n / measured(j, s, t) for t in TYPES if measured(j, s, t) > 0]
        assert min(abs(jct / t - 1) for t in times) < 1e-9, (j, jct, times)
    assert measured(RN50, 2, "k80") == 0  # so it ran on V100 or P100


@dataclass
class Spy:
    """Runs a round policy's decisions in Python, recording the GPU types each job gets."""

    inner: Any
    seen: set[tuple[int, str]] = field(default_factory=set)

    @property
    def round_s(self) -> float:
        return float(self.inner.round_s)

    @property
    def reacts(self) -> bool:
        return bool(self.inner.reacts)

    @property
    def shares_gpus(self) -> bool:
        return bool(self.inner.shares_gpus)

    @property
    def short_rounds(self) -> bool:
        return bool(getattr(self.inner, "short_rounds", False))

    def plan(self, state: RoundState) -> Any:
        out = self.inner.plan(state)
        c = state.cluster
        types = c.node_type[c.device_node] if self.shares_gpus else c.node_type
        for i, r in enumerate(state.rows):
            self.seen |= {(int(r), c.types[t]) for t in types[np.asarray(out[i]) > 0]}
        return out


def _contended(tmp_path: Path, table: ThroughputTable) -> Workload:
    """More 4-GPU gangs than the V100s and P100s hold, arriving with 2- and 4-GPU ResNet-50
    (batch size 128) jobs that cannot run on the idle K80s; each job ~15 min on a V100."""
    kinds = ["ResNet-18 (batch size 64)", "Transformer (batch size 64)", "LM (batch size 20)",
             "ResNet-50 (batch size 64)"]
    jobs = [(kinds[i % 4], 4) for i in range(12)] + [(RN50, 4), (RN50, 2), (RN50, 4), (RN50, 2)]
    rows = [line(j, int(measured(j, s, "v100") * 900), s, 60 * (i // 4))
            for i, (j, s) in enumerate(jobs)]
    return read_gavel_trace(write(tmp_path, rows), table)


@pytest.mark.parametrize("name", ["gavel", "hadar", "wfq-hetero", "unified"])
def test_heterogeneity_aware_policies_never_use_a_type_a_job_cannot_run_on(
        tmp_path: Path, table: ThroughputTable, name: str) -> None:
    """Every job finishes on the compiled loop, whose plan check would reject a job on a type
    where its speed is 0 (next test); where the policy also decides in Python (its ``plan``),
    a spy records the types each job got."""
    wl = _contended(tmp_path, table)
    profile = load_profile("gavel-hetero-60")
    policy = get_policy(name)().fit(wl)
    assert isinstance(policy, RoundPolicy)
    run = simulate(wl, profile, policy)
    assert np.isfinite(run.finish_s).all()
    if name == "gavel":
        return  # its kernel reads engine state (arrivals to come) that ``plan`` lacks
    spy = Spy(policy)
    watched = simulate(wl, profile, spy)
    cannot = {i for i in range(len(wl)) if wl.scaling.models[wl.model[i]].startswith(
        f"{RN50} (")}
    assert len(cannot) == 4
    assert not {(r, t) for r, t in spy.seen if r in cannot and t == "k80"}
    assert {t for _, t in spy.seen} == set(TYPES)  # the K80s did get used, by the others
    assert watched.jct_s == pytest.approx(run.jct_s)


def test_the_engine_rejects_a_plan_on_a_type_the_job_cannot_run_on(
        tmp_path: Path, table: ThroughputTable) -> None:
    wl = read_gavel_trace(write(tmp_path, [line(RN50, 100, 2)]), table)
    k80_first = ClusterProfile(
        name="k80-first", description="", provenance="test",
        node_groups=(NodeGroup(1, 4, "k80", 12.0), NodeGroup(1, 4, "v100", 16.0)),
        relative_speed={"k80": 0.2, "v100": 1.0}, inter_node_factor=1.0,
        restart_overhead_s=0.0, suspend_overhead_s=0.0)
    message = f"placed on GPU type 'k80', where its model '{RN50} (2 GPUs)' cannot run"
    # YARN-CS ignores GPU types and takes the first node that fits (compiled plan check)
    with pytest.raises(InvalidPlan, match=re.escape(message)):
        simulate(wl, k80_first, get_policy("yarn-cs")())

    @dataclass(frozen=True)
    class OnK80:  # a Python policy (checked_plan)
        round_s: float = 60.0
        reacts: bool = False

        def plan(self, state: RoundState) -> Any:
            return np.array([[2, 0]] * len(state))

    with pytest.raises(InvalidPlan, match=r"cannot run \(speed 0\)"):
        simulate(wl, k80_first, OnK80())
    only_k80 = ClusterProfile(
        name="k80", description="", provenance="test",
        node_groups=(NodeGroup(1, 4, "k80", 12.0),), relative_speed={"k80": 0.2},
        inter_node_factor=1.0, restart_overhead_s=0.0, suspend_overhead_s=0.0)
    with pytest.raises(InvalidWorkload, match=r"row 1, column 'model'.*cannot run on any GPU "
                                              r"type of the cluster \(k80\)"):
        simulate(wl, only_k80, get_policy("gavel")())


def test_type_speeds_allow_zero_but_not_a_model_that_runs_nowhere() -> None:
    TypeSpeeds(("a", "b"), np.array([[0.0, 1.0], [0.5, 0.0]]))
    with pytest.raises(InvalidWorkload, match="model row 1 has speed 0 on every type"):
        TypeSpeeds(("a", "b"), np.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(InvalidWorkload, match="finite and >= 0"):
        TypeSpeeds(("a", "b"), np.array([[-1.0, 1.0]]))


@pytest.mark.parametrize(("lines", "where", "problem"), [
    ([line(), line() + "\textra"], "row 2", "expected 10 tab-separated columns"),
    ([line(steps=12.5)], "row 1, column 'total_steps'", "must be an integer >= 1 (got '12.5')"),
    ([line(steps=0)], "row 1, column 'total_steps'", "must be an integer >= 1 (got '0')"),
    ([line(scale="two")], "row 1, column 'scale_factor'", "must be a number (got 'two')"),
    ([line(), line(scale=0)], "row 2, column 'scale_factor'", "must be an integer >= 1"),
    ([line("A3C", scale=2)], "row 1, column 'scale_factor'",
     "no entry for 'A3C' on this many GPUs (got '2'); it has scale factors [1]"),
    ([line(RN50, scale=3)], "row 1, column 'scale_factor'", "it has scale factors [1, 2, 4, 8]"),
    ([line("ResNet-18 (batch size 65)")], "row 1, column 'job_type'",
     "job type not in the throughput table (got 'ResNet-18 (batch size 65)'); closest: "),
    ([line(arrival=-5)], "row 1, column 'arrival_time'",
     "must be a finite number >= 0 and at most 1e+12 s (got -5"),
    ([line(arrival=20), line(arrival=10)], "row 2, column 'arrival_time'",
     "arrivals must not decrease"),
    ([line(arrival="soon")], "row 1, column 'arrival_time'", "must be a number (got 'soon')"),
    ([line(weight="high")], "row 1, column 'priority_weight'", "must be a number"),
    ([line(slo="none")], "row 1, column 'SLO'", "must be a number (got 'none')"),
    ([line(data=2)], "row 1, column 'needs_data_dir'", "must be an integer in [0, 1]"),
])
def test_rejections_name_file_row_column_and_value(
        tmp_path: Path, table: ThroughputTable, lines: list[str], where: str,
        problem: str) -> None:
    path = write(tmp_path, lines)
    with pytest.raises(InvalidWorkload) as err:
        read_gavel_trace(path, table)
    assert str(err.value).startswith(f"{path}, {where}")
    assert problem in str(err.value)


def test_read_trace_dispatches_dot_trace(tmp_path: Path, table: ThroughputTable) -> None:
    path = write(tmp_path, [line(), line(RN50, 10, 8, 1)])
    assert read_trace(path, throughputs=table).digest() == read_gavel_trace(path, table).digest()
    with pytest.raises(InvalidWorkload, match=r"pass throughputs= .*--gavel THROUGHPUTS"):
        read_trace(path)
    with pytest.raises(InvalidWorkload, match="has no jobs"):
        read_gavel_trace(write(tmp_path, ["", ""], "empty.trace"), table)


def test_a_trace_keeps_gavels_measured_rates_to_the_last_bit(tmp_path: Path,
                                                             table: ThroughputTable) -> None:
    # the rounds count steps with these (a speed-up x speed x steps/s product can be an ulp
    # off, which moves round ends); a cluster's columns are found by their speeds
    entries = [("LM (batch size 80)", 2), (RN50, 4), ("ResNet-18 (batch size 64)", 1)]
    wl = read_gavel_trace(write(tmp_path, [line(j, 100, s) for j, s in entries]), table)
    speeds = wl.type_speed
    assert speeds is not None and speeds.gang_steps_per_s is not None
    for row, (job, scale) in enumerate(entries):
        got = speeds.gang_steps_per_s[wl.model[row]]
        assert got.tolist() == [measured(job, scale, t) for t in speeds.types]
    order = ("v100", "k80", "p100")
    cols = speeds.gang_columns(speeds.columns(order, "test"))
    assert cols is not None
    assert cols[wl.model[1]].tolist() == [measured(RN50, 4, t) for t in order]
    with pytest.raises(InvalidWorkload, match=r"gang_steps_per_s must be a \(1, 2\) array"):
        TypeSpeeds(("a", "b"), np.ones((1, 2)), gang_steps_per_s=np.ones((2, 2)))
