"""Jobs with demands beyond "as soon as possible": SLO classes, deadlines and reward steps.

UniSched (papers/unisched.md §III-B, §IV-B) distinguishes best-effort jobs, strict-SLO jobs
(one deadline), soft-SLO jobs (a staircase of deadlines with falling rewards) and profiler
jobs. Deadlines are kept relative to arrival; rewards are on UniSched's 0-100 scale (the first
step of every SLO job is worth 100), so ``slo_miss = 1 - mean(reward obtained / 100)``
(UniSched eq. 15) is comparable across traces.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.errors import InvalidWorkload, located

__all__ = ["JOB_CLASSES", "MIXES", "SLOs", "deadline_steps", "pad_steps", "reward_obtained",
           "soft_staircase"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

JOB_CLASSES = ("best_effort", "strict", "soft", "profiler")
"""Class names; a job's class is its index here."""
BEST_EFFORT, STRICT, SOFT, PROFILER = range(4)

MIXES: dict[str, dict[str, float]] = {
    "SLO": {"strict": 1.0},
    "MIX1": {"strict": 0.7, "best_effort": 0.3},
    "MIX2": {"strict": 0.35, "soft": 0.35, "best_effort": 0.3},
    # the shares of Chronus's own trace_job_Philly_MIX2.csv (ChronusArtifact bc7e15f: 9,276
    # strict, 18,525 soft, 3,139 best-effort of 30,940)
    "CHRONUS_MIX2": {"strict": 0.3, "soft": 0.6, "best_effort": 0.1},
}
"""Named workload mixes (UniSched §IV-B, after Chronus). MIX1's 70 / 30 split is Chronus's
``trace_job_Philly_MIX1.csv`` (70.2 % strict); the papers give no MIX2 shares, so MIX2 splits
MIX1's SLO share evenly between strict and soft jobs."""

SOFT_STEPS = (1.0, 1.1, 1.2, 1.5)
SOFT_REWARDS = (100.0, 80.0, 50.0, 20.0)
"""Soft-SLO staircase: deadlines at 1, 1.1, 1.2 and 1.5 x the first, worth 100 / 80 / 50 / 20."""


@dataclass(frozen=True, eq=False)
class SLOs:
    """Per-job class, deadlines (s after arrival) and rewards; steps padded with NaN.

    Attributes:
        job_class: index into :data:`JOB_CLASSES`.
        deadlines_s: ``(jobs, steps)`` increasing deadlines; NaN where a job has fewer steps.
        rewards: ``(jobs, steps)`` reward of finishing by each deadline, non-increasing.
    """

    job_class: IntArray
    deadlines_s: FloatArray
    rewards: FloatArray

    def __post_init__(self) -> None:
        for arr in (self.job_class, self.deadlines_s, self.rewards):
            arr.flags.writeable = False

    def head(self, n: int) -> SLOs:
        """The first ``n`` jobs."""
        return SLOs(self.job_class[:n].copy(), self.deadlines_s[:n].copy(), self.rewards[:n].copy())

    def take(self, rows: npt.NDArray[np.intp]) -> SLOs:
        """The given jobs, in the given order."""
        return SLOs(self.job_class[rows], self.deadlines_s[rows], self.rewards[rows])

    @property
    def is_slo(self) -> npt.NDArray[np.bool_]:
        """Jobs with deadlines (strict or soft)."""
        return np.isin(self.job_class, (STRICT, SOFT))

    def columns(self) -> dict[str, list[str]]:
        """The table-schema columns: class names and ``-``-separated steps."""
        return {"job_class": [JOB_CLASSES[c] for c in self.job_class],
                "deadlines_s": [_join(row) for row in self.deadlines_s],
                "rewards": [_join(row) for row in self.rewards]}

    @classmethod
    def from_columns(cls, classes: pd.Series, deadlines: pd.Series | None,
                     rewards: pd.Series | None, *, source: str) -> SLOs:
        """Parse ``job_class`` names and ``-``-separated ``deadlines_s`` / ``rewards`` columns.

        SLO jobs need at least one deadline, increasing and > 0, and one reward per deadline,
        > 0 and non-increasing; missing rewards default to 100 for a single deadline.
        """
        n = len(classes)
        codes = np.empty(n, dtype=np.int64)
        steps: list[list[float]] = []
        pays: list[list[float]] = []
        for i, name in enumerate(classes):
            row = i + 1
            if name not in JOB_CLASSES:
                raise InvalidWorkload(located(source, row=row, column="job_class", value=name,
                                              problem=f"unknown class; use one of {JOB_CLASSES}"))
            codes[i] = JOB_CLASSES.index(name)
            d = _split(deadlines.iloc[i] if deadlines is not None else "", source, row,
                       "deadlines_s")
            r = _split(rewards.iloc[i] if rewards is not None else "", source, row, "rewards")
            if codes[i] in (STRICT, SOFT):
                _check_steps(d, r, source, row)
                r = r or [100.0]
            steps.append(d if codes[i] in (STRICT, SOFT) else [])
            pays.append(r if codes[i] in (STRICT, SOFT) else [])
        return cls(codes, pad_steps(steps), pad_steps(pays))


