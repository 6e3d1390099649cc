"""How fast a job runs on g GPUs: per-model speed-up tables.

A table holds, for each model, the speed-up at 0, 1, 2, ... GPUs (``speedup[m, 0] == 0``).
Fractional GPU counts are linearly interpolated and counts above a model's largest entry
stay flat, as in the PCS code. Tables come from a CSV (``model,gpus,speedup`` rows, the
format of PCS's ``scaling_tables.csv``), from the parametric models this project ships
for generated jobs (:func:`amdahl`), or from Chronus's ``model_info.json``, which adds each
model's speed when its gang spans nodes (:mod:`simulator.inputs.model_info`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.errors import InvalidWorkload, located
from simulator.inputs.files import read_data, to_numbers

__all__ = ["PARAMETRIC_MODELS", "ScalingTable", "TypeSpeeds", "amdahl", "parametric_table"]

MAX_SPEEDUP = 1e6
"""The largest speed-up over one GPU a scaling table may give (1e308 overflowed the
simulator's sums to infinity)."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class ScalingTable:
    """Speed-up of each model at each GPU count.

    Attributes:
        models: model names; a job refers to its model by index into this tuple.
        speedup: ``(len(models), width)`` array; row ``m`` is model ``m``'s speed-up at
            0..width-1 GPUs, padded flat beyond the model's own largest entry.
        max_gpus: per model, the largest GPU count the table measured.
        spread: ``(len(models), width, 2)`` speed multiplier of model ``m``'s ``g``-GPU gang
            spread over 2 nodes (``[m, g, 0]``) or over 3 or more (``[m, g, 1]``), where
            measured (Chronus's ``model_info.json``:
            :func:`simulator.inputs.model_info.read_model_info`); NaN, or no array, where
            not: there the cluster's ``inter_node_factor`` applies.
    """

    models: tuple[str, ...]
    speedup: FloatArray
    max_gpus: IntArray
    spread: FloatArray | None = None
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {name: i for i, name in enumerate(self.models)})
        self.speedup.flags.writeable = False
        if self.spread is not None:
            shape = (*self.speedup.shape, 2)
            if self.spread.shape != shape or not (np.isnan(self.spread)
                                                  | (self.spread > 0)).all():
                raise InvalidWorkload(f"scaling table: spread must be a {shape} array of "
                                      f"speeds > 0 or NaN (got shape {self.spread.shape})")
            self.spread.flags.writeable = False

    def spread_factors(self, inter_node_factor: float) -> FloatArray:
        """:attr:`spread` with the cluster's ``inter_node_factor`` where not measured."""
        shape = (*self.speedup.shape, 2)
        if self.spread is None:
            return np.full(shape, float(inter_node_factor))
        return np.where(np.isnan(self.spread), float(inter_node_factor), self.spread)

    @property
    def width(self) -> int:
        """Number of integer GPU counts tabulated (0 included)."""
        return int(self.speedup.shape[1])

    def index(self, model: str) -> int:
        """Row of ``model``; ``KeyError`` if the table does not know it."""
        return self._index[model]

    def speed(self, model_idx: IntArray, gpus: FloatArray) -> FloatArray:
        """Speed-up of each job (by model index) at its (possibly fractional) GPU count."""
        g = np.clip(gpus, 0.0, self.width - 1)
        lo = g.astype(np.int64)
        hi = np.minimum(lo + 1, self.width - 1)
        base = self.speedup[model_idx, lo]
        return base + (g - lo) * (self.speedup[model_idx, hi] - base)

    def efficiency(self) -> FloatArray:
        """``speedup(g) / g`` for g = 1..width-1, shape ``(models, width - 1)``."""
        g = np.arange(1, self.width, dtype=np.float64)
        return self.speedup[:, 1:] / g

    def prefix_efficiency(self) -> FloatArray:
        """``min(speedup(g') / g' for g' <= g)`` for g = 1..width-1: non-increasing in g.

        A job's largest allocation whose every step keeps ``speedup(g)/g >= zeta`` is the number
        of entries ``>= zeta`` (PCS's demand clipping stops at the first g that falls below).
        """
        return np.minimum.accumulate(self.efficiency(), axis=1)

    def merged(self, other: ScalingTable) -> ScalingTable:
        """A table with this table's models followed by ``other``'s (names must not clash)."""
        clash = set(self.models) & set(other.models)
        if clash:
            raise InvalidWorkload(f"scaling tables both define model(s) {sorted(clash)}")
        width = max(self.width, other.width)
        rows = [_pad(t.speedup, width) for t in (self, other)]
        spread = None
        if self.spread is not None or other.spread is not None:
            spread = np.vstack([_pad_spread(t, width) for t in (self, other)])
        return ScalingTable(
            self.models + other.models,
            np.vstack(rows),
            np.concatenate([self.max_gpus, other.max_gpus]),
            spread,
        )

    @classmethod
    def from_points(cls, points: Mapping[str, FloatArray]) -> ScalingTable:
        """Build from ``{model: speedups at 1..n GPUs}``."""
        width = 1 + max(len(v) for v in points.values())
        rows = [_pad(np.concatenate([[0.0], np.asarray(v, float)])[None, :], width)
                for v in points.values()]
        return cls(
            tuple(points),
            np.vstack(rows),
            np.array([len(v) for v in points.values()], dtype=np.int64),
        )

    @classmethod
    def from_csv(cls, path: str | Path) -> ScalingTable:
        """Load a ``model,gpus,speedup[,time_per_iter_us]`` CSV (PCS's ``scaling_tables.csv``).

        Each model's rows must list GPU counts 1, 2, ..., n in order with finite speed-ups > 0.
        Where a model has iteration times, the speed-up is ``t_1 / t_g`` (as PCS computes it).
        """
        src = str(path)
        data = read_data(path, InvalidWorkload, "scaling table")
        try:
            df = pd.read_csv(data)
        except (OSError, ValueError) as exc:
            raise InvalidWorkload(f"{src}: cannot read scaling table: {exc}") from exc
        missing = {"model", "gpus", "speedup"} - set(df.columns)
        if missing:
            raise InvalidWorkload(located(src, column=sorted(missing)[0],
                                          problem="required column is missing",
                                          fix="expected columns model,gpus,speedup"))
        points: dict[str, list[float]] = {}
        first_time: dict[str, float] = {}
        times = to_numbers(df["time_per_iter_us"]) if "time_per_iter_us" in df else pd.Series(
            np.full(len(df), np.nan))
        for row, (model, cell, gpus, speed, t_iter) in enumerate(
                zip(df["model"], df["gpus"], to_numbers(df["gpus"]), to_numbers(df["speedup"]),
                    times, strict=True), start=1):
            seen = points.setdefault(str(model), [])
            if gpus != len(seen) + 1:  # NaN, a fraction, out of order
                raise InvalidWorkload(located(
                    src, row=row, column="gpus", value=cell,
                    problem=f"model {model!r} must list GPU counts 1, 2, ... in order "
                            f"(expected {len(seen) + 1})"))
            if not (np.isfinite(speed) and 0 < speed <= MAX_SPEEDUP):
                raise InvalidWorkload(located(src, row=row, column="speedup",
                                              value=df["speedup"].iloc[row - 1],
                                              problem=f"must be a number > 0 and at most "
                                                      f"{MAX_SPEEDUP:,.0f}"))
            # PCS derives speed-ups from iteration times (t_1 / t_g); the rounded speedup
            # column is the fallback where a model has no timings (0 or an empty cell).
            if not (np.isnan(t_iter) or 0 <= t_iter < np.inf):
                raise InvalidWorkload(located(
                    src, row=row, column="time_per_iter_us", value=df["time_per_iter_us"].iloc[
                        row - 1], problem="must be a finite time >= 0 (0 or empty: no timing)"))
            if gpus == 1:
                first_time[str(model)] = float(t_iter)
            t1 = first_time[str(model)]
            # in seconds per iteration first, as PCS divides (t_1 / t_g can differ in the last bit)
            exact = ((t1 / 1e6) / (float(t_iter) / 1e6) if t1 > 0 and np.isfinite(t_iter)
                     and t_iter > 0 else None)
            if exact is not None and exact > MAX_SPEEDUP:
                raise InvalidWorkload(located(
                    src, row=row, column="time_per_iter_us", value=t_iter,
                    problem=f"gives a speed-up of {exact:.3g} over one GPU; at most "
                            f"{MAX_SPEEDUP:,.0f}"))
            seen.append(exact if exact is not None else float(speed))
        if not points:
            raise InvalidWorkload(f"{src}: scaling table has no rows")
        return cls.from_points({k: np.asarray(v) for k, v in points.items()})


