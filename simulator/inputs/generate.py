"""Synthetic workloads: the built-in Philly-like generator and PCS's CDF-driven generator.

Both take an explicit ``numpy.random.Generator`` seed source and a target ``load``: the
arrival rate is set so that offered work (1-GPU-seconds per second) equals ``load`` times
the cluster's GPUs, i.e. mean interarrival = ``mean(service) / (load * gpus)`` as in PCS.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator import libm
from simulator.errors import InvalidWorkload, located
from simulator.inputs.colocation import JobSharing
from simulator.inputs.files import read_data, to_numbers
from simulator.inputs.scaling import PARAMETRIC_MODELS, ScalingTable, parametric_table
from simulator.inputs.slo import JOB_CLASSES, MIXES, SOFT, STRICT, SLOs, deadline_steps, pad_steps
from simulator.inputs.workload import Workload

__all__ = ["EARLY_STOP_CUT", "MAX_JOBS", "PHILLY_GPU_MIX", "PHILLY_LOAD", "UTIL_CLASSES",
           "add_sharing", "add_slos", "add_stopping_criteria", "check_jobs", "generate",
           "generate_from_cdfs", "read_cdf"]

MAX_JOBS = 10_000_000
"""The most jobs a generated workload may have (each job is a few hundred bytes in every
replicate; 10^12 would exhaust memory before anything is said)."""

PHILLY_LOAD = 2.2
"""The default offered load: the median of PCS's five Philly traces replayed on their 64 GPUs
(work over span over GPUs: 0.92, 1.14, 2.20, 2.43, 2.51). It is the regime PCS studies: queues
build, preemption makes completion times hard to predict, and WFQ's settings trade JCT against
prediction error. At 0.9 the queue rarely builds, SRSF is both fast and predictable, and a
WFQ front is mostly beaten by it on fresh jobs (docs/robust-fronts.md)."""

FloatArray = npt.NDArray[np.float64]

PHILLY_GPU_MIX: dict[int, float] = {1: 0.62, 2: 0.10, 4: 0.13, 8: 0.11, 16: 0.03, 32: 0.01}
"""GPU demand distribution of the built-in generator, close to the Philly traces' mix
(``cdf-max-gpus-per-job-philly.csv``: most jobs take 1 GPU, a few percent take 16+)."""

MODEL_MIX: dict[str, float] = {"linear": 0.2, "amdahl-0.99": 0.3, "amdahl-0.95": 0.3,
                               "amdahl-0.80": 0.2}
"""Share of generated jobs following each built-in scaling behaviour."""


def check_jobs(n_jobs: int, who: str = "generator") -> None:
    """Refuse a job count outside 1 to :data:`MAX_JOBS` (before anything is allocated)."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or not 1 <= n_jobs <= MAX_JOBS:
        raise InvalidWorkload(f"{who}: jobs must be an integer from 1 to {MAX_JOBS:,} "
                              f"(got {n_jobs!r})")


def _check_common(n_jobs: int, load: float, gpus: int) -> None:
    check_jobs(n_jobs)
    if not (np.isfinite(load) and load > 0):
        raise InvalidWorkload(f"generator: load must be > 0 (got {load})")
    if gpus < 1:
        raise InvalidWorkload(f"generator: gpus must be >= 1 (got {gpus})")


def _arrivals(rng: np.random.Generator, service: FloatArray, load: float,
              gpus: int) -> FloatArray:
    mean_gap = float(service.mean()) / (load * gpus)
    gaps: FloatArray = np.asarray(rng.exponential(mean_gap, size=service.shape[0]))
    gaps[0] = 0.0
    return np.cumsum(gaps)


