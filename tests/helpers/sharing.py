"""Workloads whose jobs can share GPUs, the OJPP profile at any size, and a harness that runs a
sharing policy and checks every plan it makes against its bounds, recomputed from scratch."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from policies.ojpp.placement import Bounds
from simulator import Workload, load_profile
from simulator.inputs.colocation import Interference
from simulator.inputs.profile import ClusterProfile
from simulator.inputs.scaling import ScalingTable
from simulator.rounds import RoundState
from simulator.rounds.sharing import SharingModel


def brute_tau(p: np.ndarray) -> float:
    """Probability that two or more surge, summed over every surge pattern."""
    total = 0.0
    for pattern in itertools.product((0, 1), repeat=len(p)):
        x = np.array(pattern, dtype=bool)
        if x.sum() >= 2:
            total += float(np.prod(np.where(x, p, 1.0 - p)))
    return total


def ojpp_profile(nodes: int) -> ClusterProfile:
    """The 11 GB GTX 1080 Ti profile with ``nodes`` servers of 4 devices."""
    prof = load_profile("ojpp-1080ti")
    return replace(prof, node_groups=(replace(prof.node_groups[0], count=nodes),))


def _spread(w: np.ndarray) -> float:
    return float(w.max() - w.min()) if w.size >= 2 else 0.0


def violations(sh: SharingModel, rows: np.ndarray, before: np.ndarray, after: np.ndarray,
               bounds: Bounds) -> list[str]:
    """Every bound one decision broke, recomputed from scratch (tau by enumeration)."""
    J, out = sh.jobs, []
    gained = (after & ~before).any(axis=0)
    alpha = J.gpu_util[rows] @ after
    mem = J.mem_gib[rows] @ after + np.where(after, J.surge_gib[rows][:, None], 0.0).max(
        axis=0, initial=0.0)
    w_after, w_before = sh.worker_slowdowns(rows, after), sh.worker_slowdowns(rows, before)
    for k in np.flatnonzero(gained):
        on = after[:, k]
        if alpha[k] > bounds.alpha_cap + 1e-9 and on.sum() > 1:  # the cap bounds sharing
            out.append(f"device {k}: compute {alpha[k]:g}")
        if mem[k] > sh.device_mem_gib[k] + 1e-9:
            out.append(f"device {k}: memory {mem[k]:g} GiB")
        if bounds.tau_max is not None and brute_tau(J.surge_p[rows][on]) > bounds.tau_max + 1e-9:
            out.append(f"device {k}: collision {brute_tau(J.surge_p[rows][on]):g}")
        if bounds.theta_max is not None and w_after[on, k].max() > bounds.theta_max + 1e-9:
            out.append(f"device {k}: interference {w_after[on, k].max():g}")
    # lone workers left out: eq. 16 over the devices a job shares with another
    counted_after, counted_before = after, before
    if bounds.lone_excluded:
        counted_after = after & (after.sum(axis=0) >= 2)
        counted_before = before & (before.sum(axis=0) >= 2)
    for j in np.flatnonzero(after.any(axis=1)):
        if bounds.theta_balance is None:
            break
        now = _spread(w_after[j, counted_after[j]])
        was = _spread(w_before[j, counted_before[j]])
        if now > max(bounds.theta_balance, was) + 1e-9:
            out.append(f"job row {rows[j]}: imbalance {was:g} -> {now:g}")
    return out


@dataclass
class Checked:
    """Runs a sharing policy and checks every plan it makes (a test harness, not a policy)."""

    inner: Any
    decisions: int = 0
    shared: int = 0
    broken: list[str] = field(default_factory=list)
    shares_gpus = True

    @property
    def round_s(self) -> float:
        return float(self.inner.round_s)

    @property
    def reacts(self) -> bool:
        return bool(self.inner.reacts)

    def plan(self, state: RoundState) -> np.ndarray:
        out = self.inner.plan(state)
        sh, before, after = state.sharing, state.placed, out.astype(bool)
        assert sh is not None
        self.decisions += 1
        self.shared += int((after.sum(axis=0) >= 2).sum())
        held = after.sum(axis=1)
        self.broken += [f"job row {state.rows[j]}: {held[j]} of {state.demand[j]} workers"
                        for j in np.flatnonzero((held > 0) & (held != state.demand))]
        self.broken += violations(sh, state.rows, before, after, self.inner.bounds())
        kept = before.any(axis=1)
        moved = (before & ~after)[kept].any(axis=1)
        budget = getattr(self.inner, "migration_budget", 0.0)
        cost = float(sh.jobs.mem_gib[state.rows[kept][moved]].sum())
        if cost > budget + 1e-9:
            self.broken.append(f"t={state.now:g}: migrated {cost:g} GiB > {budget:g}")
        return out


def random_workload(seed: int, n: int, devices: int, scaling: ScalingTable,
                    inter: Interference | None) -> Workload:
    """Small jobs that can share: 1-4 workers, 0.5-4 GiB base, surges on half of them."""
    rng = np.random.default_rng(seed)
    gamma = rng.uniform(0.5, 4.0, n)
    surging = rng.random(n) < 0.5
    frame = pd.DataFrame({
        "arrival_s": np.sort(np.where(rng.random(n) < 0.4, 0.0, rng.uniform(0, 1500, n))),
        "gpus": rng.integers(1, min(4, devices) + 1, n),
        "model": np.array(scaling.models, dtype=object)[rng.integers(0, len(scaling.models), n)],
        "service_s": rng.uniform(200.0, 1500.0, n),
        "gpu_util": rng.uniform(0.05, 0.7, n), "gpu_mem_gib": gamma,
        "mem_surge_gib": np.where(surging, rng.uniform(0, 1, n) * (11.0 - gamma) * 0.5, 0.0),
        "mem_surge_p": np.where(surging, rng.uniform(0.05, 0.5, n), 0.0)})
    wl = Workload.from_frame(frame, scaling=scaling)
    return replace(wl, interference=inter)