def _pad_spread(table: ScalingTable, width: int) -> FloatArray:
    """``table``'s :attr:`~ScalingTable.spread` at ``width`` GPU counts (NaN where none)."""
    out = np.full((len(table.models), width, 2), np.nan)
    if table.spread is not None:
        out[:, :table.width] = table.spread
    return out


def _pad(rows: FloatArray, width: int) -> FloatArray:
    """Extend rows to ``width`` columns by repeating each row's last value (flat above max)."""
    extra = width - rows.shape[1]
    if extra <= 0:
        return rows
    return np.hstack([rows, np.repeat(rows[:, -1:], extra, axis=1)])


def amdahl(parallel_fraction: float, max_gpus: int) -> FloatArray:
    """Amdahl's-law speed-ups at 1..max_gpus GPUs: ``1 / ((1 - p) + p / g)``."""
    g = np.arange(1, max_gpus + 1, dtype=np.float64)
    return 1.0 / ((1.0 - parallel_fraction) + parallel_fraction / g)


PARAMETRIC_MODELS: dict[str, float] = {
    "linear": 1.0,
    "amdahl-0.99": 0.99,
    "amdahl-0.95": 0.95,
    "amdahl-0.80": 0.80,
}
"""The built-in scaling behaviours for generated jobs: name -> Amdahl parallel fraction.

``linear`` scales perfectly; the others saturate at 100x, 20x and 5x, spanning the
sub-linear behaviours seen in PCS's measured tables (e.g. VGG saturates near 5x at 8 GPUs,
ResNet-50 reaches ~20x at 28 GPUs).
"""