def _join(row: FloatArray) -> str:
    # shortest exact digits, never an exponent (whose '-' would split the number)
    return "-".join(np.format_float_positional(v, trim="-") for v in row if not np.isnan(v))


def _split(cell: object, source: str, row: int, column: str) -> list[float]:
    if cell is None or (isinstance(cell, float) and np.isnan(cell)) or str(cell).strip() == "":
        return []
    try:
        return [float(v) for v in str(cell).split("-")]
    except ValueError:
        raise InvalidWorkload(located(source, row=row, column=column, value=cell,
                                      problem="expected numbers separated by '-'")) from None


def _check_steps(d: list[float], r: list[float], source: str, row: int) -> None:
    if not d or any(v <= 0 or not np.isfinite(v) for v in d) or any(
            b <= a for a, b in itertools.pairwise(d)):
        raise InvalidWorkload(located(source, row=row, column="deadlines_s",
                                      value="-".join(map(str, d)),
                                      problem="an SLO job needs increasing deadlines > 0"))
    if r and (len(r) != len(d) or any(v <= 0 for v in r) or any(
            b > a for a, b in itertools.pairwise(r))):
        raise InvalidWorkload(located(source, row=row, column="rewards",
                                      value="-".join(map(str, r)),
                                      problem=f"expected {len(d)} rewards > 0, non-increasing"))


def pad_steps(rows: Sequence[Sequence[float]]) -> FloatArray:
    """Rows of different lengths as one array padded with NaN."""
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def deadline_steps(kind: int, duration_s: float, rng: np.random.Generator
                   ) -> tuple[list[float], list[float]]:
    """UniSched §IV-B: a strict deadline uniform in [1.1, 2] x duration; a soft staircase
    starting there at 1 / 1.1 / 1.2 / 1.5 x, worth 100 / 80 / 50 / 20."""
    first = float(rng.uniform(1.1, 2.0)) * duration_s
    if kind == STRICT:
        return [first], [100.0]
    return soft_staircase(first)


def soft_staircase(first_s: float) -> tuple[list[float], list[float]]:
    """A soft SLO's deadlines and rewards from its first deadline: :data:`SOFT_STEPS` x it,
    worth :data:`SOFT_REWARDS`."""
    return [first_s * s for s in SOFT_STEPS], list(SOFT_REWARDS)


def reward_obtained(slos: SLOs, jct_s: FloatArray) -> FloatArray:
    """Per job, the reward of the first deadline met (0 if none); NaN for jobs without SLO."""
    if slos.deadlines_s.shape[1] == 0:
        return np.full(jct_s.shape, np.nan)
    met = jct_s[:, None] <= slos.deadlines_s  # NaN deadlines compare False
    first = np.where(met.any(axis=1), met.argmax(axis=1), -1)
    got = np.where(first >= 0, slos.rewards[np.arange(len(first)), np.maximum(first, 0)], 0.0)
    return np.where(slos.is_slo, got, np.nan)
