"""Golden runs of the simulator's policies: a few fixed seeded workloads each.

Recorded from the engines as they stood before they were optimised (``python -m
tests.helpers.golden [POLICY ...]``) into ``tests/golden/<policy>.json``; ``test_golden.py``
replays every case and holds the engines to them: start and finish times, slowdowns and (for
cases that predict) predicted start and finish within 1e-9 relative, preemptions exact, and
the run's totals (busy and utilized GPU-seconds, devices used). A case pins its workload's
digest, so a changed generator is told apart from a changed engine. Re-record only for a
deliberate fix, in the commit that makes it, saying what was wrong and how the figures move.
Every registered policy has golden runs (``test_golden.py`` checks it); ``quota``'s were
recorded later, from the engine whose other policies all still matched theirs.

Fluid-engine cases (the PCS family) run on ``pcs-64`` and, to exercise restart pauses, on
48 GPUs with a 30 s restart; where they predict, estimates are noisy so that playouts differ
from the truth.

Round-engine clusters are the shipped profiles cut down (fewer nodes, same GPU types, speeds,
overheads and slowdown curves) so that about a hundred jobs contend for GPUs; loads are above 1
for the same reason.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from policies import make_policy
from simulator import ClusterProfile, Workload, generate, libm, load_profile, simulate
from simulator.inputs.generate import add_sharing, add_slos
from simulator.inputs.throughput import ThroughputTable, generate_gavel
from simulator.result import SimulationResult
from tests.helpers.data import SHARED

__all__ = ["CASES", "GOLDEN", "Case", "record", "run_case"]

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
GAVEL = SHARED / "data" / "gavel" / "simulation_throughputs.json"


def _cut(name: str, nodes: int) -> ClusterProfile:
    """A shipped profile with ``nodes`` nodes in each of its node groups."""
    base = load_profile(name)
    return replace(base, name=f"{name}-cut{nodes}",
                   node_groups=tuple(replace(g, count=nodes) for g in base.node_groups))


@cache
def _gavel() -> ThroughputTable:
    return ThroughputTable.from_gavel_json(GAVEL)


def _slo(mix: str, seed: int, n: int = 110, load: float = 1.3) -> Workload:
    return add_slos(generate(n, load=load, gpus=48, seed=seed, median_service_s=1800.0),
                    mix, seed=seed)


def _gavel_jobs(seed: int, n: int, per_hr: float, shrink: float = 1.0) -> Workload:
    wl = generate_gavel(_gavel(), n, jobs_per_hr=per_hr, seed=seed)
    if shrink == 1.0:
        return wl
    frame = wl.to_frame().assign(service_s=wl.service_s / shrink,
                                 estimated_service_s=wl.estimated_service_s / shrink)
    return replace(Workload.from_frame(frame, scaling=wl.scaling, source=wl.source),
                   type_speed=wl.type_speed, interference=wl.interference)


def _shared(seed: int, n: int, gpus: int, memory: float, load: float = 1.2,
            sigma: float = 2.0) -> Workload:
    return add_sharing(generate(n, load=load, gpus=gpus, seed=seed, median_service_s=900.0,
                                sigma=sigma), device_memory_gib=memory, seed=seed)


def _fluid(seed: int, n: int, load: float, gpus: int = 64, noise: float = 0.0) -> Workload:
    """Generated jobs; with ``noise``, estimated sizes off by a log-normal factor of that σ."""
    wl = generate(n, load=load, gpus=gpus, seed=seed, median_service_s=1800.0)
    if noise == 0.0:
        return wl
    factor = libm.exp(np.random.default_rng(seed).normal(0.0, noise, len(wl)))
    frame = wl.to_frame().assign(estimated_service_s=wl.service_s * factor)
    return Workload.from_frame(frame, scaling=wl.scaling, source=wl.source)


@dataclass(frozen=True)
class Case:
    """One golden run: a workload on a cluster under a policy with some parameters."""

    name: str
    profile: Callable[[], ClusterProfile]
    workload: Callable[[], Workload]
    params: dict[str, Any] = field(default_factory=dict)
    predict: bool = False


def _cases() -> dict[str, tuple[Case, ...]]:
    u6 = lambda: _cut("unisched-c96", 6)  # noqa: E731 - 48 V100s, restarts 30 s
    g60 = lambda: load_profile("gavel-hetero-60")  # noqa: E731
    g24 = lambda: _cut("gavel-hetero-60", 2)  # noqa: E731 - 8 V100 + 8 P100 + 8 K80
    h4 = lambda: _cut("horus-128x8", 4)  # noqa: E731 - 32 RTX 2080
    o4 = lambda: _cut("ojpp-1080ti", 4)  # noqa: E731 - 16 GTX 1080 Ti
    p64 = lambda: load_profile("pcs-64")  # noqa: E731 - no restart cost

    slo = (lambda: _slo("MIX2", 1), lambda: _slo("MIX1", 2), lambda: _slo("SLO", 3, load=1.6))
    hetero = (lambda: _gavel_jobs(1, 70, 6.0), lambda: _gavel_jobs(2, 90, 60.0, shrink=10.0),
              lambda: generate(90, load=4.2, gpus=8, seed=3, median_service_s=1800.0))
    hetero_profiles = (g60, g60, g24)
    horus = (lambda: _shared(1, 100, 32, 8.0), lambda: _shared(2, 120, 32, 8.0, load=1.6),
             lambda: _shared(3, 100, 32, 8.0, sigma=1.0))
    ojpp = (lambda: _shared(1, 70, 16, 11.0), lambda: _shared(2, 80, 16, 11.0, load=1.5),
            lambda: add_sharing(_gavel_jobs(3, 60, 12.0, shrink=20.0), device_memory_gib=12.0,
                                seed=3))
    ojpp_profiles = (o4, o4, g24)
    unified = (lambda: add_slos(add_sharing(_gavel_jobs(1, 70, 40.0, shrink=25.0),
                                            device_memory_gib=12.0, seed=1), "MIX2", seed=1),
               lambda: add_slos(_shared(2, 70, 16, 11.0), "MIX1", seed=2),
               lambda: _slo("MIX2", 3))
    unified_profiles = (g60, o4, u6)
    fluid = (lambda: _fluid(1, 200, 2.0), lambda: _fluid(2, 140, 1.8, noise=0.6),
             lambda: _fluid(3, 120, 1.5, gpus=48, noise=0.3))
    fluid_profiles = (p64, p64, u6)
    fluid_predict = (False, True, True)

    def three(wls: tuple[Callable[[], Workload], ...],
              profiles: tuple[Callable[[], ClusterProfile], ...],
              params: tuple[dict[str, Any], ...] = ({}, {}, {}),
              predict: tuple[bool, ...] = (False, False, False)) -> tuple[Case, ...]:
        return tuple(Case(f"w{i + 1}", p, w, dict(q), f) for i, (w, p, q, f)
                     in enumerate(zip(wls, profiles, params, predict, strict=True)))

    def fluid_three(params: tuple[dict[str, Any], ...] = ({}, {}, {})) -> tuple[Case, ...]:
        return three(fluid, fluid_profiles, params, fluid_predict)

    return {
        "wfq": fluid_three(({}, {"T": 0.2, "W": 2.0, "delta": 0.3},
                            {"W": -1.0, "zeta_min": 0.0})),
        "fifo": fluid_three(),
        "srsf": fluid_three(),
        "srtf": fluid_three(),
        "las": fluid_three(),
        "maxmin": fluid_three(),
        "themis": fluid_three(({}, {"lease_s": 120.0}, {"lease_s": 3600.0})),
        "afs": fluid_three(),
        "quota": fluid_three(({}, {"thresholds": [20000.0, math.inf], "quotas": [40, 24]},
                              {"thresholds": [5000.0, 50000.0, math.inf],
                               "quotas": [16, 16, 16], "weights": [1.0, 2.0, 4.0],
                               "reclaim": False})),
        "unisched": three(slo, (u6,) * 3, ({}, {"opportunistic": False},
                                           {"be_lease_s": 120.0, "slo_lease_multiple": 3})),
        "llf": three(slo, (u6,) * 3),
        "hydra": three(slo, (u6,) * 3),
        "fifo-gang": three(slo, (u6,) * 3),
        "srsf-gang": three(slo, (u6,) * 3, ({}, {"lease_s": 600.0}, {})),
        "themis-gang": three(slo, (u6,) * 3, ({}, {}, {"lease_s": 600.0})),
        "optimus-gang": three(slo, (u6,) * 3, ({}, {"admit": "arrival"}, {"lease_s": 600.0})),
        "3sigma-gang": three(slo, (u6,) * 3, ({}, {"runtime_sigma": 0.0},
                                              {"plan_ahead_s": 600.0, "lease_s": 300.0})),
        "chronus-gang": three(slo, (u6,) * 3, ({}, {"guarantee_share": 0.5}, {"lease_s": 600.0})),
        "hadar": three(hetero, hetero_profiles,
                       ({}, {"utility": "ftf", "eta": 4.0},
                        {"utility": "makespan", "round_s": 240.0})),
        "gavel": three(hetero, hetero_profiles,
                       ({}, {"objective": "max_sum"}, {"round_s": 600.0})),
        "yarn-cs": three(hetero, hetero_profiles),
        "tiresias": three(hetero, hetero_profiles, ({}, {"threshold_gpu_s": 600.0}, {})),
        "wfq-hetero": three(hetero, hetero_profiles,
                            ({}, {"W_1": -1.0, "W_2": 2.0}, {"T": 0.1, "round_s": 120.0})),
        "horus": three(horus, (h4,) * 3,
                       ({}, {"k_queues": 1, "buffer": 5},
                        {"overcommit_limit": 1.5, "w_mem": 0.8})),
        "fifo-exclusive": three(horus, (h4,) * 3),
        "obp": three(horus, (h4,) * 3),
        "pab": three(horus, (h4,) * 3, ({}, {"warmup_s": 0.0, "max_slowdown": 0.5}, {})),
        "ojpp": three(ojpp, ojpp_profiles,
                      ({}, {"migration_budget": 0.0},
                       {"ewma_a": 0.2, "theta_max": 0.1, "tau_max": 0.05})),
        "ojpp-greedy": three(ojpp, ojpp_profiles),
        "best-fit": three(ojpp, ojpp_profiles),
        "c-greedy": three(ojpp, ojpp_profiles, ({}, {"tau_max": 0.02}, {"tau_max": 0.05})),
        "i-greedy": three(ojpp, ojpp_profiles),
        "b-greedy": three(ojpp, ojpp_profiles),
        "unified": three(unified, unified_profiles,
                         ({}, {"preempt": False, "W_1": -1.0},
                          {"theta_max": 1.5, "overcommit": 2.0, "be_lease_s": 120.0})),
    }


CASES: dict[str, tuple[Case, ...]] = _cases()
"""Each policy's golden cases."""