def parametric_table(max_gpus: int) -> ScalingTable:
    """The :data:`PARAMETRIC_MODELS` tabulated up to ``max_gpus`` GPUs."""
    return ScalingTable.from_points(
        {name: amdahl(p, max_gpus) for name, p in PARAMETRIC_MODELS.items()})


@dataclass(frozen=True, eq=False)
class TypeSpeeds:
    """Per-GPU speed of each model on each GPU type, relative to the reference type.

    A job of model ``m`` holding ``g`` GPUs of type ``t`` progresses at
    ``speedup[m, g] * speed[m, t]`` seconds of reference-type work per second.

    A speed of 0 means the model cannot run on that type (Gavel measured no throughput for
    it there): heterogeneity-aware policies never place it there, and the round engine rejects
    a plan that does (:class:`~simulator.rounds.InvalidPlan`).

    Attributes:
        types: GPU type names (columns).
        speed: ``(models, types)`` multipliers, finite and >= 0, each model's positive on at
            least one type.
        steps_per_s: ``(models,)`` training steps per second of reference-type work, where
            the work is counted in steps (Gavel's measurements, whose rounds run whole
            steps); None where it is not.
        gang_steps_per_s: ``(models, types)`` steps per second of the model's gang on each
            type as measured (Gavel's throughputs, each model one gang size), where known.
            ``speedup x speed x steps_per_s`` is the same rate rounded three times: a last bit
            that moves a whole step, or a round's end, and with it every later tie in Gavel's
            priorities, so Gavel's rounds count steps with these.
    """

    types: tuple[str, ...]
    speed: FloatArray
    steps_per_s: FloatArray | None = None
    gang_steps_per_s: FloatArray | None = None

    def __post_init__(self) -> None:
        k = self.steps_per_s
        if k is not None and (k.shape != self.speed.shape[:1] or not (np.isfinite(k).all()
                                                                       and (k > 0).all())):
            raise InvalidWorkload(f"type speeds: steps_per_s must be {self.speed.shape[0]} "
                                  f"positive numbers, one per model (got shape {k.shape})")
        g = self.gang_steps_per_s
        if g is not None and (g.shape != self.speed.shape or not (np.isfinite(g).all()
                                                                  and (g >= 0).all())):
            raise InvalidWorkload(f"type speeds: gang_steps_per_s must be a {self.speed.shape} "
                                  f"array of numbers >= 0 (got shape {g.shape})")
        s = self.speed
        if s.ndim != 2 or s.shape[1] != len(self.types):
            raise InvalidWorkload(f"type speeds: expected a (models, {len(self.types)}) array "
                                  f"for types {self.types}, got shape {s.shape}")
        if not (np.isfinite(s).all() and (s >= 0).all()):
            raise InvalidWorkload(f"type speeds: must be finite and >= 0 (types {self.types})")
        dead = np.flatnonzero(~(s > 0).any(axis=1))
        if dead.size:
            raise InvalidWorkload(f"type speeds: model row {dead[0]} has speed 0 on every type "
                                  f"{self.types}, so it could never run")
        s.flags.writeable = False

    @classmethod
    def uniform(cls, relative_speed: Mapping[str, float], n_models: int) -> TypeSpeeds:
        """Every model at the given per-type speeds (a profile's ``relative_speed``)."""
        types = tuple(relative_speed)
        row = np.array([relative_speed[t] for t in types], dtype=np.float64)
        return cls(types, np.tile(row, (n_models, 1)))

    def columns(self, types: tuple[str, ...], source: str) -> FloatArray:
        """The ``(models, len(types))`` speeds in the order of ``types`` (a cluster's)."""
        missing = [t for t in types if t not in self.types]
        if missing:
            raise InvalidWorkload(f"{source}: no speed for GPU type {missing[0]!r}; the table "
                                  f"covers {list(self.types)}")
        return self.speed[:, [self.types.index(t) for t in types]]

    def gang_columns(self, speeds: FloatArray) -> FloatArray | None:
        """``gang_steps_per_s`` in the columns of ``speeds`` (what :meth:`columns` gave for a
        cluster: each of its columns is one of ``speed``'s, found by value), or None where
        not measured (two types of equal speeds for every model: the first's rates)."""
        if self.gang_steps_per_s is None:
            return None
        out = np.empty(speeds.shape)
        for t in range(speeds.shape[1]):
            k = next(k for k in range(self.speed.shape[1])
                     if np.array_equal(self.speed[:, k], speeds[:, t]))
            out[:, t] = self.gang_steps_per_s[:, k]
        return out