def generate(
    n_jobs: int = 1000,
    *,
    load: float = PHILLY_LOAD,
    gpus: int = 64,
    seed: int | np.random.SeedSequence = 0,
    median_service_s: float = 3600.0,
    sigma: float = 2.0,
) -> Workload:
    """The embedded default workload: Philly-like, heavy-tailed, no files needed.

    Job sizes (1-GPU-seconds) are log-normal with the given median and log-σ (σ = 2 gives the
    Philly traces' spread: a p99/median ratio near 100), clipped to [60 s, 60 days]; GPU
    demands follow :data:`PHILLY_GPU_MIX` (capped at ``gpus``) with bigger gangs doing
    proportionally more work; scaling behaviours follow :data:`MODEL_MIX`; arrivals are
    Poisson at the target ``load``.
    """
    _check_common(n_jobs, load, gpus)
    rng = np.random.default_rng(seed)
    sizes = np.array(list(PHILLY_GPU_MIX))
    probs = np.array(list(PHILLY_GPU_MIX.values()))
    demand = np.minimum(rng.choice(sizes, size=n_jobs, p=probs / probs.sum()), gpus)
    per_gpu = libm.exp(rng.normal(math.log(median_service_s), sigma, size=n_jobs))
    service = np.clip(per_gpu * demand, 60.0, 60 * 86400.0)
    names = list(MODEL_MIX)
    shares = np.array(list(MODEL_MIX.values()))
    model_name = np.asarray(names)[rng.choice(len(names), size=n_jobs, p=shares / shares.sum())]
    table = parametric_table(max(gpus, 1))
    frame = pd.DataFrame({
        "arrival_s": _arrivals(rng, service, load, gpus),
        "gpus": demand,
        "service_s": service,
        "model": model_name,
    })
    assert set(MODEL_MIX) <= set(PARAMETRIC_MODELS)
    return Workload.from_frame(frame, scaling=table,
                               source=f"generated(n={n_jobs}, load={load}, seed={seed})")


def read_cdf(path: str | Path) -> tuple[FloatArray, FloatArray]:
    """Read a PCS CDF file (``value,cdf`` rows under a ``#label,cdf`` header).

    Rows out of order (as in a few of PCS's files) are sorted by value and the CDF is made
    non-decreasing.

    Returns:
        ``(values, cdf)``, both non-decreasing, cdf ending at 1.
    """
    src = str(path)
    data = read_data(path, InvalidWorkload, "CDF file")
    try:
        df = pd.read_csv(data, comment=None)
    except (OSError, ValueError) as exc:
        raise InvalidWorkload(f"{src}: cannot read CDF file: {exc}") from exc
    if df.shape[1] != 2:
        raise InvalidWorkload(located(src, problem=f"expected 2 columns value,cdf, "
                                                   f"found {df.shape[1]}"))
    values = to_numbers(df.iloc[:, 0]).to_numpy(np.float64)
    cdf = to_numbers(df.iloc[:, 1]).to_numpy(np.float64)
    for j, (name, arr) in enumerate((("value", values), ("cdf", cdf))):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            i = int(bad[0])
            raise InvalidWorkload(located(src, row=i + 1, column=name, value=df.iloc[i, j],
                                          problem="must be a finite number"))
    bad = np.flatnonzero((cdf < 0) | (cdf > 1))
    if bad.size:
        i = int(bad[0])
        raise InvalidWorkload(located(src, row=i + 1, column="cdf", value=float(cdf[i]),
                                      problem="must lie in [0, 1]"))
    if abs(cdf.max() - 1.0) > 1e-6:
        raise InvalidWorkload(located(src, column="cdf", value=float(cdf.max()),
                                      problem="must reach 1"))
    # some of PCS's files list a point out of order: sort by value, keep the CDF monotone
    order = np.argsort(values, kind="stable")
    return values[order], np.maximum.accumulate(cdf[order])


def _sample(rng: np.random.Generator, cdf_file: tuple[FloatArray, FloatArray], n: int,
            *, discrete: bool) -> FloatArray:
    values, cdf = cdf_file
    u = rng.random(n)
    if discrete:
        idx = np.minimum(np.searchsorted(cdf, u, side="left"), len(values) - 1)
        return values[idx]
    # continuous: interpolate the inverse CDF on its strictly increasing part
    keep = np.concatenate([[True], np.diff(cdf) > 0])
    return np.asarray(np.interp(u, cdf[keep], values[keep]), dtype=np.float64)


