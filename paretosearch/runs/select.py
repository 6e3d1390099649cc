"""Choosing one configuration from a front: by index, knee point, constraints, or weights.

Pure functions over front entries (:class:`~paretosearch.runs.records.FrontEntry`); each
returns the index of the chosen entry. :func:`among` applies one of them to the entries no
baseline dominates on the test sample, which is how the knee, weights and constraints choose
unless told to include dominated entries.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from paretosearch.objectives import Objective
from paretosearch.runs.records import FrontEntry as Entry
from simulator.errors import ParetoSearchError

__all__ = ["among", "by_constraints", "by_index", "by_weights", "knee", "parse_constraint"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_CONSTRAINT = re.compile(r"^\s*([a-z_]+(?::[a-z0-9.]+)?)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")


def _losses(front: Sequence[Entry], objectives: Sequence[Objective]) -> npt.NDArray[np.float64]:
    if not front:
        raise ParetoSearchError("the front is empty: nothing to choose from")
    return np.array([[o.loss(e.metrics[o.label]) for o in objectives] for e in front])


def among(front: Sequence[Entry], pick: Callable[[Sequence[Entry]], int], *,
          include_dominated: bool = False) -> tuple[int, list[int]]:
    """``pick`` applied to the entries that no baseline dominates on the test sample:
    ``(index in front, indices skipped)``. Where every entry is dominated, or
    ``include_dominated``, it picks among them all and skips none (the front's warnings say
    that the baselines win)."""
    kept = [i for i, e in enumerate(front) if include_dominated or not e.dominated]
    if not kept:
        kept = list(range(len(front)))
    skipped = sorted(set(range(len(front))) - set(kept))
    return kept[pick([front[i] for i in kept])], skipped


def by_index(front: Sequence[Entry], index: int) -> int:
    """The entry at ``index`` (negative counts from the end)."""
    if not -len(front) <= index < len(front):
        raise ParetoSearchError(f"front index {index} is out of range: the front has "
                                f"{len(front)} configurations (0..{len(front) - 1})")
    return index % len(front)


def knee(front: Sequence[Entry], objectives: Sequence[Objective]) -> int:
    """The entry closest to the ideal point once each objective is scaled to [0, 1]."""
    scored, F = _scored(front, objectives)
    span = np.where(np.ptp(F, axis=0) > 0, np.ptp(F, axis=0), 1.0)
    return int(scored[np.argmin(np.linalg.norm((F - F.min(axis=0)) / span, axis=1))])


def _scored(front: Sequence[Entry], objectives: Sequence[Objective]
            ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """The indices of the entries with a finite value for every objective, and their losses
    (an entry with a NaN is no knee and no trade-off)."""
    F = _losses(front, objectives)
    scored = np.flatnonzero(np.isfinite(F).all(axis=1))
    if not len(scored):
        raise ParetoSearchError("no entry of the front has a finite value for every objective; "
                                "choose one with --index")
    return scored, F[scored]


def by_weights(front: Sequence[Entry], objectives: Sequence[Objective],
               weights: Sequence[float]) -> int:
    """pymoo's pseudo-weights: the entry whose trade-off is nearest the given weights."""
    from pymoo.mcdm.pseudo_weights import PseudoWeights

    w = np.asarray(weights, dtype=np.float64)
    if (w.shape != (len(objectives),) or not np.isfinite(w).all() or (w < 0).any()
            or w.sum() <= 0):
        raise ParetoSearchError(f"weights {list(weights)}: give one non-negative weight per "
                                f"objective ({', '.join(o.label for o in objectives)})")
    scored, F = _scored(front, objectives)
    if len(scored) == 1:
        return int(scored[0])
    return int(scored[PseudoWeights(w / w.sum()).do(F)])


def parse_constraint(text: str) -> tuple[str, Callable[[float, float], bool], float]:
    """``"pred_err:p99 <= 100"`` -> (label, comparison, bound); the measure defaults to avg."""
    m = _CONSTRAINT.match(text)
    if not m:
        raise ParetoSearchError(f"cannot read constraint {text!r}: write e.g. "
                                "'pred_err:p99 <= 100' (operators <=, <, >=, >)")
    label = Objective.parse(m.group(1)).label
    try:
        bound = float(m.group(3))
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound):
        raise ParetoSearchError(f"constraint {text!r}: the bound {m.group(3)!r} is not a finite "
                                "number; write e.g. 'pred_err:p99 <= 100'")
    return label, _OPS[m.group(2)], bound


def by_constraints(front: Sequence[Entry], where: Sequence[str], minimize: str) -> int:
    """The entry that meets every constraint and has the lowest ``minimize`` value.

    Constraints and the minimised quantity may name any recorded metric and measure, not only
    the searched objectives.
    """
    goal = Objective.parse(minimize)
    rules = [parse_constraint(w) for w in where]
    for label in [goal.label] + [label for label, _, _ in rules]:
        if front and all(math.isnan(_metric(e, label)) for e in front):
            hint = (" (the search predicted no JCTs: they are made only when an objective "
                    "needs them; search with it among the objectives)"
                    if Objective.parse(label).predicted else "")
            raise ParetoSearchError(f"{label} was not recorded for this front{hint}")
    feasible = [i for i, e in enumerate(front)
                if all(op(_metric(e, label), bound) for label, op, bound in rules)]
    if not feasible:
        raise ParetoSearchError(f"no configuration on the front meets {' and '.join(where)}; "
                                "loosen the constraint or search with it as an objective")
    return min(feasible, key=lambda i: goal.loss(_metric(front[i], goal.label)))


def _metric(entry: Entry, label: str) -> float:
    """An entry's recorded value (NaN where none: JSON stores it as null)."""
    value = entry.metrics.get(label)
    return math.nan if value is None else float(value)
