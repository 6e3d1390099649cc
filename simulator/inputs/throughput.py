"""Per-job-type throughput on each GPU type, and when sharing a GPU: Gavel's measurements.

``simulation_throughputs.json`` (Gavel's public code) maps GPU type -> ``"(job type, scale)"``
-> ``{"null": isolated steps/s, "(partner, scale)": [own, partner's steps/s when co-located]}``
for V100, P100 and K80 (plus ``*_unconsolidated``: a gang spread across servers). This module
turns it into arrays: isolated throughput ``(entries, gpu types)``, spread-out throughput, and a
pairwise co-location matrix, each NaN where Gavel measured nothing. It also derives a scaling
table (speed-up at 1, 2, 4, 8 GPUs on the reference type) for the simulator, one model per
``(job type, scale)`` entry for replaying Gavel's traces exactly
(:meth:`ThroughputTable.entry_models`, used by
:func:`simulator.inputs.traces.read_gavel_trace`), and generates Gavel's
"continuous-multiple" workload.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator import libm
from simulator.errors import InvalidWorkload, located
from simulator.inputs.colocation import Interference, fill_unmeasured
from simulator.inputs.files import read_json
from simulator.inputs.scaling import ScalingTable, TypeSpeeds
from simulator.inputs.workload import Workload

__all__ = ["ThroughputTable", "TypeSpeeds", "generate_gavel", "model_name"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class ThroughputTable:
    """Measured steps/s of (job type, GPU count) entries on each GPU type.

    Attributes:
        entries: ``(job type, scale factor)`` of each row.
        gpu_types: column order, e.g. ``("k80", "p100", "v100")``.
        isolated: ``(entries, types)`` throughput alone on its GPUs.
        unconsolidated: the same with the gang spread over servers.
        colocated: ``(entries, entries, types, 2)``: row's and partner's throughput when the
            two share a GPU.
    """

    entries: tuple[tuple[str, int], ...]
    gpu_types: tuple[str, ...]
    isolated: FloatArray
    unconsolidated: FloatArray
    colocated: FloatArray
    _index: dict[tuple[str, int], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {e: i for i, e in enumerate(self.entries)})

    def index(self, job_type: str, scale: int = 1) -> int:
        """Row of ``(job_type, scale)``; ``KeyError`` if Gavel did not measure it."""
        return self._index[(job_type, scale)]

    @property
    def job_types(self) -> tuple[str, ...]:
        """The distinct job types, in table order."""
        return tuple(dict.fromkeys(j for j, _ in self.entries))

    def scaling(self, reference: str = "v100") -> ScalingTable:
        """Speed-up of each job type at 1, 2, 4, 8 GPUs on ``reference`` (linear between).

        Types measured only on one GPU scale linearly (Gavel's own assumption for them).
        """
        col = self.gpu_types.index(reference)
        points = {}
        for job in self.job_types:
            one = self.isolated[self.index(job), col]
            known = {s: self.isolated[self._index[(job, s)], col] / one
                     for s in (1, 2, 4, 8) if (job, s) in self._index}
            g = np.arange(1, 9, dtype=np.float64)
            xs = np.array(sorted(known), dtype=np.float64)
            ys = np.array([known[int(x)] for x in xs])
            points[job] = np.interp(g, xs, ys) if len(xs) > 1 else g
        return ScalingTable.from_points(points)

    def interference(self, scaling: ScalingTable,
                     entries: Sequence[tuple[str, int]] | None = None) -> Interference:
        """Pairwise slowdown of ``scaling``'s models sharing one GPU, per GPU type.

        ``slowdown[i, j, t] = isolated[i, t] / colocated[i, j, t] - 1`` from the single-GPU
        entries (or from ``entries``, the ``(job type, scale)`` of each model in order); pairs
        Gavel did not measure are filled conservatively
        (:func:`~simulator.inputs.colocation.fill_unmeasured`).
        """
        rows = ([self.index(name) for name in scaling.models] if entries is None
                else [self.index(*e) for e in entries])
        own = self.colocated[np.ix_(rows, rows)][..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            slow = self.isolated[rows][:, None, :] / own - 1.0
        slow[~np.isfinite(slow)] = np.nan
        return Interference(self.gpu_types, fill_unmeasured(np.maximum(slow, 0.0)))

    def type_speeds(self, scaling: ScalingTable, reference: str = "v100") -> TypeSpeeds:
        """Per-GPU speed of each of ``scaling``'s models on each type, relative to ``reference``.

        ``speed[m, t] = isolated[(m, 1), t] / isolated[(m, 1), reference]``: single-GPU
        throughputs, since the scaling table already carries the speed-up with GPU count.
        Work is counted in steps: ``isolated[(m, 1), reference]`` steps per second of it.
        """
        ref = self.gpu_types.index(reference)
        rows, steps = [], []
        for name in scaling.models:
            try:
                one = self.isolated[self.index(name)]
            except KeyError:
                raise InvalidWorkload(f"throughput table: no single-GPU entry for model "
                                      f"{name!r}") from None
            rows.append(one / one[ref])
            steps.append(one[ref])
        return TypeSpeeds(self.gpu_types, np.array(rows), np.array(steps))

    def entry_models(self, entries: Sequence[tuple[str, int]], reference: str = "v100"
                     ) -> tuple[ScalingTable, TypeSpeeds]:
        """One model per ``(job type, scale)`` entry, named by :func:`model_name`.

        A model's speed-up curve is its job type's (:meth:`scaling`, exact at the measured
        GPU counts on ``reference``) and its per-GPU speed on type ``t`` is
        ``isolated[entry, t] / isolated[entry, reference]``. So a job of the entry holding its
        ``scale`` GPUs of type ``t`` progresses at ``isolated[entry, t] / isolated[(job type, 1),
        reference]`` reference seconds per second: with ``service_s = steps / isolated[(job
        type, 1), reference]`` it runs ``steps / isolated[entry, t]`` seconds, as in Gavel's
        simulator. A speed of 0 (Gavel measured 0 steps/s) means the job cannot run there.
        Work is counted in steps: ``isolated[(job type, 1), reference]`` per second of it,
        and ``gang_steps_per_s`` keeps ``isolated[entry, t]`` itself (the rates rounded once).

        Raises:
            InvalidWorkload: an entry is not in the table, or its throughput on ``reference``
                is not positive, or it has no measurement on some type.
        """
        if reference not in self.gpu_types:
            raise InvalidWorkload(f"throughput table: no reference GPU type {reference!r}; it "
                                  f"has {list(self.gpu_types)}")
        ref = self.gpu_types.index(reference)
        base = self.scaling(reference)
        curves, speeds, steps, gangs = {}, [], [], []
        for job, scale in entries:
            if (job, scale) not in self._index:
                raise InvalidWorkload(f"throughput table: no entry {(job, scale)!r}")
            iso = self.isolated[self.index(job, scale)]
            if not (np.isfinite(iso).all() and (iso >= 0).all() and iso[ref] > 0):
                measured = dict(zip(self.gpu_types, iso.tolist(), strict=True))
                raise InvalidWorkload(f"throughput table: entry {(job, scale)!r} needs a "
                                      f"positive throughput on {reference} and a measured one "
                                      f"(>= 0) on every type; it has {measured}")
            m = base.index(job)
            curves[model_name(job, scale)] = base.speedup[m, 1:base.max_gpus[m] + 1]
            speeds.append(iso / iso[ref])
            steps.append(self.isolated[self.index(job), ref])
            gangs.append(iso)
        return ScalingTable.from_points(curves), TypeSpeeds(
            self.gpu_types, np.array(speeds), np.array(steps), np.array(gangs))

    @classmethod
    def from_gavel_json(cls, path: str | Path) -> ThroughputTable:
        """Load Gavel's ``simulation_throughputs.json``."""
        doc = read_json(path, InvalidWorkload, "throughput table")
        _check_table(doc, str(path))
        types = tuple(sorted(k for k in doc if not k.endswith("_unconsolidated")))
        if not types:
            raise InvalidWorkload(f"{path}: no GPU types at the top level")
        entries = sorted({_key(k, path) for t in types for k in doc[t]})
        index = {e: i for i, e in enumerate(entries)}
        n, m = len(entries), len(types)
        iso, spread = np.full((n, m), np.nan), np.full((n, m), np.nan)
        pair = np.full((n, n, m, 2), np.nan)
        for c, t in enumerate(types):
            for k, row in doc[t].items():
                i = index[_key(k, path)]
                iso[i, c] = float(row["null"])
                for partner, value in row.items():
                    if partner != "null":
                        pair[i, index[_key(partner, path)], c] = value
            for k, row in doc.get(f"{t}_unconsolidated", {}).items():
                spread[index[_key(k, path)], c] = float(row["null"])
        return cls(tuple(entries), types, iso, spread, pair)


def _check_table(doc: object, src: str) -> None:
    """Raise unless ``doc`` has the shape of Gavel's throughputs: ``{GPU type: {job: {"null":
    steps/s alone, partner job: [steps/s, partner's steps/s]}}}``, every rate a finite number
    >= 0 (0: the job does not fit that GPU)."""
    def rate(v: object) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < np.inf

    if not isinstance(doc, dict):
        raise InvalidWorkload(located(src, value=type(doc).__name__,
                                      problem="a JSON object of GPU types expected"))
    for gpu, jobs in doc.items():
        if not isinstance(jobs, dict):
            raise InvalidWorkload(located(src, column=gpu, value=jobs,
                                          problem="a JSON object of jobs expected"))
        for job, row in jobs.items():
            if not isinstance(row, dict) or "null" not in row:
                raise InvalidWorkload(located(src, column=f"{gpu}.{job}", value=row, problem=(
                    "expected {'null': steps/s alone, PARTNER: [steps/s, partner's]}")))
            for partner, value in row.items():
                if not (rate(value) if partner == "null" else isinstance(value, list) and len(
                        value) == 2 and all(rate(v) for v in value)):
                    raise InvalidWorkload(located(
                        src, column=f"{gpu}.{job}.{partner}", value=value,
                        problem="must be a finite throughput >= 0" + (
                            "" if partner == "null" else " for each of the pair, as [a, b]")))


def model_name(job_type: str, scale: int) -> str:
    """The model of ``scale``-GPU jobs of ``job_type`` (:meth:`ThroughputTable.entry_models`):
    the job type itself on one GPU, ``"<job type> (<scale> GPUs)"`` on more."""
    return job_type if scale == 1 else f"{job_type} ({scale} GPUs)"


def _key(text: str, path: str | Path) -> tuple[str, int]:
    try:
        job, scale = ast.literal_eval(text)
        return str(job), int(scale)
    except (ValueError, SyntaxError, TypeError):
        raise InvalidWorkload(f"{path}: key {text!r} is not '(job type, scale factor)'") from None


def generate_gavel(table: ThroughputTable, n_jobs: int, *, jobs_per_hr: float,
                   seed: int | np.random.SeedSequence = 0) -> Workload:
    """Gavel's "continuous-multiple" workload (facts from Gavel's generator).

    Job type uniform over the measured types; duration ``60 * 10^U(1.5, 3)`` s with
    probability 0.8, else ``60 * 10^U(3, 4)`` s; 1 / 2 / 4 / 8 GPUs with probability 0.7 / 0.1
    / 0.15 / 0.05; Poisson arrivals at ``jobs_per_hr``. The duration is the job's run time at
    its GPU count on the reference type, so ``service_s = duration x speedup(GPUs)``.
    """
    from simulator.inputs.generate import check_jobs  # it builds workloads; this, their speeds

    check_jobs(n_jobs, "generate_gavel")
    if not jobs_per_hr > 0:
        raise InvalidWorkload(f"generate_gavel: need n_jobs >= 1 and jobs_per_hr > 0 "
                              f"(got {n_jobs}, {jobs_per_hr})")
    rng = np.random.default_rng(seed)
    scaling = table.scaling()
    kinds = np.asarray(table.job_types, dtype=object)[rng.integers(0, len(table.job_types),
                                                                     n_jobs)]
    short = rng.random(n_jobs) < 0.8
    duration = 60 * libm.power(10.0, np.where(short, rng.uniform(1.5, 3, n_jobs),
                                             rng.uniform(3, 4, n_jobs)))
    gpus = rng.choice([1, 2, 4, 8], size=n_jobs, p=[0.7, 0.1, 0.15, 0.05])
    model = np.array([scaling.index(k) for k in kinds])
    arrival = np.cumsum(np.r_[0.0, rng.exponential(3600 / jobs_per_hr, n_jobs - 1)])
    frame = pd.DataFrame({"arrival_s": arrival, "gpus": gpus, "model": kinds,
                          "service_s": duration * scaling.speed(model, gpus.astype(float))})
    wl = Workload.from_frame(frame, scaling=scaling,
                             source=f"gavel continuous-multiple ({jobs_per_hr} jobs/h)")
    return replace(wl, type_speed=table.type_speeds(scaling),
                   interference=table.interference(scaling))
