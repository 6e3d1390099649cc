"""Objectives: a metric plus a measure, parsed from what operators type (SPEC §4).

``("jct", "avg")``, ``"pred_err:p99"``, ``"jct"`` (avg) and :class:`Objective` values are all
accepted; the same metric may appear with different measures (PCS §3.2). Maximised metrics
(``utilization``) are negated in :meth:`Objective.loss`, the one place that does so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from simulator.metrics import METRICS, InvalidObjective, parse_measure

__all__ = ["MEASURES", "SAME", "Objective", "dominates", "indistinct", "parse_objectives"]

MEASURES = ("avg", "p50", "p90", "p99", "max")
"""The measures every evaluation record holds for every metric: exactly what an objective, a
``select --where`` constraint or its ``--minimize`` may name."""


@dataclass(frozen=True)
class Objective:
    """One objective: ``metric`` reduced by ``measure`` (one of :data:`MEASURES`)."""

    metric: str
    measure: str = "avg"

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise InvalidObjective(f"unknown metric {self.metric!r}; known metrics: "
                                   f"{', '.join(METRICS)}")
        measure = parse_measure(self.measure)
        if measure not in MEASURES:
            raise InvalidObjective(f"measure {self.measure!r} of {self.metric!r} is not "
                                   f"recorded: a search records {', '.join(MEASURES)} of "
                                   "every metric")
        object.__setattr__(self, "measure", measure)

    @classmethod
    def parse(cls, obj: object) -> Objective:
        """From an :class:`Objective`, a ``(metric, measure)`` pair or ``"metric[:measure]"``."""
        if isinstance(obj, Objective):
            return obj
        if isinstance(obj, tuple) and len(obj) == 2 and all(isinstance(v, str) for v in obj):
            return cls(obj[0], obj[1])
        if isinstance(obj, str) and obj.strip():
            metric, _, measure = obj.strip().partition(":")
            return cls(metric.strip(), measure.strip() or "avg")
        raise InvalidObjective(f"cannot read objective {obj!r}: write 'jct:avg', "
                               "('pred_err', 'p99') or Objective('jct', 'p99')")

    @property
    def label(self) -> str:
        """``metric:measure``, the key of this objective's value in evaluation records."""
        return f"{self.metric}:{self.measure}"

    @property
    def maximize(self) -> bool:
        """Whether larger values are better."""
        return METRICS[self.metric].maximize

    @property
    def predicted(self) -> bool:
        """Whether the metric needs JCT predictions (simulations without them are cheaper)."""
        return METRICS[self.metric].predicted

    def loss(self, value: float) -> float:
        """The value to minimise: negated for maximised metrics."""
        return -value if self.maximize else value


def parse_objectives(objectives: Iterable[object]) -> tuple[Objective, ...]:
    """Parse and check a list of objectives: at least one, no exact repeats."""
    parsed = tuple(Objective.parse(o) for o in objectives)
    if not parsed:
        raise InvalidObjective("no objectives given: name at least one, e.g. 'jct:avg'")
    labels = [o.label for o in parsed]
    repeated = sorted({lab for lab in labels if labels.count(lab) > 1})
    if repeated:
        raise InvalidObjective(f"objective {repeated[0]!r} is given twice; the same metric may "
                               "repeat only with a different measure")
    return parsed


SAME = 1e-9
"""Values this close (relatively, or absolutely near 0) are one value: the same schedule's
metrics summed in another order differ in their last bits (on the second half of trace
6214e9's first 1,000 jobs, every policy's avg JCT is 1503.33 s, Themis's 2.8e-12 s lower),
and that is no reason to call one configuration better."""


def _same(x: float, y: float) -> bool:
    return math.isclose(x, y, rel_tol=SAME, abs_tol=SAME)


def dominates(a: Mapping[str, float], b: Mapping[str, float],
              objectives: Sequence[Objective]) -> bool:
    """Whether record ``a`` is at least as good as ``b`` on every objective and better on one
    (values within :data:`SAME` of each other are equal)."""
    la, lb = ([o.loss(r[o.label]) for o in objectives] for r in (a, b))
    pairs = [(x, y) for x, y in zip(la, lb, strict=True) if not _same(x, y)]
    return bool(pairs) and all(x < y for x, y in pairs)


def indistinct(records: Sequence[Mapping[str, float]], objectives: Sequence[Objective]) -> bool:
    """Whether every record has the same value (within :data:`SAME`) on every objective."""
    return all(_same(r[o.label], records[0][o.label]) for r in records for o in objectives)
