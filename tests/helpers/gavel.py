"""Gavel's reference runs (tests/fixtures/gavel, and more of them in its ``more/``): the
traces, Gavel's policies as our ``gavel``'s parameters, Gavel's per-job records, and our
rounds driven by the allocations Gavel computed."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from policies.hetero.gavel import Gavel
from simulator import Workload
from simulator.inputs.throughput import ThroughputTable
from simulator.inputs.traces import read_gavel_trace
from tests.helpers.data import ROOT, SHARED

FIXTURES = ROOT / "tests" / "fixtures" / "gavel"
TRACES = ("static_single", "static_multi", "continuous_single", "continuous_multi")
POLICIES = {  # Gavel's policy -> our gavel's parameters
    "fifo": {"objective": "fifo", "aware": False},
    "fifo_perf": {"objective": "fifo", "aware": True},
    "max_min_fairness": {"objective": "max_min", "aware": False},
    "max_min_fairness_perf": {"objective": "max_min", "aware": True},
    "finish_time_fairness": {"objective": "finish_time", "aware": False},
    "finish_time_fairness_perf": {"objective": "finish_time", "aware": True},
}
MAKESPAN_POLICIES = {  # Gavel's makespan policies, whose runs are in MAKESPAN
    "min_total_duration": {"objective": "makespan", "aware": False},
    "min_total_duration_perf": {"objective": "makespan", "aware": True},
}
MAX_SUM_POLICIES = {  # Gavel's throughput policy, whose runs are in MAX_SUM
    "max_sum_throughput_perf": {"objective": "max_sum", "aware": True},
}
TYPES = ("v100", "p100", "k80")  # gavel-108's order
MORE = FIXTURES / "more"
MAKESPAN = FIXTURES / "makespan"
MAX_SUM = FIXTURES / "maxsum"


@dataclass(frozen=True)
class Run:
    """One of Gavel's runs in ``more/`` (or ``where``): trace, policy and the cluster
    (``-c``, as ``--cluster`` reads it), with Gavel's average JCT over the jobs it kept."""

    trace: str
    policy: str
    cluster: str
    avg_jct_s: float
    where: Path = MORE

    @property
    def id(self) -> str:
        return f"{self.trace}-{self.policy}"

    @property
    def traces(self) -> Path:
        """The folder of the run's trace: ``more/`` or the first set's."""
        return MORE if (MORE / f"{self.trace}.trace").exists() else FIXTURES

    @property
    def params(self) -> dict[str, Any]:
        """Our ``gavel``'s parameters for the run's policy."""
        return {**POLICIES, **MAKESPAN_POLICIES, **MAX_SUM_POLICIES}[self.policy]


def more_runs(where: Path = MORE) -> list[Run]:
    """Every run of ``where``'s ``summary.csv``, in its order."""
    doc = pd.read_csv(where / "summary.csv")
    return [Run(r.trace, r.policy, r.cluster, r.avg_jct_s, where) for r in doc.itertuples()]


@cache
def workload(trace: str, where: Path = FIXTURES) -> Workload:
    table = ThroughputTable.from_gavel_json(SHARED / "data" / "gavel" /
                                            "simulation_throughputs.json")
    return read_gavel_trace(where / f"{trace}.trace", table)


def reference(trace: str, policy: str, where: Path = FIXTURES) -> pd.DataFrame:
    """Gavel's per-job records; jobs it dropped (5 failed rounds) have no JCT."""
    return pd.read_csv(where / f"{trace}__{policy}.csv")


@dataclass(frozen=True)
class GavelsAllocations(Gavel):
    """Our rounds, with the allocation Gavel computed at each reset (its ``.alloc.jsonl``)."""

    name: ClassVar[str] = "gavel-replay"
    source: str = ""

    def allocate(self, rate: Any, demand: Any, type_gpus: Any, rows: Any, memory: Any,
                 jobs: Any, now: float) -> Any:
        at = _allocations(self.source)
        times = np.array(sorted(at))
        k = int(np.argmin(np.abs(times - now)))
        assert abs(times[k] - now) <= 1e-6 * max(now, 1.0), (now, times[k])
        alloc = at[times[k]]
        assert sorted(alloc) == sorted(int(r) for r in rows), now  # the same jobs are in
        return np.array([[alloc[int(r)][t] for t in TYPES] for r in rows])


@cache
def _allocations(path: str) -> dict[float, dict[int, dict[str, float]]]:
    with gzip.open(path, "rt") as f:
        docs = [json.loads(line) for line in f]
    return {d["t"]: {int(j): x for j, x in d["alloc"].items()} for d in docs}


def twins_sorted(ref: pd.DataFrame, jct: Any) -> np.ndarray:
    """``jct`` with the JCTs of identical jobs (type, GPUs, steps, arrival) sorted among
    them: which of two identical jobs goes first is a tie that Gavel breaks by the last bits
    of its float sums, so only their JCTs as a set are the answer."""
    out = np.asarray(jct, dtype=np.float64).copy()
    for _, rows in ref.groupby(["job_type", "scale_factor", "total_steps", "arrival_s"]):
        idx = rows.index.to_numpy()
        out[idx] = np.sort(out[idx])
    return out


def recording(policy: Gavel) -> list[tuple[float, dict[int, Any]]]:
    """The allocations ``policy`` computes from now on, at each reset: its clock then and
    ``{workload row: x over the profile's types}``."""
    seen: list[tuple[float, dict[int, Any]]] = []
    allocate = policy.allocate

    def spy(rate: Any, demand: Any, gpus: Any, rows: Any, memory: Any, jobs: Any,
            now: float) -> Any:
        x = allocate(rate, demand, gpus, rows, memory, jobs, now)
        seen.append((now, {int(r): x[a] for a, r in enumerate(rows)}))
        return x

    object.__setattr__(policy, "allocate", spy)  # a frozen dataclass
    return seen


def gavels_allocations(path: Path) -> list[tuple[float, dict[int, Any]]]:
    """Gavel's recorded allocations (an ``.alloc.jsonl.gz``), as :func:`recording` has them."""
    with gzip.open(path, "rt") as f:
        docs = [json.loads(line) for line in f]
    return [(d["t"], {int(j): np.array([x[t] for t in TYPES]) for j, x in d["alloc"].items()})
            for d in docs]
