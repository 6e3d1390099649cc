"""Horus and its baselines (policies/horus/policy.py, horus_baselines.py) on the real round engine.

Oracles: eq. 7-10 costs and the queue shares of §4.2.2 worked by hand; YARN-CS (FIFO onto
exclusive GPUs with head-of-line blocking is what YARN-CS does); the engine's own slowdown
model for batch makespans; memory and over-commitment bounds as properties of every decision.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import OBP, PAB, FifoExclusive, Horus, RoundPolicy, make_policy
from policies.colocating import device_load
from policies.horus.policy import (
    cluster_queues,
    fair_buffer,
    horus_costs,
    queue_counts,
    queue_weights,
)
from simulator import InvalidWorkload, generate, load_profile, simulate
from simulator.inputs.colocation import Interference
from simulator.inputs.generate import add_sharing
from simulator.inputs.profile import ClusterProfile, NodeGroup
from simulator.inputs.slo import BEST_EFFORT
from simulator.inputs.workload import Workload
from simulator.result import SimulationResult
from simulator.rounds import Cluster, RoundState
from simulator.rounds.arrays import cluster_arrays
from simulator.rounds.python_path import decision_state, job_arrays_from
from simulator.rounds.sharing import SharingModel

RTX = load_profile("horus-128x8").slowdown_curves["rtx2080"]


def toy(nodes: int, gpus: int, *, restart_s: float = 0.0) -> ClusterProfile:
    """``nodes`` x ``gpus`` RTX 2080 (8 GiB) with Horus's fit, like Horus's testbed."""
    return ClusterProfile("toy", "test cluster", "Horus §5.1 testbed GPU",
                          (NodeGroup(nodes, gpus, "rtx2080", 8.0),), {"rtx2080": 1.0}, 1.0,
                          restart_s, 0.0, {"rtx2080": RTX})


def jobs(util: list[float], mem: list[float], *, gpus: list[int] | None = None,
         arrival: list[float] | None = None, service: float | list[float] = 1000.0,
         model: list[str] | None = None) -> Workload:
    n = len(util)
    frame = pd.DataFrame({"arrival_s": arrival or [0.0] * n, "gpus": gpus or [1] * n,
                          "service_s": service, "gpu_util": util, "gpu_mem_gib": mem,
                          "mem_surge_gib": 0.0, "mem_surge_p": 0.0})
    if model is not None:
        frame["model"] = model
    return Workload.from_frame(frame)


def decision(profile: ClusterProfile, wl: Workload, placed: dict[int, list[int]] | None = None,
             now: float = 0.0) -> RoundState:
    """The state a policy sees with every job of ``wl`` active, ``placed`` on those devices."""
    cluster, n = Cluster.from_profile(profile), len(wl)
    on = np.zeros((n, int(cluster.node_gpus.sum())), dtype=bool)
    for row, devices in (placed or {}).items():
        on[row, devices] = True
    sharing = None if wl.sharing is None else SharingModel(
        jobs=wl.sharing, model=wl.model, device_node=cluster.device_node,
        device_type=cluster.node_type[cluster.device_node],
        device_mem_gib=cluster.node_mem_gib[cluster.device_node],
        matrix=(wl.interference.columns(cluster.types, "test") if wl.interference else None),
        curves=tuple(profile.slowdown_curves.get(t) for t in cluster.types),
        collision_slowdown=profile.collision_slowdown)
    return RoundState(
        now=now, cluster=cluster, rows=np.arange(n), arrival_s=wl.arrival_s, demand=wl.gpus,
        min_gpus=wl.min_gpus, est_size=wl.service_s, est_remaining=wl.service_s,
        attained=np.zeros(n), alloc=cluster.on_nodes(on), model=wl.model,
        job_class=np.full(n, BEST_EFFORT), deadlines_s=np.zeros((n, 0)),
        rewards=np.zeros((n, 0)), scaling=wl.scaling,
        speeds=np.ones((len(wl.scaling.models), len(cluster.types))), memo={}, placed=on,
        sharing=sharing)


class Spy:
    """Runs a policy on the engine, checking and recording every plan it returns."""

    shares_gpus = True

    def __init__(self, policy: RoundPolicy,
                 check: Callable[[RoundState, np.ndarray], None] | None = None) -> None:
        self.policy, self.check = policy, check
        self.plans: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []

    @property
    def round_s(self) -> float:
        return self.policy.round_s

    @property
    def reacts(self) -> bool:
        return self.policy.reacts

    def plan(self, state: RoundState) -> Any:
        out = np.asarray(self.policy.plan(state))
        if self.check is not None:
            self.check(state, out)
        self.plans.append((state.now, state.rows.copy(), state.placed.copy(), out.copy()))
        return out


def makespan(r: SimulationResult) -> float:
    return float(np.max(r.finish_s) - np.min(r.workload.arrival_s))


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), limit=st.sampled_from([1.0, 1.25, 1.5]))
def test_every_decision_fits_memory_and_the_overcommit_limit(seed: int, limit: float) -> None:
    wl = add_sharing(generate(14, seed=seed, gpus=8, load=3.0, median_service_s=900.0,
                              sigma=0.5), device_memory_gib=8.0, seed=seed)
    sharing_policies: list[RoundPolicy] = [Horus(overcommit_limit=limit, buffer=4), OBP(),
                                           PAB(), FifoExclusive()]
    for policy in sharing_policies:
        def check(state: RoundState, plan: np.ndarray, policy: RoundPolicy = policy) -> None:
            sh = state.sharing
            assert sh is not None
            on = plan.astype(bool)
            assert (sh.memory_excess(state.rows, on) <= 1e-9).all()
            held = on.any(axis=1)
            assert (plan.sum(axis=1)[held] == state.demand[held]).all()  # whole gangs
            if isinstance(policy, Horus):
                assert (sh.jobs.gpu_util[state.rows] @ on <= limit + 1e-9).all()
            if isinstance(policy, FifoExclusive):
                assert (plan.sum(axis=0) <= 1).all()
            if not isinstance(policy, PAB):  # the others never move a placed job
                was = state.placed.any(axis=1)
                assert (on[was] == state.placed[was]).all()

        spy = Spy(policy, check)
        r = simulate(wl, toy(2, 4), spy)
        assert np.isfinite(r.finish_s).all() and len(spy.plans) >= len(wl)


def test_top_lambda_takes_the_cheapest_devices() -> None:
    """2 nodes x 2 GPUs of 8 GiB. Device 0 holds (util 0.1, 3 GiB), 1 (0.8, 1 GiB), 2 (0.9,
    1 GiB), 3 nothing; a 2-GPU job (0.4, 2 GiB) arrives. Eq. 8 memory costs (used + 2) / 8 =
    5/8, 3/8, 3/8, 2/8; eq. 10 utilizations 0.5, 1.2, 1.3, 0.4. Half and half, devices 3 and
    0 are cheapest; memory alone (and OBP, least memory used) picks 3 and 1."""
    wl = jobs([0.1, 0.8, 0.9, 0.4], [3.0, 1.0, 1.0, 2.0], gpus=[1, 1, 1, 2])
    state = decision(toy(2, 2), wl, {0: [0], 1: [1], 2: [2]})
    assert state.sharing is not None
    f = RTX(np.array([0.5, 1.2, 1.3, 0.4]))
    want = 0.5 * np.array([5.0, 3.0, 3.0, 2.0]) / 8.0 + 0.5 * f
    C = cluster_arrays(state.cluster, state.speeds, state.scaling, state.sharing)
    J = job_arrays_from(state, True)
    E = decision_state(J, state.rows, C, True)
    load = device_load(C, J, E, np.zeros(0, dtype=np.int64), 0, 0)
    np.testing.assert_allclose(horus_costs(C, J, E, load, 3, 0.5, 0.5), want)
    assert want.argsort()[:2].tolist() == [3, 0]  # the hand numbers: 0.158, 0.353, 0.526, 0.671

    def taken(policy: RoundPolicy) -> list[int]:
        state.memo.clear()  # each policy decides afresh (a kernel keeps its memory there)
        plan = np.asarray(policy.plan(state))
        assert (plan[:3] == state.placed[:3]).all()
        return sorted(np.flatnonzero(plan[3]).tolist())

    assert taken(Horus(overcommit_limit=1.5)) == [0, 3]
    assert taken(Horus()) == [0, 3]  # limit 1.0: devices 1 and 2 fail the check anyway
    assert taken(Horus(w_mem=1.0, w_util=0.0)) == [0, 3]  # ... even when memory alone counts
    assert taken(Horus(w_mem=1.0, w_util=0.0, overcommit_limit=1.5)) == [1, 3]  # 3/8 ties 3/8
    assert taken(OBP()) == [1, 3]
    assert taken(FifoExclusive()) == []  # one idle device for two workers


def test_queue_weights_and_counts_follow_section_4_2_2() -> None:
    """Queues of 20, 10 and 8 jobs with median waits 30, 0 and 73.75 s weigh max(len, median x
    len) = 600, 10, 590; beta = 15 gives 15 x (600, 10, 590) / 1200 = 7.5, 0.125, 7.375 ->
    8, 0, 7."""
    lengths = np.array([20, 10, 8])
    weights = queue_weights(lengths, np.array([30.0, 0.0, 73.75]))
    assert weights.tolist() == [600.0, 10.0, 590.0]
    assert queue_counts(weights, lengths, 15).tolist() == [8, 0, 7]
    # half up overshoots (1.5 + 1.5 -> 4 > 3): the queue rounded up most gives one back
    assert queue_counts(np.array([1.0, 1.0]), np.array([5, 5]), 3).tolist() == [1, 2]
    # one slot, three equal queues: rounds to nothing, but one job is taken
    assert queue_counts(np.ones(3), np.array([4, 4, 4]), 1).tolist() == [1, 0, 0]
    # a queue shorter than its share: its spare slots go to the heaviest queue left
    assert queue_counts(np.array([10.0, 30.0]), np.array([9, 1]), 4).tolist() == [3, 1]


def test_fair_buffer_takes_each_queues_share_oldest_first() -> None:
    """Three kinds of jobs, interleaved in arrival order, cluster into three queues; with the
    waits of the example above the buffer holds the 8 oldest of the first and the 7 oldest of
    the third."""
    kinds = np.array([0, 0, 1, 2] * 8 + [0] * 4 + [1] * 2)
    assert np.bincount(kinds).tolist() == [20, 10, 8]
    centre = np.array([[1, 0.1, 1, 1.0], [4, 0.9, 1, 6.0], [2, 0.5, 1, 3.0]])
    jitter = np.random.default_rng(0).uniform(-0.02, 0.02, (kinds.size, 4)) * [0, 1, 0, 1]
    labels = cluster_queues(centre[kinds] + jitter, 3)
    assert len({(k, q) for k, q in zip(kinds, labels, strict=True)}) == 3  # one queue per kind
    assert np.unique(labels).size == 3
    wait = np.array([30.0, 0.0, 73.75])[kinds]
    chosen = fair_buffer(labels, wait, 15)
    assert chosen.tolist() == sorted(chosen.tolist())
    assert np.bincount(kinds[chosen], minlength=3).tolist() == [8, 0, 7]
    for kind, count in ((0, 8), (2, 7)):
        oldest = np.flatnonzero(kinds == kind)[:count]
        assert chosen[kinds[chosen] == kind].tolist() == oldest.tolist()


def _scipy_queues(features: np.ndarray, k: int) -> np.ndarray:
    """The oracle: Horus's queues with SciPy's own ``kmeans2`` (k-means++ from default_rng(0),
    20 rounds), empty clusters dropped and the rest renumbered in label order."""
    from scipy.cluster.vq import kmeans2

    scale = features.std(axis=0)
    z = (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    k = min(k, int(np.unique(z, axis=0).shape[0]))
    if k <= 1:
        return np.zeros(features.shape[0], dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an emptied cluster
        labels = kmeans2(z, k, iter=20, minit="++", seed=np.random.default_rng(0))[1]
    out: np.ndarray = np.unique(labels, return_inverse=True)[1]
    return out


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 70), k=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       tied=st.booleans())
def test_compiled_clustering_is_scipys_kmeans2(n: int, k: int, seed: int, tied: bool) -> None:
    """The kernel's k-means reproduces SciPy's draw for draw, duplicate rows included."""
    rng = np.random.default_rng(seed)
    features = rng.lognormal(0.0, 1.0, (n, 4))
    if tied:  # few distinct jobs, as when a batch holds copies of one model
        features = features[rng.integers(0, max(1, n // 4), n)]
    np.testing.assert_array_equal(cluster_queues(features, k), _scipy_queues(features, k))


def test_one_queue_takes_jobs_in_arrival_order() -> None:
    """Eight pending jobs, room for all, buffer 3: one queue starts the three oldest; three
    queues (five light jobs, three heavy) give the heavy queue one of the slots."""
    wl = jobs([0.1] * 5 + [0.9] * 3, [1.0] * 5 + [6.0] * 3, gpus=[1] * 5 + [2] * 3)
    state = decision(toy(4, 4), wl)
    started = np.flatnonzero(np.asarray(Horus(k_queues=1, buffer=3).plan(state)).any(axis=1))
    assert started.tolist() == [0, 1, 2]
    started = np.flatnonzero(np.asarray(Horus(k_queues=3, buffer=3).plan(state)).any(axis=1))
    assert started.tolist() == [0, 1, 5]  # 3 x 5/8 -> 2 light, 3 x 3/8 -> 1 heavy


def test_fifo_exclusive_is_yarn_cs_job_for_job() -> None:
    """YARN-CS is non-preemptive FIFO with head-of-line blocking onto free GPUs, gangs placed
    as YARN places them: FIFO on exclusive GPUs is the same schedule, device by device. Checked
    on 1-GPU jobs and on a Philly mix of gang sizes, with and without sharing columns."""
    mixed = generate(40, seed=3, gpus=8, load=1.5, median_service_s=1800.0, sigma=1.0)
    single = replace(mixed, gpus=np.ones(len(mixed), dtype=np.int64))
    for wl in (add_sharing(single, device_memory_gib=8.0, seed=3),
               add_sharing(mixed, device_memory_gib=8.0, seed=3), mixed):
        def exclusive(state: RoundState, plan: np.ndarray) -> None:
            assert (plan.sum(axis=0) <= 1).all()

        fifo = simulate(wl, toy(2, 4), Spy(FifoExclusive(), exclusive))
        yarn = simulate(wl, toy(2, 4), make_policy("yarn-cs"))
        np.testing.assert_allclose(fifo.start_s, yarn.start_s)
        np.testing.assert_allclose(fifo.finish_s, yarn.finish_s)
        assert fifo.slowdown.max() == 0.0
        assert (fifo.start_s > wl.arrival_s).any()  # jobs did queue: the check has teeth


def test_obp_co_locates_light_jobs_and_beats_fifo() -> None:
    """Twelve light jobs (20 % utilization, 1.5 GiB, 1200 s) at once on 4 GPUs: FIFO runs three
    waves (3600 s); OBP packs three per GPU (4.5 GiB), each slowed by f(0.6): 1200 (1 + f)."""
    wl = jobs([0.2] * 12, [1.5] * 12, service=1200.0)
    fifo = simulate(wl, toy(1, 4), FifoExclusive())
    obp = simulate(wl, toy(1, 4), OBP())
    assert makespan(fifo) == pytest.approx(3600.0)
    assert makespan(obp) == pytest.approx(1200.0 * (1.0 + float(RTX(np.array([0.6]))[0])))
    assert obp.slowdown.min() > 0.0 and makespan(obp) < makespan(fifo)


def test_pab_evicts_a_job_slowed_past_the_bound() -> None:
    """Three heavy jobs (80 %) on two GPUs: OBP puts the third beside the first (equal memory,
    lower device), where f(1.6) = 1.98 > 1. After the 60 s warm-up PAB evicts it (the last
    placed) and re-queues it; OBP leaves it there; a bound above 1.98 evicts nothing."""
    wl = jobs([0.8] * 3, [2.0] * 3, service=600.0)
    profile = toy(1, 2, restart_s=30.0)
    assert float(RTX(np.array([1.6]))[0]) > 1.0
    spy = Spy(PAB())
    pab = simulate(wl, profile, spy)
    at_60 = next(p for p in spy.plans if p[0] == 60.0)
    assert at_60[2][2].any() and not at_60[3][2].any()  # job 2 held devices, then none
    assert (at_60[3][:2] == at_60[2][:2]).all()  # jobs 0 and 1 stay
    assert pab.preemptions[2] >= 1 and pab.preemptions[:2].tolist() == [0, 0]
    obp = simulate(wl, profile, OBP())
    assert obp.preemptions.sum() == 0
    assert pab.slowdown[0] < obp.slowdown[0]  # job 0 ran alone part of the time
    lenient = simulate(wl, profile, PAB(max_slowdown=2.5))
    np.testing.assert_allclose(lenient.finish_s, obp.finish_s)


def test_horus_beats_fifo_on_a_light_heavy_batch() -> None:
    """Horus §6.1's shape: a batch of light (<60 %) and heavy jobs on a small cluster; FIFO
    queues behind exclusive GPUs, Horus co-locates within its cost and bound."""
    rng = np.random.default_rng(0)
    n = 40
    light = rng.random(n) < 0.5
    wl = jobs(np.where(light, rng.uniform(0.1, 0.4, n), rng.uniform(0.6, 0.95, n)).tolist(),
              rng.uniform(1.0, 3.5, n).tolist(), arrival=np.sort(rng.uniform(0, 600, n)).tolist(),
              service=rng.uniform(180, 3600, n).tolist())
    fifo = simulate(wl, toy(1, 4), FifoExclusive())
    horus = simulate(wl, toy(1, 4), Horus())
    obp = simulate(wl, toy(1, 4), OBP())
    assert makespan(horus) < 0.9 * makespan(fifo)
    assert makespan(horus) < makespan(obp)  # OBP co-locates heavy jobs too
    assert horus.preemptions.sum() == 0


def test_interference_matrix_replaces_the_curve() -> None:
    """Two GPUs, both busy: a linear-scaling job on 0 (10 %), an amdahl one on 1 (60 %). By the
    curve the new linear job goes beside the lighter load (0); with a measured matrix where
    linear pairs slow 2.0 and linear/amdahl 0.1, it goes beside the amdahl job (1)."""
    wl = jobs([0.1, 0.6, 0.3], [2.0, 2.0, 2.0], model=["linear", "amdahl-0.99", "linear"])
    state = decision(toy(1, 2), wl, {0: [0], 1: [1]})
    assert np.flatnonzero(np.asarray(Horus().plan(state))[2]).tolist() == [0]
    m = len(wl.scaling.models)
    pairs = np.full((m, m, 1), 0.1)
    pairs[0, 0, 0] = 2.0
    measured = replace(wl, interference=Interference(("rtx2080",), pairs))
    state = decision(toy(1, 2), measured, {0: [0], 1: [1]})
    assert np.flatnonzero(np.asarray(Horus().plan(state))[2]).tolist() == [1]


def test_obp_and_pab_pack_a_burst_under_measured_pairs() -> None:
    """With measured pairs the placement keeps per-device worker lists, and OBP and PAB append
    every worker they place to them (their room once covered only the workers already
    running, so a burst wrote past it and corrupted memory). Every job finishes, co-located
    jobs slow down by the matrix, and PAB with a bound no pair reaches is OBP."""
    rng = np.random.default_rng(3)
    n = 24
    wl = jobs(rng.uniform(0.1, 0.5, n).tolist(), rng.uniform(0.5, 2.0, n).tolist(),
              gpus=rng.choice([1, 2, 4], n).tolist(), service=rng.uniform(300, 900, n).tolist(),
              model=rng.choice(["linear", "amdahl-0.99"], n).tolist())
    m = len(wl.scaling.models)
    wl = replace(wl, interference=Interference(("rtx2080",), np.full((m, m, 1), 0.25)))
    obp = simulate(wl, toy(2, 4), OBP())
    assert np.isfinite(obp.finish_s).all() and obp.slowdown.max() > 0.0
    lenient = simulate(wl, toy(2, 4), PAB(max_slowdown=10.0))
    np.testing.assert_allclose(lenient.finish_s, obp.finish_s)


@pytest.mark.parametrize("name", ["horus", "obp", "pab"])
def test_without_sharing_columns_the_error_says_what_to_add(name: str) -> None:
    with pytest.raises(InvalidWorkload, match=r"gpu_util, gpu_mem_gib.*add_sharing"):
        simulate(generate(5, seed=0, gpus=8), toy(2, 4), make_policy(name))


@settings(max_examples=4, deadline=None)
@given(wait=st.sampled_from([30.0, 100.0, 250.0]), seed=st.integers(0, 1000))
def test_pab_profiles_one_placement_per_wait(wait: float, seed: int) -> None:
    """Horus §6.1: PAB pays "n jobs multiply by T_wait". With ``profile_s`` every placement
    is at least T_wait after the previous one, so the first starts are spaced by T_wait and the
    makespan is at least (n - 1) T_wait; with none, the batch starts at once."""
    rng = np.random.default_rng(seed)
    wl = jobs(list(rng.uniform(0.1, 0.5, 10)), list(rng.uniform(1.0, 3.0, 10)), service=600.0)
    profiled = simulate(wl, toy(1, 4), PAB(profile_s=wait))
    assert np.diff(np.sort(profiled.start_s)).min() >= wait - 1e-9
    assert makespan(profiled) >= 9 * wait
    assert simulate(wl, toy(1, 4), PAB()).start_s.max() == 0.0


def test_a_longer_profiling_wait_never_shortens_pabs_light_batch() -> None:
    """On a fixed batch of light jobs (nothing evicted) a larger T_wait starts every job no
    sooner, so the makespan never falls; a T_wait of 0 is PAB as it was."""
    rng = np.random.default_rng(3)
    wl = jobs(list(rng.uniform(0.1, 0.3, 16)), list(rng.uniform(1.0, 2.0, 16)),
              service=list(rng.uniform(300.0, 1500.0, 16)))
    spans = [makespan(simulate(wl, toy(1, 4), PAB(profile_s=w))) for w in (0.0, 20.0, 60.0, 120.0)]
    assert spans == sorted(spans) and spans[-1] > spans[0]
    np.testing.assert_array_equal(simulate(wl, toy(1, 4), PAB(profile_s=0.0)).finish_s,
                                  simulate(wl, toy(1, 4), PAB()).finish_s)


def test_obp_oom_fails_only_shared_under_estimated_jobs_once() -> None:
    """Horus §4.2.3: under-estimated jobs fail on OOM when co-located and are resubmitted.
    Three light jobs on two GPUs, all under-estimated: OBP puts jobs 0 and 2 on GPU 0, job 1
    alone on GPU 1. At 60 s jobs 0 and 2 fail (shared), job 1 does not (alone); the failed two
    go onto GPU 1 (not back where they failed), restarted once, and never fail again. Share 0
    is OBP."""
    wl = jobs([0.2] * 3, [1.5] * 3, service=1200.0)
    profile = toy(1, 2, restart_s=30.0)
    obp = simulate(wl, profile, OBP())
    oom = simulate(wl, profile, OBP(oom_share=1.0, oom_after_s=60.0))
    assert obp.finish_s[1] < obp.finish_s[0]  # job 1 ran alone under OBP
    assert oom.finish_s[1] > obp.finish_s[1]  # and is joined by the failed two
    assert oom.preemptions.tolist() == [1, 0, 1] and obp.preemptions.sum() == 0
    assert oom.finish_s[0] > obp.finish_s[0] and oom.finish_s[2] > obp.finish_s[2]
    np.testing.assert_array_equal(simulate(wl, profile, OBP(oom_share=0.0)).finish_s,
                                  obp.finish_s)


@pytest.mark.parametrize("share", [0.1, 0.25, 0.5])
def test_obp_oom_marks_that_share_of_the_rows(share: float) -> None:
    """The under-estimated rows are that share of any workload, to within a few rows."""
    state = decision(toy(1, 4), jobs([0.2] * 400, [1.5] * 400))
    cluster = cluster_arrays(state.cluster, state.speeds, state.scaling, state.sharing)
    memory = OBP(oom_share=share).memory(cluster, job_arrays_from(state, True))
    assert abs(int(memory.i[:, 0].sum()) - share * 400) <= 3
