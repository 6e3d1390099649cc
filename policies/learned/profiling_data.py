"""Profiling data for the learned predictors: CSV schemas, loaders, validation, synthetic rows.

Holds the column schemas (:class:`Column`, :data:`UTILIZATION_COLUMNS`,
:data:`INTERFERENCE_COLUMNS`), the :class:`InvalidProfilingData` error, the CSV loaders
(:func:`read_utilization_profiles`, :func:`read_interference_profiles`), row validation
(:func:`validate_columns`) and the SYNTHETIC generators
(:func:`synthetic_utilization_profiles`, :func:`synthetic_interference_profiles`). The
predictors that train on these rows live in :mod:`policies.learned.predictors`.

Files users supply — CSV with a header row; extra columns are ignored; an optional text column
``source`` says where a row came from (``"synthetic"`` marks generated rows).

Utilization profiles (:func:`read_utilization_profiles`), one row per profiled job config:

==================  =============  =======================================================
column              unit           meaning
==================  =============  =======================================================
flops_g             GFLOP          forward-pass FLOPs of ONE sample (graph at batch 1), > 0
params_m            10⁶            trainable parameters, > 0
batch_size          samples        per-GPU batch size, integer >= 1
activations_m       10⁶            activation elements of one sample's forward pass, >= 0
conv_layers         count          Conv nodes in the graph, integer >= 0
linear_layers       count          Gemm / MatMul nodes, integer >= 0
recurrent_layers    count          LSTM / GRU / RNN nodes, integer >= 0
gpu_util            fraction       measured alone on one GPU (nvidia-smi % / 100), in (0, 1]
==================  =============  =======================================================

Interference profiles (:func:`read_interference_profiles`), one row per measured (worker,
partner) pair on one device; each unordered pair normally gives two rows, one per side:

==================  =============  =======================================================
column              unit           meaning
==================  =============  =======================================================
own_util            fraction       this worker's GPU utilization alone, in (0, 1]
partner_util        fraction       the partner's GPU utilization alone, in (0, 1]
own_mem_gib         GiB            this worker's GPU memory footprint alone, >= 0
partner_mem_gib     GiB            the partner's GPU memory footprint alone, >= 0
own_batch_size      samples        this worker's per-GPU batch size, integer >= 1
partner_batch_size  samples        the partner's per-GPU batch size, integer >= 1
gpu_memory_gib      GiB            the device's memory capacity, > 0
slowdown            ratio          (t' − t) / t: co-located vs alone iteration time, > −1
==================  =============  =======================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator import libm
from simulator.errors import ParetoSearchError, located
from simulator.inputs.files import read_data, to_numbers

__all__ = [
    "INTERFERENCE_COLUMNS", "SYNTHETIC_SLOWDOWN_NOISE", "SYNTHETIC_UTIL_NOISE",
    "UTILIZATION_COLUMNS", "UTIL_FLOOR", "Column", "InvalidProfilingData",
    "read_interference_profiles", "read_utilization_profiles", "synthetic_interference_profiles",
    "synthetic_utilization_profiles", "validate_columns",
]

FloatArray = npt.NDArray[np.float64]
UTIL_FLOOR = 1e-3
"""Smallest utilization a prediction is clipped to (predictions lie in (0, 1])."""


class InvalidProfilingData(ParetoSearchError, ValueError):
    """A profiling CSV, DataFrame or saved predictor that cannot train or restore a predictor."""


@dataclass(frozen=True)
class Column:
    """One numeric column of a profiling file: its unit, meaning and allowed range."""

    name: str
    unit: str
    meaning: str
    low: float
    high: float = math.inf
    low_open: bool = False
    integer: bool = False

    def problem(self, values: pd.Series) -> tuple[int, str] | None:
        """The first bad row (0-based) and what is wrong with it, or ``None``."""
        lo = "(" if self.low_open else "["
        hi = "]" if math.isfinite(self.high) else ")"
        below = values <= self.low if self.low_open else values < self.low
        checks = [
            (~np.isfinite(values), "must be a finite number"),
            (below | (values > self.high),
             f"must lie in {lo}{self.low:g}, {self.high:g}{hi} ({self.unit}: {self.meaning})"),
        ]
        if self.integer:
            checks.append((values % 1 != 0, "must be a whole number"))
        for mask, problem in checks:
            bad = np.flatnonzero(np.asarray(mask))
            if bad.size:
                return int(bad[0]), problem
        return None


UTILIZATION_COLUMNS = (
    Column("flops_g", "GFLOP", "forward-pass FLOPs of one sample", 0.0, low_open=True),
    Column("params_m", "10^6", "trainable parameters", 0.0, low_open=True),
    Column("batch_size", "samples", "per-GPU batch size", 1.0, integer=True),
    Column("activations_m", "10^6", "activation elements per sample", 0.0),
    Column("conv_layers", "count", "Conv nodes", 0.0, integer=True),
    Column("linear_layers", "count", "Gemm/MatMul nodes", 0.0, integer=True),
    Column("recurrent_layers", "count", "LSTM/GRU/RNN nodes", 0.0, integer=True),
    Column("gpu_util", "fraction", "GPU utilization alone; divide percentages by 100",
           0.0, 1.0, low_open=True),
)
"""Features then target of the utilization profiles."""

INTERFERENCE_COLUMNS = (
    Column("own_util", "fraction", "own GPU utilization alone", 0.0, 1.0, low_open=True),
    Column("partner_util", "fraction", "partner's GPU utilization alone", 0.0, 1.0,
           low_open=True),
    Column("own_mem_gib", "GiB", "own GPU memory footprint", 0.0),
    Column("partner_mem_gib", "GiB", "partner's GPU memory footprint", 0.0),
    Column("own_batch_size", "samples", "own per-GPU batch size", 1.0, integer=True),
    Column("partner_batch_size", "samples", "partner's per-GPU batch size", 1.0, integer=True),
    Column("gpu_memory_gib", "GiB", "device memory capacity", 0.0, low_open=True),
    Column("slowdown", "ratio", "(t' - t) / t, co-located vs alone", -1.0, low_open=True),
)
"""Features then target of the pairwise interference profiles."""


def validate_columns(frame: pd.DataFrame, columns: tuple[Column, ...],
                     source: str) -> FloatArray:
    """The named columns as a float matrix; raise naming the first bad file/row/column/value."""
    out = np.empty((len(frame), len(columns)))
    for j, column in enumerate(columns):
        if column.name not in frame:
            raise InvalidProfilingData(located(
                source, column=column.name, problem="required column is missing",
                fix=f"add it ({column.unit}: {column.meaning}); present: {list(frame.columns)}"))
        raw = frame[column.name]
        values = to_numbers(raw).astype(float)
        bad = np.flatnonzero(values.isna().to_numpy())
        found = (int(bad[0]), "must be a number") if bad.size else column.problem(values)
        if found is not None:
            i, problem = found
            raise InvalidProfilingData(located(
                source, row=i + 1, column=column.name, value=raw.iloc[i], problem=problem,
                fix="correct or drop this row"))
        out[:, j] = values.to_numpy()
    return out


def _read(path: str | Path, columns: tuple[Column, ...], what: str) -> pd.DataFrame:
    data = read_data(path, InvalidProfilingData, what)
    try:
        frame = pd.read_csv(data)
    except (OSError, ValueError) as exc:
        raise InvalidProfilingData(f"{path}: cannot read {what} as CSV: {exc}") from exc
    values = validate_columns(frame, columns, str(path))
    out = pd.DataFrame(values, columns=[c.name for c in columns])
    if "source" in frame:
        out["source"] = frame["source"].astype(str).to_numpy()
    return out


def read_utilization_profiles(path: str | Path) -> pd.DataFrame:
    """Load and validate a utilization-profile CSV (schema in the module docstring).

    Raises:
        InvalidProfilingData: unreadable file, missing column, or a bad value (names the
            file, 1-based data row, column and value).
    """
    return _read(path, UTILIZATION_COLUMNS, "utilization profiles")


def read_interference_profiles(path: str | Path) -> pd.DataFrame:
    """Load and validate a pairwise interference-profile CSV (schema in the module docstring).

    Raises:
        InvalidProfilingData: as :func:`read_utilization_profiles`.
    """
    return _read(path, INTERFERENCE_COLUMNS, "interference profiles")

SYNTHETIC_UTIL_NOISE = 0.05
"""σ of the multiplicative log-normal noise on synthetic utilization."""
SYNTHETIC_SLOWDOWN_NOISE = 0.02
"""σ of the additive normal noise on synthetic slowdown."""


def synthetic_utilization_profiles(n: int, rng: np.random.Generator, *,
                                   noise: float = SYNTHETIC_UTIL_NOISE) -> pd.DataFrame:
    """SYNTHETIC utilization profiles: invented for tests and demos, NOT measurements.

    Utilization saturates in the batch's forward FLOPs, slowed by recurrent layers:
    ``0.05 + 0.93 (1 − exp(−flops_g · batch_size / (60 (1 + 0.5 recurrent_layers))))``, times
    ``exp(noise · N(0, 1))``, clipped to ``[0.001, 1]``. Every row has ``source="synthetic"``.
    """
    flops = libm.exp(rng.uniform(math.log(0.01), math.log(20.0), n))
    batch = rng.choice(np.array([8, 16, 32, 64, 128, 256]), n)
    recurrent = np.where(rng.random(n) < 0.8, 0, rng.integers(1, 5, n))
    load = flops * batch / (60.0 * (1.0 + 0.5 * recurrent))
    util = 0.05 + 0.93 * (1.0 - libm.exp(-load))
    return pd.DataFrame({
        "flops_g": flops,
        "params_m": flops * libm.exp(rng.normal(1.8, 0.8, n)),
        "batch_size": batch,
        "activations_m": flops * libm.exp(rng.normal(1.0, 0.5, n)),
        "conv_layers": rng.integers(0, 160, n),
        "linear_layers": rng.integers(1, 12, n),
        "recurrent_layers": recurrent,
        "gpu_util": np.clip(util * libm.exp(noise * rng.standard_normal(n)), UTIL_FLOOR, 1.0),
        "source": "synthetic",
    })


def _horus_rtx2080_slowdown(u: FloatArray) -> FloatArray:
    """Horus Fig. 4 RTX 2080 fit, read as JCT ratio t'/t for u >= 1; slowdown = ratio − 1.

    At u = 1 the ratio is 1.164 and at u = 1.6 it is 2.98, the paper's "1.5x–3x" under
    over-commitment. Below 100 % the slowdown is linear from 0 at u = 0 (continuous at 1).
    """
    ratio = 1.16664 * u**2 - 0.00302 * u + 4e-5
    at_one = 1.16664 - 0.00302 + 4e-5 - 1.0
    return np.where(u <= 1.0, at_one * u, ratio - 1.0)


def synthetic_interference_profiles(n: int, rng: np.random.Generator, *,
                                    noise: float = SYNTHETIC_SLOWDOWN_NOISE) -> pd.DataFrame:
    """SYNTHETIC pairwise interference profiles: invented for tests and demos, NOT measured.

    With ``u = own_util + partner_util``: ``slowdown = s(u) · (0.5 + partner_util / u)
    + 0.1 · (own_mem_gib + partner_mem_gib) / gpu_memory_gib + noise · N(0, 1)``, floored at
    0, where ``s`` is Horus's RTX 2080 curve (linear below u = 1, quadratic above). Every row
    has ``source="synthetic"``.
    """
    own, partner = rng.uniform(0.05, 1.0, (2, n))
    cap = rng.choice(np.array([8.0, 11.0, 24.0]), n)
    own_mem, partner_mem = rng.uniform(0.05, 0.45, (2, n)) * cap
    batches = np.array([8, 16, 32, 64, 128, 256])
    u = own + partner
    slowdown = (_horus_rtx2080_slowdown(u) * (0.5 + partner / u)
                + 0.1 * (own_mem + partner_mem) / cap + noise * rng.standard_normal(n))
    return pd.DataFrame({
        "own_util": own, "partner_util": partner,
        "own_mem_gib": own_mem, "partner_mem_gib": partner_mem,
        "own_batch_size": rng.choice(batches, n), "partner_batch_size": rng.choice(batches, n),
        "gpu_memory_gib": cap, "slowdown": np.maximum(slowdown, 0.0), "source": "synthetic",
    })
