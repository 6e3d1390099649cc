"""Hadar's evaluation workload (papers/hadar.md §V-A, Table II) built from a Philly trace.

The paper: 480 jobs "randomly selected from the busiest hour range (hours 3-10)" of the
Microsoft (Philly) trace; each job's class by its total GPU time, Small (0-1 GPU-hours),
Medium (1-10), Large (10-50), XLarge (60-100); its model drawn uniformly among Table II's
models of that class (S: ResNet-18, M: CycleGAN, L: LSTM or Transformer, XL: ResNet-50),
timed by Gavel's measured throughputs; all jobs at time 0 (static) or arriving over time
(continuous, "a Poisson arrival process with an interarrival rate λ").

Facts the paper does not give, and what this builder takes (each a keyword):

- **Which trace, which hours.** The shared Philly traces are PCS's per-VC extracts with
  relative times; ``hours`` are read as hours of the day of the trace's clock, and the default
  trace, 6214e9 (the largest VC), has its two busiest hours of the day (7 and 8) inside 3-10
  and only 1/2/4/8-GPU jobs, the gang sizes Gavel measured.
- **Sampling.** ``sampling="random"``: 480 jobs uniformly from the window's classified jobs
  (the Philly mix, ~77 % Small); ``"stratified"``: an equal share per class (another reading
  of "uniformly sampled the job type from these categories"; a class with fewer jobs in
  the window than its share is drawn with replacement: 6214e9 has 104 XL jobs in hours 3-10).
- **Batch sizes.** Gavel measured each model at several; :data:`TABLE2_MODELS` picks one.
- **Big gangs.** Gavel measured gangs of up to 8 GPUs; larger ones (ee9e8c and b436b2 have
  some) are not sampled. A model measured on one GPU only (CycleGAN) scales linearly, as
  Gavel assumes (:meth:`ThroughputTable.scaling`).
- **Which GPU the trace's durations are on.** A job of ``g`` GPUs and ``H`` GPU-hours runs
  ``H / g`` hours on ``g`` GPUs of ``reference`` (Gavel's generator times jobs on V100 too).
- **Arrivals.** ``arrivals="trace"``: each job at its time of day minus the window's start
  (so 480 jobs from many days arrive within one window); ``"poisson"``: Poisson at
  ``rate_per_h`` (the paper's λ, unstated); ``"static"``: all at 0, queued in trace order
  (``shuffle``: in a random one), which decides a FIFO scheduler's figures.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from simulator.errors import InvalidWorkload
from simulator.inputs.throughput import ThroughputTable
from simulator.inputs.traces import integer_column, number_column, read_csv_columns
from simulator.inputs.workload import Workload

__all__ = ["CLASSES", "TABLE2_MODELS", "hadar_workload"]

CLASSES: dict[str, tuple[float, float]] = {"S": (0.0, 1.0), "M": (1.0, 10.0),
                                            "L": (10.0, 50.0), "XL": (60.0, 100.0)}
"""Hadar §V-A's GPU-hour classes, ``[low, high)`` (XL's 100 included). Jobs of 50-60 or
over 100 GPU-hours fall in none and are not sampled."""

TABLE2_MODELS: dict[str, tuple[str, ...]] = {
    "S": ("ResNet-18 (batch size 64)",),
    "M": ("CycleGAN",),
    "L": ("LM (batch size 20)", "Transformer (batch size 64)"),
    "XL": ("ResNet-50 (batch size 64)",),
}
"""Table II's models per class, as Gavel's throughput table names them (LSTM on Wikitext-2
is Gavel's ``LM``; batch sizes are this module's choice)."""


def classify(gpu_hours: np.ndarray) -> np.ndarray:
    """Each job's class name in :data:`CLASSES`, or ``""`` for none."""
    out = np.full(gpu_hours.shape, "", dtype=object)
    for name, (low, high) in CLASSES.items():
        below = gpu_hours <= high if name == "XL" else gpu_hours < high
        out[(gpu_hours >= low) & below] = name
    return out


