"""Loaders for more real trace formats, each mapped onto the workload schema.

The four CSV formats carry durations at the job's own GPU count, not per-GPU work, so jobs
get the ``linear`` scaling model and ``service_s = duration x GPUs`` (their runtime at full
demand is the trace's duration). Rows are ordered by submit time (stably); errors name the
file's rows. Jobs that never ran (zero GPUs or zero duration: CPU-only jobs, instant failures)
are dropped and the workload's source says how many; negative values are errors.

* **Chronus** (``trace_job_Philly_*.csv``, UniSched's SLO workloads): ``job_id, user, num_gpu,
  submit_time, iterations, model_name, duration, interval, expect_time_list,
  expect_value_list, best_effort, job_type``. ``job_type`` strict / soft / best becomes the job
  class; ``expect_time_list`` (``-``-separated, s after submit) the deadlines; the
  ``expect_value_list`` rewards are rescaled so that each job's first step is worth 100.
* **Philly, as the Pollux and Sia simulators use it**: ``timestamp, duration, num_gpus,
  gpu_time, cluster``, one row per job, timestamps like ``2017-10-09 07:01:55``; arrivals are
  seconds after the first timestamp.
* **Helios** ``cluster_log.csv``: ``job_id, user, vc, gpu_num, cpu_num, node_num, state,
  submit_time, start_time, end_time, duration, queue``; submit times as datetimes or epoch
  seconds.
* **Tiresias** (the trace of Tiresias's simulator, SymbioticLab/Tiresias): ``job_id, num_gpu,
  submit_time, iterations, model_name, duration, interval``; times in seconds, ids the file's.
  Chronus's traces extend this format (told apart by their SLO columns).
* **Gavel** ``.trace`` (:func:`read_gavel_trace`): tab-separated, no header, one job a line:
  :data:`GAVEL_COLUMNS` (8-column traces lack ``priority_weight`` and ``SLO``). Jobs are
  counted in steps; Gavel's measured throughputs turn them into time, one model per
  ``(job type, scale factor)`` (:meth:`~simulator.inputs.throughput.ThroughputTable.entry_models`),
  so a job on its ``scale_factor`` GPUs of type ``t`` runs ``total_steps / throughput`` s, as
  in Gavel's simulator. Jobs keep the file's order, and job ids are Gavel's (row - 1).
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import InvalidWorkload, located
from simulator.inputs.files import read_data, to_numbers
from simulator.inputs.scaling import PARAMETRIC_MODELS, ScalingTable, parametric_table
from simulator.inputs.throughput import ThroughputTable, model_name
from simulator.inputs.workload import PCS_TRACE_COLUMNS, Workload, read_pcs_trace, read_table

__all__ = ["GAVEL_COLUMNS", "integer_column", "number_column", "read_chronus",
           "read_csv_columns", "read_gavel_trace", "read_helios", "read_philly_jobs",
           "read_tiresias", "read_trace"]

GAVEL_COLUMNS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
                 "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time")
"""The columns of a Gavel trace line (Gavel's ``utils.parse_trace``), tab-separated."""


def read_csv_columns(path: str | Path, required: tuple[str, ...], what: str) -> pd.DataFrame:
    """A CSV ``what`` with its ``required`` columns, or an error naming the file and column."""
    data = read_data(path, InvalidWorkload, what)
    try:
        df = pd.read_csv(data)
    except (OSError, ValueError) as exc:
        raise InvalidWorkload(f"{path}: cannot read {what}: {exc}") from exc
    missing = [c for c in required if c not in df]
    if missing:
        raise InvalidWorkload(located(str(path), column=missing[0],
                                      problem=f"required column of a {what} is missing",
                                      fix=f"columns present: {list(df.columns)}"))
    return df


def number_column(df: pd.DataFrame, column: str, src: str) -> pd.Series:
    values = to_numbers(df[column])
    bad = np.flatnonzero(values.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise InvalidWorkload(located(src, row=i + 1, column=column, value=df[column].iloc[i],
                                      problem="must be a number"))
    return values


def integer_column(df: pd.DataFrame, column: str, src: str, low: int, high: float = np.inf
              ) -> pd.Series:
    """``column`` as whole numbers in ``[low, high]``, naming the first cell that is not."""
    values = number_column(df, column, src)
    whole = np.isfinite(values) & (values == np.round(values))
    bad = np.flatnonzero(~(whole & (values >= low) & (values <= high)).to_numpy())
    if bad.size:
        i = int(bad[0])
        rule = f">= {low}" if high == np.inf else f"in [{low}, {int(high)}]"
        raise InvalidWorkload(located(src, row=i + 1, column=column, value=df[column].iloc[i],
                                      problem=f"must be an integer {rule}"))
    return values.astype(np.int64)


def _seconds(df: pd.DataFrame, column: str, src: str) -> pd.Series:
    """Datetimes or epoch seconds, as seconds after the earliest."""
    raw = df[column]
    numeric = to_numbers(raw)
    if numeric.notna().all():
        offsets: pd.Series = numeric - numeric.min()
        return offsets
    # in UTC: a cell with a time zone among cells without is compared on one clock
    stamps = pd.to_datetime(raw, errors="coerce", format="mixed", utc=True)
    bad = np.flatnonzero(stamps.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise InvalidWorkload(located(src, row=i + 1, column=column, value=raw.iloc[i],
                                      problem="expected a time like 2017-10-09 07:01:55"))
    seconds: pd.Series = (stamps - stamps.min()).dt.total_seconds()
    return seconds


def _build(frame: pd.DataFrame, gpus: str, duration: str, src: str,
           scaling: ScalingTable | None) -> Workload:
    """Drop jobs that never ran, derive ``service_s``, validate, order by arrival.

    ``frame`` uses the file's column names for GPUs and duration, so errors name them.
    """
    for column in (gpus, duration):
        bad = np.flatnonzero((frame[column] < 0).to_numpy())
        if bad.size:
            i = int(bad[0])
            raise InvalidWorkload(located(src, row=i + 1, column=column,
                                          value=frame[column].iloc[i], problem="must be >= 0"))
    ran = ((frame[gpus] > 0) & (frame[duration] > 0)).to_numpy()
    if not ran.any():
        raise InvalidWorkload(f"{src}: no job with GPUs and a positive duration")
    frame = frame[ran].reset_index(drop=True)
    frame["service_s"] = frame[duration] * frame[gpus]
    dropped = int((~ran).sum())
    name = f"{src} ({dropped} jobs without GPUs or duration dropped)" if dropped else src
    return Workload.from_frame(frame, scaling=scaling or parametric_table(64), source=name,
                               columns={"gpus": gpus}, sort=True)


def read_chronus(path: str | Path, *, scaling: ScalingTable | None = None,
                 time_unit_s: float = 60.0) -> Workload:
    """A Chronus trace with its SLO classes, deadlines and reward steps.

    Chronus's traces count time in minutes, whatever ``../shared/data/README.md`` says: its
    simulator's hour is 60 units and its checkpoint + resume overhead 0.1 + 0.4 units (30 s),
    and read as minutes the Philly MIX1 trace spans 14 days with a median job of an hour (as
    seconds: 5.6 hours and one minute). Submit times, durations and deadlines are multiplied
    by ``time_unit_s`` (pass 1 for a trace written in seconds).

    Jobs are of model ``linear`` unless ``scaling`` knows their ``model_name`` or has spread
    speeds (Chronus's ``model_info.json``: :mod:`simulator.inputs.model_info`): then each
    job is of its own model, and a ``model_name`` the table lacks is an error.
    """
    src = str(path)
    if not time_unit_s > 0:
        raise InvalidWorkload(f"{src}: time_unit_s must be > 0 (got {time_unit_s})")
    df = read_csv_columns(path, ("job_id", "num_gpu", "submit_time", "duration", "expect_time_list",
                      "expect_value_list", "job_type"), "Chronus trace")
    gpus = number_column(df, "num_gpu", src)
    classes = df["job_type"].map({"strict": "strict", "soft": "soft", "best": "best_effort"})
    unknown = np.flatnonzero(classes.isna().to_numpy())
    if unknown.size:
        i = int(unknown[0])
        raise InvalidWorkload(located(src, row=i + 1, column="job_type",
                                      value=df["job_type"].iloc[i],
                                      problem="expected strict, soft or best"))
    slo = classes != "best_effort"
    # rewards relative to the first step, on UniSched's 0-100 scale
    rewards = [_scaled(cell, None) if is_slo else ""
               for cell, is_slo in zip(df["expect_value_list"], slo, strict=True)]
    deadlines = [_scaled(cell, time_unit_s) if is_slo else ""
                 for cell, is_slo in zip(df["expect_time_list"], slo, strict=True)]
    frame = pd.DataFrame({
        "job_id": df["job_id"], "arrival_s": number_column(df, "submit_time", src) * time_unit_s,
        "num_gpu": gpus, "duration": number_column(df, "duration", src) * time_unit_s,
        "model": _chronus_models(df, scaling, src), "job_class": classes,
        "deadlines_s": deadlines, "rewards": rewards,
    })
    return _build(frame, "num_gpu", "duration", src, scaling)


def _chronus_models(df: pd.DataFrame, scaling: ScalingTable | None, src: str) -> Any:
    """Each job's model: its ``model_name`` where ``scaling`` knows the trace's models or has
    spread speeds (``model_info.json``), ``linear`` where it has neither."""
    if scaling is None or "model_name" not in df:
        return "linear"
    names = df["model_name"].astype(str)
    known = names.isin(scaling.models).to_numpy()
    if not known.any() and scaling.spread is None:
        return "linear"
    if not known.all():
        i = int(np.flatnonzero(~known)[0])
        raise InvalidWorkload(located(
            src, row=i + 1, column="model_name", value=names.iloc[i],
            problem="not a model of the scaling table",
            fix="give every model of the trace an entry in the model_info file (models: "
                f"{', '.join(m for m in scaling.models if m not in PARAMETRIC_MODELS)})"))
    return names.to_numpy()


def _scaled(cell: object, factor: float | None) -> str:
    """A ``-``-separated list of numbers, each times ``factor`` (None: 100 / the first one).

    Cells that are not numbers pass through unchanged, so the schema check names them.
    """
    try:
        values = [float(v) for v in str(cell).split("-")]
        k = 100.0 / values[0] if factor is None else factor
        return "-".join(np.format_float_positional(v * k, trim="-") for v in values)
    except (ValueError, ZeroDivisionError):
        return str(cell)


def read_philly_jobs(path: str | Path, *, scaling: ScalingTable | None = None) -> Workload:
    """The Philly job CSV of the Pollux / Sia simulators (one row per job)."""
    src = str(path)
    df = read_csv_columns(path, ("timestamp", "duration", "num_gpus"), "Philly job CSV")
    frame = pd.DataFrame({"arrival_s": _seconds(df, "timestamp", src),
                          "num_gpus": number_column(df, "num_gpus", src),
                          "duration": number_column(df, "duration", src), "model": "linear"})
    return _build(frame, "num_gpus", "duration", src, scaling)


def read_helios(path: str | Path, *, scaling: ScalingTable | None = None) -> Workload:
    """A Helios ``cluster_log.csv``: the GPU jobs that ran, by submit time (ids = file rows)."""
    src = str(path)
    df = read_csv_columns(path, ("job_id", "gpu_num", "submit_time", "duration"),
                          "Helios cluster log")
    frame = pd.DataFrame({"job_id": np.arange(len(df)),
                          "arrival_s": _seconds(df, "submit_time", src),
                          "gpu_num": number_column(df, "gpu_num", src),
                          "duration": number_column(df, "duration", src), "model": "linear"})
    return _build(frame, "gpu_num", "duration", src, scaling)


def read_tiresias(path: str | Path, *, scaling: ScalingTable | None = None) -> Workload:
    """A trace of Tiresias's simulator: jobs by submit time (stably), ids from ``job_id``."""
    src = str(path)
    df = read_csv_columns(path, ("job_id", "num_gpu", "submit_time", "duration"), "Tiresias trace")
    frame = pd.DataFrame({"job_id": df["job_id"],
                          "arrival_s": number_column(df, "submit_time", src),
                          "num_gpu": number_column(df, "num_gpu", src),
                          "duration": number_column(df, "duration", src), "model": "linear"})
    return _build(frame, "num_gpu", "duration", src, scaling)


def _gavel_lines(path: str | Path) -> pd.DataFrame:
    """A Gavel trace's cells as text, one row per line, in :data:`GAVEL_COLUMNS` (8-column
    lines get Gavel's defaults: priority weight 1, no SLO)."""
    data = read_data(path, InvalidWorkload, "Gavel trace")
    try:
        lines = data.getvalue().decode("utf-8-sig").splitlines()  # a BOM is no cell
    except UnicodeDecodeError as exc:
        raise InvalidWorkload(f"{path}: cannot read Gavel trace: {exc}") from exc
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise InvalidWorkload(f"{path}: the Gavel trace has no jobs")
    rows = []
    for i, line in enumerate(lines):
        cells = line.split("\t")
        if len(cells) == 8:
            cells = [*cells[:7], "1", "-1", cells[7]]
        if len(cells) != len(GAVEL_COLUMNS):
            raise InvalidWorkload(located(
                str(path), row=i + 1, value=line[:80],
                problem=f"expected 10 tab-separated columns ({', '.join(GAVEL_COLUMNS)}) or "
                        f"8 (without priority_weight and SLO), found {len(cells)} in line"))
        rows.append(cells)
    return pd.DataFrame(rows, columns=list(GAVEL_COLUMNS))


def _check_entries(df: pd.DataFrame, scale: pd.Series, table: ThroughputTable, src: str) -> None:
    """Every ``(job_type, scale_factor)`` must be one Gavel measured."""
    scales: dict[str, list[int]] = {}
    for job, s in table.entries:
        scales.setdefault(job, []).append(s)
    for i, (job, s) in enumerate(zip(df["job_type"], scale, strict=True)):
        if job not in scales:
            close = difflib.get_close_matches(job, scales, n=3)
            raise InvalidWorkload(located(
                src, row=i + 1, column="job_type", value=job,
                problem="job type not in the throughput table",
                fix=f"closest: {close}" if close else f"it has: {', '.join(scales)}"))
        if s not in scales[job]:
            raise InvalidWorkload(located(
                src, row=i + 1, column="scale_factor", value=df["scale_factor"].iloc[i],
                problem=f"the throughput table has no entry for {job!r} on this many GPUs",
                fix=f"it has scale factors {scales[job]}"))


def read_gavel_trace(path: str | Path, throughputs: ThroughputTable, *,
                     reference: str = "v100") -> Workload:
    """A Gavel ``.trace``, timed by Gavel's measured ``throughputs`` (module docstring).

    A job of type ``X`` on ``scale_factor`` = ``s`` GPUs needs exactly ``s`` (``min_gpus =
    gpus = s``, Gavel's gangs) and has ``service_s = total_steps / isolated[(X, 1),
    reference]``. ``priority_weight`` and ``SLO`` are checked to be numbers but not used.

    Raises:
        InvalidWorkload: naming the file, row (= Gavel's job id + 1), column and value: a
            line without 8 or 10 columns, a non-number, ``total_steps`` or ``scale_factor``
            not an integer >= 1, a ``(job_type, scale_factor)`` the table lacks, or a
            negative or decreasing ``arrival_time``.
    """
    src = str(path)
    df = _gavel_lines(path)
    steps = integer_column(df, "total_steps", src, 1)
    scale = integer_column(df, "scale_factor", src, 1)
    integer_column(df, "needs_data_dir", src, 0, 1)
    for column in ("priority_weight", "SLO"):
        number_column(df, column, src)
    arrival = number_column(df, "arrival_time", src)
    _check_entries(df, scale, throughputs, src)
    entries = [(str(j), int(s)) for j, s in zip(df["job_type"], scale, strict=True)]
    distinct = sorted(set(entries), key=lambda e: throughputs.index(*e))
    scaling, speeds = throughputs.entry_models(distinct, reference)
    ref = throughputs.gpu_types.index(reference)
    one_gpu = np.array([throughputs.isolated[throughputs.index(j), ref] for j, _ in entries])
    frame = pd.DataFrame({"job_id": np.arange(len(df)), "arrival_time": arrival,
                          "scale_factor": scale, "min_gpus": scale,
                          "service_s": steps.to_numpy() / one_gpu,
                          "model": [model_name(*e) for e in entries]})
    wl = Workload.from_frame(frame, scaling=scaling, source=src,
                             columns={"arrival_s": "arrival_time", "gpus": "scale_factor"})
    return replace(wl, type_speed=speeds,
                   interference=throughputs.interference(scaling, entries=distinct))


_FORMATS = (  # (columns that identify the format, loader), most specific first
    (set(PCS_TRACE_COLUMNS.values()), read_pcs_trace),
    ({"expect_time_list", "expect_value_list", "job_type"}, read_chronus),
    ({"gpu_num", "submit_time", "duration", "vc"}, read_helios),
    ({"timestamp", "duration", "num_gpus"}, read_philly_jobs),
    ({"job_id", "num_gpu", "submit_time", "duration"}, read_tiresias),
)


def read_trace(path: str | Path, *, scaling: ScalingTable | None = None,
               throughputs: ThroughputTable | None = None) -> Workload:
    """Load a trace in any supported format, told apart by its suffix and columns.

    CSV: PCS/Philly traces (``app_id, ..., num_jobs``), Chronus, Helios ``cluster_log.csv``,
    the Pollux/Sia Philly job CSV and Tiresias's traces are recognised by their columns; any
    other CSV, and Parquet, must follow the workload schema. ``scaling`` defaults to the
    parametric models (PCS traces need PCS's ``scaling_tables.csv``). A ``.trace`` is Gavel's
    format and needs Gavel's ``throughputs`` (:func:`read_gavel_trace`; ``scaling`` does not apply).
    """
    path = Path(path)
    if path.suffix == ".trace":
        if throughputs is None:
            raise InvalidWorkload(f"{path}: a Gavel .trace counts jobs in steps and needs "
                                  "Gavel's measured throughputs to time them: pass "
                                  "throughputs= (on the command line: --gavel THROUGHPUTS, "
                                  "e.g. simulation_throughputs.json)")
        return read_gavel_trace(path, throughputs)
    if path.suffix == ".csv":
        data = read_data(path, InvalidWorkload, "trace")
        try:
            header = set(pd.read_csv(data, nrows=0).columns)
        except (OSError, ValueError) as exc:
            raise InvalidWorkload(f"{path}: cannot read trace: {exc}") from exc
        for columns, loader in _FORMATS:
            if columns <= header:
                return loader(path, scaling=scaling or parametric_table(64))
    elif path.suffix != ".parquet":
        raise InvalidWorkload(f"{path}: unsupported trace format {path.suffix!r}; give a .csv "
                              "(a supported trace format or the workload schema), a .parquet "
                              "or a Gavel .trace")
    return read_table(path, scaling=scaling)
