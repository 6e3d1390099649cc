"""Sharing GPUs between jobs: what a worker needs, and how much co-located workers slow down.

A job that may share GPUs carries, per worker (SPEC §1, §3.5-3.6):

- ``gpu_util``: the fraction of one GPU's compute it keeps busy alone (Horus's GPU
  utilization; OJPP's compute requirement alpha), in (0, 1];
- memory ``<gamma, delta, p>`` in GiB (OJPP §3.2): ``gamma`` always, plus a surge ``delta``
  with probability ``p``. Fixed memory (Horus eq. 2) is ``delta = 0``.

Where workers of several jobs share a device, each slows down (SPEC §1, §3.5-3.6):

- from a **pairwise interference matrix** (OJPP eq. 6; Gavel's measured co-location
  throughputs are one) when the workload has one: worker ``i``'s slowdown is the sum over its
  partners ``q`` of ``slowdown[model_i, model_q, type]``. The matrix is measured on pairs; the
  sum is this project's extension to three or more workers on a device;
- otherwise from the device's **cumulative utilization** ``u`` (Horus §3.2): linear up to 100 %,
  quadratic above, coefficients per GPU type in the cluster profile; every worker on the
  device suffers ``f(u)``;
- plus, whenever two or more workers on the device surge at once (a memory collision, OJPP
  eq. 4), the profile's ``collision_slowdown`` for every worker there.

A synchronous multi-worker job runs at its slowest worker: its rate is divided by
``1 + max`` slowdown over its workers. A worker alone on a device has no slowdown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.errors import InvalidWorkload, located
from simulator.inputs.files import to_numbers

__all__ = ["SHARING_COLUMNS", "Interference", "JobSharing", "SlowdownCurve",
           "collision_probability", "fill_unmeasured"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

SHARING_COLUMNS = ("gpu_util", "gpu_mem_gib", "mem_surge_gib", "mem_surge_p")
"""Workload table columns that describe each job's workers for sharing (all or none)."""


def collision_probability(p: FloatArray) -> float:
    """OJPP eq. 4: the probability that two or more of the workers surge at once.

    ``tau = 1 - prod(1 - p_i) - sum_i p_i prod_{s != i} (1 - p_s)``, computed without
    dividing by ``1 - p_i`` (a worker that always surges is allowed).
    """
    q = 1.0 - np.asarray(p, dtype=np.float64)
    none = float(np.prod(q))
    exactly_one = 0.0
    for i in range(q.shape[0]):
        exactly_one += (1.0 - q[i]) * float(np.prod(np.delete(q, i)))
    return max(0.0, 1.0 - none - exactly_one)


@dataclass(frozen=True, eq=False)
class JobSharing:
    """Per-job worker requirements for sharing GPUs (columns of :data:`SHARING_COLUMNS`)."""

    gpu_util: FloatArray
    mem_gib: FloatArray
    surge_gib: FloatArray
    surge_p: FloatArray

    def __post_init__(self) -> None:
        for arr in (self.gpu_util, self.mem_gib, self.surge_gib, self.surge_p):
            arr.flags.writeable = False

    def take(self, rows: IntArray | slice) -> JobSharing:
        """The requirements of the given rows."""
        return JobSharing(self.gpu_util[rows], self.mem_gib[rows], self.surge_gib[rows],
                          self.surge_p[rows])

    def columns(self) -> dict[str, FloatArray]:
        """The table columns (:data:`SHARING_COLUMNS`)."""
        return dict(zip(SHARING_COLUMNS, (self.gpu_util, self.mem_gib, self.surge_gib,
                                          self.surge_p), strict=True))

    @classmethod
    def from_columns(cls, df: pd.DataFrame, source: str) -> JobSharing | None:
        """Validate the sharing columns of a workload table; None if it has none."""
        present = [c for c in SHARING_COLUMNS if c in df]
        if not present:
            return None
        if len(present) < len(SHARING_COLUMNS):
            missing = [c for c in SHARING_COLUMNS if c not in df]
            raise InvalidWorkload(located(source, column=missing[0],
                                          problem="sharing columns come together",
                                          fix=f"give all of {list(SHARING_COLUMNS)} or none"))
        rules = {"gpu_util": (0.0, 1.0, "in (0, 1]"), "gpu_mem_gib": (0.0, np.inf, ">= 0"),
                 "mem_surge_gib": (0.0, np.inf, ">= 0"), "mem_surge_p": (0.0, 1.0, "in [0, 1]")}
        out = []
        for name, (low, high, rule) in rules.items():
            raw = df[name]
            values = to_numbers(raw).to_numpy(dtype=np.float64)
            v = np.nan_to_num(values, nan=-1.0)
            good = np.isfinite(values) & (v >= low) & (v <= high)
            if name == "gpu_util":
                good &= v > 0
            if not good.all():
                i = int(np.flatnonzero(~good)[0])
                raise InvalidWorkload(located(source, row=i + 1, column=name,
                                              value=raw.iloc[i],
                                              problem=f"must be a finite number {rule}"))
            out.append(values)
        return cls(*out)


