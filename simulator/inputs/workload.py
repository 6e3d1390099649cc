"""Workloads: the jobs a simulation replays, validated once at the door.

A :class:`Workload` is a set of columns (NumPy arrays, one entry per job, sorted by
arrival) plus the :class:`~simulator.inputs.scaling.ScalingTable` its ``model`` column indexes.

Documented table schema (CSV, Parquet or a pandas DataFrame), one row per job:

=======================  ========  ==========================================================
column                   required  meaning
=======================  ========  ==========================================================
``arrival_s``            yes       submit time in seconds, non-decreasing down the rows
``gpus``                 yes       GPU demand (maximum useful GPUs), integer >= 1
``service_s``            yes       work in seconds on 1 GPU of the reference type, > 0
``job_id``               no        integer id (default: row number from 0)
``model``                no        a model of the scaling table (default ``linear``)
``min_gpus``             no        minimum GPUs, 1 <= min_gpus <= gpus (default 1)
``estimated_service_s``  no        what the scheduler believes ``service_s`` is (default: it)
``job_class``            no        best_effort, strict, soft or profiler (default: best_effort)
``deadlines_s``          no        SLO jobs: deadlines in s after arrival, ``-``-separated
``rewards``              no        SLO jobs: reward of meeting each deadline (0-100 scale)
``gpu_util``             no        sharing: a worker's GPU utilization alone, in (0, 1]
``gpu_mem_gib``          no        sharing: a worker's base GPU memory (gamma), GiB
``mem_surge_gib``        no        sharing: its memory surge (delta), GiB (0: fixed memory)
``mem_surge_p``          no        sharing: probability of the surge (p), in [0, 1]
=======================  ========  ==========================================================

The four sharing columns come together (:mod:`simulator.inputs.colocation`); without them jobs
never share GPUs.

Rows are numbered from 1, header excluded, in every error message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.errors import InvalidWorkload, located
from simulator.inputs.colocation import SHARING_COLUMNS, Interference, JobSharing
from simulator.inputs.files import read_data, to_numbers
from simulator.inputs.scaling import ScalingTable, TypeSpeeds, parametric_table
from simulator.inputs.slo import SLOs

__all__ = ["MAX_SECONDS", "PCS_TRACE_COLUMNS", "Workload", "read_pcs_trace", "read_table"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PCS_TRACE_COLUMNS: dict[str, str] = {
    "job_id": "app_id",
    "arrival_s": "submit_time",
    "service_s": "service",
    "gpus": "num_jobs",
    "model": "model_name",
}
"""How a PCS trace CSV's columns map onto the workload schema (``num_jobs`` is the GPU demand)."""