def hadar_workload(trace: str | Path, table: ThroughputTable, *, n_jobs: int = 480,
                   hours: tuple[float, float] = (3.0, 10.0),
                   arrivals: Literal["static", "trace", "poisson"] = "static",
                   rate_per_h: float | None = None,
                   sampling: Literal["random", "stratified"] = "random",
                   models: dict[str, tuple[str, ...]] | None = None,
                   reference: str = "v100", shuffle: bool = False, seed: int = 0) -> Workload:
    """Sample Hadar's workload from a PCS/Philly trace CSV (module docstring for the choices).

    Args:
        trace: ``submit_time`` (s), ``service`` (GPU-seconds), ``num_jobs`` (GPU demand).
        table: Gavel's measured throughputs (per-type speeds, scaling with GPUs).
        n_jobs: jobs to sample (the paper: 480).
        hours: the window, hours of the day ``[start, end)``.
        arrivals: ``static``, ``trace`` or ``poisson``.
        rate_per_h: Poisson arrivals per hour (``poisson`` only).
        sampling: ``random`` or ``stratified`` over the classes.
        models: class -> models to draw from uniformly; default :data:`TABLE2_MODELS`.
        reference: the GPU type the trace's durations are on.
        shuffle: static arrivals only: queue the jobs in a random order, not the trace's.
        seed: the sample's, the models' and the arrivals' seed.

    Returns:
        The workload in arrival order; its ``source`` names the set-up.

    Raises:
        InvalidWorkload: the trace lacks a column or has a bad cell (row and column named), a
            model is not in ``table``, the window has too few jobs, or the arguments are out
            of range.
    """
    src = str(trace)
    models = dict(TABLE2_MODELS if models is None else models)
    if set(models) != set(CLASSES) or not all(models.values()):
        raise InvalidWorkload(f"hadar_workload: models must give at least one model for each "
                              f"class {list(CLASSES)}; got {models}")
    if not 0 <= hours[0] < hours[1] <= 24:
        raise InvalidWorkload(f"hadar_workload: hours must be 0 <= start < end <= 24 (hours of "
                              f"the day); got {hours}")
    if n_jobs < 1:
        raise InvalidWorkload(f"hadar_workload: n_jobs must be >= 1; got {n_jobs}")
    if arrivals == "poisson" and not (rate_per_h is not None and rate_per_h > 0):
        raise InvalidWorkload(f"hadar_workload: Poisson arrivals need rate_per_h > 0; got "
                              f"{rate_per_h}")
    if arrivals not in ("static", "trace", "poisson") or sampling not in ("random", "stratified"):
        raise InvalidWorkload(f"hadar_workload: arrivals must be static/trace/poisson and "
                              f"sampling random/stratified; got {arrivals!r}, {sampling!r}")
    scaling = table.scaling(reference)
    for name in (m for names in models.values() for m in names):
        if name not in table.job_types:
            raise InvalidWorkload(f"hadar_workload: model {name!r} is not in the throughput "
                                  f"table; it has {list(table.job_types)}")

    df = read_csv_columns(trace, ("submit_time", "service", "num_jobs"), "PCS/Philly trace")
    submit = number_column(df, "submit_time", src).to_numpy(dtype=np.float64)
    service = number_column(df, "service", src).to_numpy(dtype=np.float64)
    gpus = integer_column(df, "num_jobs", src, 1).to_numpy()
    hour = np.mod(submit, 86400.0) / 3600.0
    kind = classify(service / 3600.0)
    pool = np.flatnonzero((hour >= hours[0]) & (hour < hours[1]) & (kind != "")
                          & (service > 0) & (gpus <= scaling.width - 1))

    rng = np.random.default_rng(seed)
    picked = _sample(pool, kind, n_jobs, sampling, rng, src, hours)
    cls = kind[picked]
    model = np.array([models[c][rng.integers(len(models[c]))] for c in cls], dtype=object)
    idx = np.array([scaling.index(m) for m in model])
    g = gpus[picked]
    duration = service[picked] / g
    if arrivals == "static":
        arrival = np.zeros(len(picked))
    elif arrivals == "trace":
        arrival = (hour[picked] - hours[0]) * 3600.0
    else:
        assert rate_per_h is not None
        arrival = np.cumsum(np.r_[0.0, rng.exponential(3600.0 / rate_per_h, len(picked) - 1)])
    order = (rng.permutation(len(picked)) if shuffle and arrivals == "static"
             else np.argsort(arrival, kind="stable"))
    frame = pd.DataFrame({"arrival_s": arrival[order], "gpus": g[order], "model": model[order],
                          "service_s": (duration * scaling.speed(idx, g.astype(float)))[order]})
    how = f"all at 0{', shuffled' if shuffle else ''}" if arrivals == "static" else (
        "trace times of day" if arrivals == "trace" else f"Poisson {rate_per_h:g}/h")
    wl = Workload.from_frame(frame, scaling=scaling,
                             source=f"hadar §V-A from {Path(src).name}: {len(picked)} jobs "
                                    f"({sampling}) of hours {hours[0]:g}-{hours[1]:g}, {how}")
    return replace(wl, type_speed=table.type_speeds(scaling, reference),
                   interference=table.interference(scaling))


def _sample(pool: np.ndarray, kind: np.ndarray, n_jobs: int, sampling: str,
            rng: np.random.Generator, src: str, hours: tuple[float, float]) -> np.ndarray:
    """Rows of ``pool`` to keep, in trace order (a stratified class short of its share is
    drawn with replacement)."""
    if sampling == "random":
        if len(pool) < n_jobs:
            raise InvalidWorkload(f"{src}: hours {hours} hold {len(pool)} classified jobs, "
                                  f"fewer than the {n_jobs} asked for")
        return np.sort(rng.choice(pool, n_jobs, replace=False))
    share = np.diff(np.linspace(0, n_jobs, len(CLASSES) + 1).round().astype(np.int64))
    parts = []
    for name, k in zip(CLASSES, share, strict=True):
        rows = pool[kind[pool] == name]
        if not len(rows):
            raise InvalidWorkload(f"{src}: hours {hours} hold no {name} job for a stratified "
                                  f"sample")
        parts.append(rng.choice(rows, k, replace=len(rows) < k))
    return np.sort(np.concatenate(parts))