@dataclass(frozen=True, eq=False)
class Interference:
    """Measured pairwise slowdown, per GPU type.

    Attributes:
        types: GPU type names (last axis).
        slowdown: ``(models, models, types)``: ``(t_colocated - t_alone) / t_alone`` of a worker
            of the row's model sharing a device with one worker of the column's model, >= 0.
    """

    types: tuple[str, ...]
    slowdown: FloatArray

    def __post_init__(self) -> None:
        s = self.slowdown
        if s.ndim != 3 or s.shape[0] != s.shape[1] or s.shape[2] != len(self.types):
            raise InvalidWorkload(f"interference: expected a (models, models, "
                                  f"{len(self.types)}) array, got shape {s.shape}")
        if not (np.isfinite(s).all() and (s >= 0).all()):
            raise InvalidWorkload("interference: slowdowns must be finite and >= 0")
        s.flags.writeable = False

    def columns(self, types: tuple[str, ...], source: str) -> FloatArray:
        """The ``(models, models, len(types))`` slowdowns in the order of ``types``."""
        missing = [t for t in types if t not in self.types]
        if missing:
            raise InvalidWorkload(f"{source}: no interference measured on GPU type "
                                  f"{missing[0]!r}; the matrix covers {list(self.types)}")
        return self.slowdown[:, :, [self.types.index(t) for t in types]]


@dataclass(frozen=True)
class SlowdownCurve:
    """Horus §3.2: slowdown of every worker on a device from its cumulative utilization ``u``.

    Horus fits the JCT ratio ``t_colocated / t_alone`` against ``u`` (a fraction) once the GPU
    is over-committed: ``f(u) = a u^2 + b u + c`` (GTX 1080: 1.32198, -0.00728, 6e-5; RTX 2080:
    1.16664, -0.00302, 4e-5), which spans the 1.5-3x it reports for u up to ~1.6. Read as a
    ratio, the slowdown above 100 % is ``f(u) - 1``. Below, the relation is linear; Horus gives
    no coefficients, so by default the slowdown rises linearly from 0 at ``u = 0`` to
    ``f(1) - 1`` at ``u = 1`` (continuous; pairs below 50 % each stay under 1.5x, as Horus
    observes). ``linear`` overrides it with ``slowdown = slope * u + intercept``.
    """

    quadratic: tuple[float, float, float]
    linear: tuple[float, float] | None = None

    def __call__(self, u: FloatArray) -> FloatArray:
        a, b, c = self.quadratic
        slope, icpt = self.linear or (a + b + c - 1.0, 0.0)
        out: FloatArray = np.where(u > 1.0, a * u * u + b * u + c - 1.0, slope * u + icpt)
        return np.maximum(out, 0.0)


def fill_unmeasured(slowdown: FloatArray) -> FloatArray:
    """Fill unmeasured (NaN) pairs of a ``(models, models, types)`` matrix conservatively.

    A pair nobody measured is assumed as bad as the worst pair measured for the row's model on
    that type (or the worst on that type, if the row has none; 0 if nothing was measured).
    """
    measured = ~np.isnan(slowdown)
    masked = np.where(measured, slowdown, -np.inf)
    row = masked.max(axis=1, keepdims=True)
    row = np.where(np.isfinite(row), row, masked.max(axis=(0, 1), keepdims=True))
    out = np.where(measured, slowdown, row)
    filled: FloatArray = np.maximum(np.where(np.isfinite(out), out, 0.0), 0.0)
    return filled