def run_case(policy: str, case: Case) -> tuple[Workload, SimulationResult]:
    """Simulate one case (the policy fitted to the case's workload)."""
    wl = case.workload()
    pol = make_policy(policy, case.params).fit(wl)
    return wl, simulate(wl, case.profile(), pol, predict=case.predict)


def _floats(values: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in values]


def _record_one(policy: str) -> dict[str, Any]:
    out: dict[str, Any] = {"policy": policy, "cases": {}}
    for case in CASES[policy]:
        wl, r = run_case(policy, case)
        out["cases"][case.name] = {
            "params": case.params, "profile": case.profile().name, "jobs": len(wl),
            "workload_digest": wl.digest(),
            "busy_gpu_s": r.busy_gpu_s, "util_gpu_s": None if np.isnan(r.util_gpu_s)
            else r.util_gpu_s, "gpus_used": r.gpus_used,
            "start_s": _floats(r.start_s), "finish_s": _floats(r.finish_s),
            "preemptions": [int(v) for v in r.preemptions], "slowdown": _floats(r.slowdown),
            **({"pred_start_s": _floats(r.pred_start_s), "pred_finish_s": _floats(r.pred_finish_s)}
               if case.predict else {})}
    return out


def record(policies: list[str]) -> None:
    """Write the golden file of each policy (atomically)."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for policy in policies:
        path = GOLDEN / f"{policy}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(_record_one(policy), indent=None, separators=(",", ":")) + "\n")
        tmp.replace(path)
        print(f"recorded {path}", file=sys.stderr)


if __name__ == "__main__":
    record(sys.argv[1:] or sorted(CASES))