def generate_from_cdfs(
    workload_dir: str | Path,
    name: str,
    *,
    scaling: ScalingTable,
    n_jobs: int,
    load: float,
    gpus: int,
    seed: int | np.random.SeedSequence = 0,
    models: tuple[str, ...] | None = None,
) -> Workload:
    """PCS's synthetic workloads from its CDF files (e.g. ``name="workload_0e4a51"``).

    Reads ``cdf-app-service-times-<name>.csv`` and ``cdf-max-gpus-per-job-<name>.csv``
    (required) and ``cdf-app-interarrival-times-<name>.csv`` (optional; without it arrivals
    are Poisson at ``load``). Models are drawn uniformly from ``models`` (default: every model
    of ``scaling``); PCS's own searches used linear scaling only (``models=("linear",)``).
    """
    _check_common(n_jobs, load, gpus)
    base = Path(workload_dir)

    def cdf_path(kind: str) -> Path:
        return base / f"cdf-{kind}-{name}.csv"

    for kind in ("app-service-times", "max-gpus-per-job"):
        if not cdf_path(kind).exists():
            raise InvalidWorkload(f"{cdf_path(kind)}: CDF file not found; workload {name!r} "
                                  f"needs cdf-{kind}-{name}.csv in {base}")
    rng = np.random.default_rng(seed)
    service = np.maximum(_sample(rng, read_cdf(cdf_path("app-service-times")), n_jobs,
                                 discrete=False), 1.0)
    demand = np.minimum(_sample(rng, read_cdf(cdf_path("max-gpus-per-job")), n_jobs,
                                discrete=True), gpus).astype(np.int64)
    demand = np.maximum(demand, 1)
    gap_file = cdf_path("app-interarrival-times")
    if gap_file.exists():
        gaps = _sample(rng, read_cdf(gap_file), n_jobs, discrete=False)
        gaps[0] = 0.0
        arrival = np.cumsum(gaps)
    else:
        arrival = _arrivals(rng, service, load, gpus)
    names = np.asarray(models if models else scaling.models, dtype=object)
    frame = pd.DataFrame({
        "arrival_s": arrival, "gpus": demand, "service_s": service,
        "model": names[rng.integers(0, len(names), size=n_jobs)],
    })
    return Workload.from_frame(frame, scaling=scaling, source=f"cdf:{name}")


def add_slos(workload: Workload, mix: str = "MIX2", *,
             seed: int | np.random.SeedSequence = 0) -> Workload:
    """Give a workload SLO jobs the way UniSched's evaluation does (§IV-B, after Chronus).

    Each job becomes strict, soft or best-effort with the shares of ``mix`` (see
    :data:`simulator.inputs.slo.MIXES`); an SLO job's first deadline is uniform in [1.1, 2]
    times its duration at full demand, and soft jobs get the 1.1 / 1.2 / 1.5 staircase worth
    80 / 50 / 20.
    """
    if mix not in MIXES:
        raise InvalidWorkload(f"unknown SLO mix {mix!r}; known mixes: {', '.join(MIXES)}")
    rng = np.random.default_rng(seed)
    names = list(MIXES[mix])
    shares = np.array([MIXES[mix][k] for k in names])
    classes = np.array([JOB_CLASSES.index(k) for k in names])[
        rng.choice(len(names), size=len(workload), p=shares / shares.sum())]
    duration = workload.duration_s
    steps, pays = [], []
    for kind, d in zip(classes, duration, strict=True):
        s, r = deadline_steps(int(kind), float(d), rng) if kind in (STRICT, SOFT) else ([], [])
        steps.append(s)
        pays.append(r)
    return replace(workload, slos=SLOs(classes.astype(np.int64), pad_steps(steps),
                                       pad_steps(pays)),
                   source=f"{workload.source}+{mix}")


EARLY_STOP_CUT = (0.22, 0.31)
"""Largest share of the declared iterations a performance-based job skips, for the two
targets UniSched evaluates (best metric, 99 % of it; its Fig. 1: up to 22 % and 31 %)."""


