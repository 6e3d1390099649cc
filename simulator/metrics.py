"""Metrics computed from a simulation's records (SPEC §2), and measures over them.

A metric gives one value per job (``jct``, ``wait``, ``pred_err``, ``unfairness``, ``ftf``,
``preemptions``, ``slo_miss``, ``be_jct``, ``slowdown``) or one value per run (``makespan``,
``utilization``, ``perf_guaranteed``, ``gpus_used``, ``gpu_util_sum``). A measure reduces the
values: ``avg``, ``max``, ``min`` or ``pNN`` (numpy's linear-interpolation percentile, e.g.
``p50``, ``p99``, ``p99.9``). Jobs without a value (no prediction made) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulator.errors import ParetoSearchError
from simulator.inputs.slo import BEST_EFFORT, reward_obtained
from simulator.simulate import SimulationResult

__all__ = ["METRICS", "InvalidObjective", "Metric", "measure", "parse_measure", "summary"]

FloatArray = npt.NDArray[np.float64]


class InvalidObjective(ParetoSearchError, ValueError):
    """An unknown metric or a measure that is not avg / max / min / pNN."""


@dataclass(frozen=True)
class Metric:
    """One metric: how to compute it, its unit, whether larger is better, and whether it
    needs the JCT predictions (a simulation without them leaves it undefined)."""

    name: str
    unit: str
    title: str
    help: str
    compute: Callable[[SimulationResult], FloatArray]
    maximize: bool = False
    predicted: bool = False
    per_run: bool = False


def _pred_err(r: SimulationResult) -> FloatArray:
    # PCS code: relative to the prediction, in percent
    pred = r.jct_pred_s
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pred > 0, 100.0 * np.abs(pred - r.jct_s) / pred, np.nan)


def _ftf(r: SimulationResult) -> FloatArray:
    wl = r.workload
    share = np.minimum(r.total_gpus / r.seen_avg, wl.gpus)
    isolated = wl.service_s / wl.scaling.speed(wl.model, share)
    return r.jct_s / isolated


def _slo_miss(r: SimulationResult) -> FloatArray:
    # UniSched eq. 15, per job: 1 - reward obtained / 100 (NaN for jobs without an SLO)
    slos = r.workload.slos
    if slos is None:
        return np.full(len(r.workload), np.nan)
    return 1.0 - reward_obtained(slos, r.jct_s) / 100.0


def _be_jct(r: SimulationResult) -> FloatArray:
    slos = r.workload.slos
    if slos is None:
        return r.jct_s
    return np.where(slos.job_class == BEST_EFFORT, r.jct_s, np.nan)


def _makespan(r: SimulationResult) -> FloatArray:
    return np.array([np.nanmax(r.finish_s) - r.workload.arrival_s.min()])


def _per_gpu_time(integral: float, r: SimulationResult) -> FloatArray:
    span = _makespan(r)[0]
    return np.array([integral / (r.total_gpus * span) if span > 0 else 0.0])


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("jct", "s", "job completion time", "finish - arrival", lambda r: r.jct_s),
    Metric("wait", "s", "queueing delay", "first start - arrival",
           lambda r: r.start_s - r.workload.arrival_s),
    Metric("makespan", "s", "makespan", "last finish - first arrival (one value per run)",
           _makespan, per_run=True),
    Metric("pred_err", "%", "JCT prediction error",
           "|predicted JCT - JCT| / predicted JCT, prediction at arrival", _pred_err,
           predicted=True),
    Metric("unfairness", "%", "unfairness", "max(0, JCT / fair finish time - 1) (PCS)",
           lambda r: 100.0 * np.maximum(0.0, r.jct_s / r.fft_s - 1.0)),
    Metric("ftf", "x", "finish-time fairness",
           "finish-time fairness rho = JCT / JCT at a 1/N share (Themis)", _ftf),
    Metric("utilization", "frac", "GPUs allocated",
           "time-average fraction of GPUs allocated (one per run)",
           lambda r: _per_gpu_time(r.busy_gpu_s, r), maximize=True, per_run=True),
    Metric("preemptions", "count", "preemptions", "allocation changes after a job first started",
           lambda r: r.preemptions.astype(np.float64)),
    Metric("slo_miss", "frac", "SLO reward missed",
           "SLO jobs: 1 - reward obtained / 100 (UniSched eq. 15)", _slo_miss),
    Metric("be_jct", "s", "best-effort JCT",
           "JCT of best-effort jobs (every job if none has an SLO)", _be_jct),
    Metric("slowdown", "x", "co-location slowdown",
           "(t_colocated - t_alone) / t_alone over the job's running time",
           lambda r: r.slowdown),
    Metric("perf_guaranteed", "frac", "performance guaranteed",
           "1 - mean slowdown (OJPP; one per run)",
           lambda r: np.array([1.0 - float(r.slowdown.mean())]), maximize=True, per_run=True),
    Metric("gpus_used", "count", "GPUs used",
           "devices that ever hosted a job (OJPP's bins; one per run)",
           lambda r: np.array([r.gpus_used]), per_run=True),
    Metric("gpu_util_sum", "frac", "GPU utilization", "time-average GPU utilization, "
           "co-located jobs' summed and capped at 1 per GPU (one per run)",
           lambda r: _per_gpu_time(r.util_gpu_s, r), maximize=True, per_run=True),
)}
"""Every metric by name."""

_PERCENTILE = re.compile(r"p(\d+(?:\.\d+)?)")


def parse_measure(text: str) -> str:
    """Validate a measure name and return it normalised (``"P99"`` -> ``"p99"``)."""
    m = text.strip().lower()
    if m in ("avg", "max", "min"):
        return m
    match = _PERCENTILE.fullmatch(m)
    if match and 0.0 <= float(match.group(1)) <= 100.0:
        return m
    raise InvalidObjective(f"unknown measure {text!r}: use avg, max, min or pNN with "
                           f"0 <= NN <= 100 (e.g. p50, p99, p99.9)")


def measure(values: FloatArray, how: str) -> float:
    """Reduce per-job values by a measure; NaN entries are ignored (NaN if none is left)."""
    how = parse_measure(how)
    v = values[~np.isnan(values)]
    if v.size == 0:
        return float("nan")
    if how == "avg":
        return float(v.mean())
    if how == "max":
        return float(v.max())
    if how == "min":
        return float(v.min())
    return float(np.percentile(v, float(how[1:])))


def summary(
    result: SimulationResult, measures: tuple[str, ...] = ("avg", "p50", "p99", "max")
) -> dict[str, dict[str, float]]:
    """Every metric under every measure: ``{metric: {measure: value}}``. Per-job metrics
    count the jobs kept (``result.kept``: a dropped job has no value, as in Gavel's
    averages)."""
    out = {}
    kept = result.kept
    for name, metric in METRICS.items():
        values = metric.compute(result)
        if not metric.per_run and not kept.all():
            values = np.where(kept, values, np.nan)
        out[name] = {m: measure(values, m) for m in measures}
    return out