@dataclass(frozen=True, eq=False)
class Workload:
    """Jobs as parallel arrays, sorted by arrival. Build with :meth:`from_frame` or a loader."""

    job_id: IntArray
    arrival_s: FloatArray
    gpus: IntArray
    min_gpus: IntArray
    service_s: FloatArray
    estimated_service_s: FloatArray
    model: IntArray
    scaling: ScalingTable
    source: str = "workload"
    slos: SLOs | None = None
    type_speed: TypeSpeeds | None = None
    """Per-GPU-type speed of each model (heterogeneous clusters); None: the profile's."""
    sharing: JobSharing | None = None
    """Each job's worker requirements for sharing GPUs; None: jobs never share."""
    interference: Interference | None = None
    """Measured pairwise slowdown of models sharing a GPU; None: the profile's curves."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False  # a workload is an immutable value

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def duration_s(self) -> FloatArray:
        """Each job's wall-clock time at its full demand on the reference GPU, alone."""
        out: FloatArray = self.service_s / self.scaling.speed(self.model,
                                                              self.gpus.astype(np.float64))
        return out

    def head(self, n: int) -> Workload:
        """The first ``n`` jobs (PCS's ``-num_apps``)."""
        if n < 1:
            raise InvalidWorkload(f"{self.source}: the number of jobs must be >= 1 (got {n})")
        cut = {f.name: getattr(self, f.name)[:n] for f in fields(self)
               if isinstance(getattr(self, f.name), np.ndarray)}
        return replace(self, **cut, slos=self.slos.head(n) if self.slos else None,
                       sharing=self.sharing.take(slice(0, n)) if self.sharing else None)

    def to_frame(self) -> pd.DataFrame:
        """The workload in the documented table schema."""
        return pd.DataFrame({
            "job_id": self.job_id,
            "arrival_s": self.arrival_s,
            "gpus": self.gpus,
            "min_gpus": self.min_gpus,
            "service_s": self.service_s,
            "estimated_service_s": self.estimated_service_s,
            "model": np.asarray(self.scaling.models, dtype=object)[self.model],
            **(self.slos.columns() if self.slos else {}),
            **(self.sharing.columns() if self.sharing else {}),
        })

    def digest(self) -> str:
        """A content hash of the jobs and scaling table (keys seeds and cached evaluations)."""
        h = hashlib.sha256()
        for arr in (self.job_id, self.arrival_s, self.gpus, self.min_gpus, self.service_s,
                    self.estimated_service_s, self.model, self.scaling.speedup,
                    *((self.scaling.spread,) if self.scaling.spread is not None else ()),
                    *((self.slos.job_class, self.slos.deadlines_s, self.slos.rewards)
                      if self.slos else ()),
                    *((self.type_speed.speed,) if self.type_speed else ()),
                    *((self.type_speed.steps_per_s,)
                      if self.type_speed and self.type_speed.steps_per_s is not None else ()),
                    *(self.sharing.columns().values() if self.sharing else ()),
                    *((self.interference.slowdown,) if self.interference else ())):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update("\0".join(self.scaling.models).encode())
        return h.hexdigest()[:16]

    def check_fits(self, total_gpus: int, profile_name: str) -> None:
        """Reject jobs that ask for more GPUs than the cluster has."""
        bad = np.flatnonzero(self.gpus > total_gpus)
        if bad.size:
            i = int(bad[0])
            raise InvalidWorkload(located(
                self.source, row=i + 1, column="gpus", value=int(self.gpus[i]),
                problem=f"job needs more GPUs than cluster {profile_name!r} has ({total_gpus})",
                fix="use a larger profile, or cap or drop the job"))

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        scaling: ScalingTable | None = None,
        source: str = "DataFrame",
        columns: Mapping[str, str] | None = None,
        sort: bool = False,
    ) -> Workload:
        """Validate a table in the documented schema and build a workload.

        Args:
            df: one row per job.
            scaling: the table that ``model`` names refer to; default: the parametric models.
            source: what to call the input in error messages (a file path, say).
            columns: schema name -> the column name in ``df``, for foreign formats.
            sort: order the jobs by arrival (stably) instead of requiring sorted rows; errors
                still name the rows as given.

        Raises:
            InvalidWorkload: naming the source, row, column and bad value.
        """
        names = {k: k for k in _SCHEMA} | dict(columns or {})
        scaling = scaling if scaling is not None else parametric_table(64)
        col = _Columns(df, names, source)
        n = len(df)
        if n == 0:
            raise InvalidWorkload(f"{source}: the workload has no jobs")
        arrival = col.floats("arrival_s", lambda a: (a >= 0) & (a <= MAX_SECONDS), _UP_TO)
        bad = np.flatnonzero(np.diff(arrival) < 0) if not sort else np.zeros(0, np.int64)
        if bad.size:
            i = int(bad[0]) + 1
            raise InvalidWorkload(located(
                source, row=i + 1, column=names["arrival_s"], value=float(arrival[i]),
                problem=f"arrivals must not decrease (previous row has {float(arrival[i - 1])!r})",
                fix="sort the rows by arrival time"))
        service = col.floats("service_s", lambda a: (a > 0) & (a <= MAX_SECONDS), _ABOVE_0)
        gpus = col.ints("gpus", lambda a: a >= 1, ">= 1")
        min_gpus = (col.ints("min_gpus", lambda a: (a >= 1) & (a <= gpus), "in [1, gpus]")
                    if names["min_gpus"] in df else np.ones(n, np.int64))
        estimated = (col.floats("estimated_service_s", lambda a: (a > 0) & (a <= MAX_SECONDS),
                                _ABOVE_0)
                     if names["estimated_service_s"] in df else service.copy())
        job_id = (col.ints("job_id", lambda a: a >= 0, ">= 0")
                  if names["job_id"] in df else np.arange(n, dtype=np.int64))
        model = col.models(scaling) if names["model"] in df else np.full(
            n, scaling.index("linear") if "linear" in scaling.models else 0, np.int64)
        slos = (SLOs.from_columns(df[names["job_class"]], df.get(names["deadlines_s"]),
                                  df.get(names["rewards"]), source=source)
                if names["job_class"] in df else None)
        sharing = JobSharing.from_columns(df, source)
        order = np.argsort(arrival, kind="stable") if sort else np.arange(n)
        return cls(job_id[order], arrival[order], gpus[order], min_gpus[order], service[order],
                   estimated[order], model[order], scaling, source,
                   slos.take(order) if slos is not None and sort else slos,
                   sharing=sharing.take(order) if sharing is not None else None)