def add_stopping_criteria(workload: Workload, performance_share: float = 0.2, *,
                          seed: int | np.random.SeedSequence = 0) -> Workload:
    """Make a share of the jobs stop on a target metric, as UniSched's evaluation does (§IV-B).

    Iteration-based jobs (80 % by default) run the iterations their user declared. A
    performance-based job stops when its model reaches a target, before the declared maximum:
    its trace duration is what it ran, and the maximum its user declared is longer by a cut
    drawn uniformly up to 22 % (target: the best metric) or 31 % (99 % of it), target chosen
    with equal odds. The scheduler believes the declared maximum (``estimated_service_s``),
    as it would without UniSched's training-iteration estimator.
    """
    if not 0.0 <= performance_share <= 1.0:
        raise InvalidWorkload(f"performance_share must be in [0, 1] (got {performance_share})")
    rng = np.random.default_rng(seed)
    n = len(workload)
    performance = rng.random(n) < performance_share
    cut = rng.uniform(0.0, np.where(rng.random(n) < 0.5, *EARLY_STOP_CUT))
    declared = np.where(performance, workload.estimated_service_s / (1.0 - cut),
                        workload.estimated_service_s)
    return replace(workload, estimated_service_s=declared,
                   source=f"{workload.source}+early-stop({performance_share:g})")


UTIL_CLASSES: tuple[tuple[float, float, float], ...] = ((0.40, 0.10, 0.35), (0.35, 0.35, 0.65),
                                                        (0.25, 0.65, 0.95))
"""``(share of models, low, high)`` of a model's mean GPU utilization: light, medium and heavy
(Horus Fig. 1a shows three distinct utilization patterns; its jobs are light below 60 %)."""


def add_sharing(workload: Workload, *, device_memory_gib: float = 16.0,
                opportunistic: float = 0.5, seed: int | np.random.SeedSequence = 0) -> Workload:
    """Give every job SYNTHETIC worker requirements for sharing GPUs
    (:mod:`simulator.inputs.colocation`).

    Each model draws a mean utilization from :data:`UTIL_CLASSES` and a base memory of 10-40 %
    of ``device_memory_gib``; each job varies around its model's (utilization +-0.05, memory
    +-10 %). A share ``opportunistic`` of the jobs has a cyclic memory surge (OJPP §3.2): delta
    up to what still fits the device alone, with probability 0.05-0.30; the rest have fixed
    memory. Plausible numbers for the embedded demo and tests, not measurements: give real
    ``gpu_util`` / memory columns (or a fitted predictor's output) for real decisions.
    """
    if not 0.0 <= opportunistic <= 1.0 or not device_memory_gib > 0:
        raise InvalidWorkload(f"add_sharing: need 0 <= opportunistic <= 1 and "
                              f"device_memory_gib > 0 (got {opportunistic}, {device_memory_gib})")
    rng = np.random.default_rng(seed)
    n, models = len(workload), len(workload.scaling.models)
    shares, lows, highs = (np.array(c) for c in zip(*UTIL_CLASSES, strict=True))
    kind = rng.choice(len(UTIL_CLASSES), size=models, p=shares / shares.sum())
    mean_util = rng.uniform(lows[kind], highs[kind])
    mean_mem = rng.uniform(0.10, 0.40, models) * device_memory_gib
    m = workload.model
    util = np.clip(mean_util[m] + rng.uniform(-0.05, 0.05, n), 0.05, 1.0)
    mem = mean_mem[m] * rng.uniform(0.9, 1.1, n)
    surging = rng.random(n) < opportunistic
    surge = np.where(surging, rng.uniform(0.2, 1.0, n) * (device_memory_gib - mem), 0.0)
    p = np.where(surging, rng.uniform(0.05, 0.30, n), 0.0)
    return replace(workload, sharing=JobSharing(util, mem, surge, p),
                   source=f"{workload.source}+sharing(synthetic)")