MAX_SECONDS = 1e12
"""The latest arrival and the longest service a job may have, in seconds (31,700 years): a
time past it (1e308, say) would overflow the simulator's sums to infinity."""
_UP_TO = f">= 0 and at most {MAX_SECONDS:g} s"
_ABOVE_0 = f"> 0 and at most {MAX_SECONDS:g} s"

_SCHEMA = ("job_id", "arrival_s", "gpus", "min_gpus", "service_s", "estimated_service_s", "model",
           "job_class", "deadlines_s", "rewards", *SHARING_COLUMNS)


class _Columns:
    """Reads and checks columns of one input table, naming the first bad cell."""

    def __init__(self, df: pd.DataFrame, names: Mapping[str, str], source: str) -> None:
        self.df, self.names, self.source = df, names, source

    def _raw(self, key: str) -> pd.Series:
        name = self.names[key]
        if name not in self.df:
            raise InvalidWorkload(located(self.source, column=name,
                                          problem="required column is missing",
                                          fix=f"columns present: {list(self.df.columns)}"))
        return self.df[name]

    def _fail(self, key: str, i: int, value: object, problem: str) -> InvalidWorkload:
        return InvalidWorkload(located(self.source, row=i + 1, column=self.names[key],
                                       value=value, problem=problem))

    def floats(self, key: str, ok: object, rule: str) -> FloatArray:
        raw = self._raw(key)
        values = to_numbers(raw).to_numpy(dtype=np.float64)
        good = np.isfinite(values) & ok(values)  # type: ignore[operator]
        if not good.all():
            i = int(np.flatnonzero(~good)[0])
            raise self._fail(key, i, raw.iloc[i], f"must be a finite number {rule}")
        return values

    def ints(self, key: str, ok: object, rule: str) -> IntArray:
        raw = self._raw(key)
        values = to_numbers(raw).to_numpy(dtype=np.float64)
        # integers a float holds exactly (beyond 2**53 it cannot tell them apart)
        good = (np.abs(values) <= 2.0**53) & (values == np.round(values))
        good &= ok(np.where(good, values, 0).astype(np.int64))  # type: ignore[operator]
        if not good.all():
            i = int(np.flatnonzero(~good)[0])
            raise self._fail(key, i, raw.iloc[i], f"must be an integer {rule}")
        return values.astype(np.int64)

    def models(self, scaling: ScalingTable) -> IntArray:
        raw = self._raw("model").astype(str)
        known = raw.isin(scaling.models).to_numpy()
        if not known.all():
            i = int(np.flatnonzero(~known)[0])
            shown = ", ".join(scaling.models[:8]) + (" ..." if len(scaling.models) > 8 else "")
            raise self._fail("model", i, raw.iloc[i],
                             f"unknown model; the scaling table knows {shown} (give a "
                             f"scaling table that defines it, e.g. --scaling-table)")
        return raw.map(scaling.index).to_numpy(dtype=np.int64)


def read_table(path: str | Path, *, scaling: ScalingTable | None = None) -> Workload:
    """Load a CSV or Parquet file in the documented schema."""
    path = Path(path)
    data = read_data(path, InvalidWorkload, "workload table")
    try:
        df = pd.read_parquet(data) if path.suffix == ".parquet" else pd.read_csv(data)
    except (OSError, ValueError) as exc:
        raise InvalidWorkload(f"{path}: cannot read workload table: {exc}") from exc
    return Workload.from_frame(df, scaling=scaling, source=str(path))


def read_pcs_trace(path: str | Path, *, scaling: ScalingTable) -> Workload:
    """Load a PCS/Philly trace CSV (``app_id, submit_time, service, num_jobs, ...``).

    ``num_jobs`` is the job's GPU demand and ``model_name`` must be a row of ``scaling``
    (PCS's ``scaling_tables.csv``).
    """
    data = read_data(path, InvalidWorkload, "PCS trace")
    try:
        df = pd.read_csv(data)
    except (OSError, ValueError) as exc:
        raise InvalidWorkload(f"{path}: cannot read PCS trace: {exc}") from exc
    return Workload.from_frame(df, scaling=scaling, source=str(path), columns=PCS_TRACE_COLUMNS)
