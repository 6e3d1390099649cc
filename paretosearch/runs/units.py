"""Numbers in the operator's units, for tables: the unit the plots use (:func:`plots.axis`:
hours past 5,000 s, fractions as percent), the unit in the column's header, a maximised
metric marked, and one number format for the whole column."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from paretosearch.runs.plots import axis
from simulator.metrics import METRICS

if TYPE_CHECKING:
    from paretosearch.runs.records import FrontDocument

__all__ = ["MAXIMISED", "Column", "column", "front_columns", "param_cells"]

MAXIMISED = "↑"
"""Marks an objective or metric where larger is better."""
_UNITS = {"s": "s", "%": "%", "frac": "%", "x": "x", "count": ""}


@dataclass(frozen=True)
class Column:
    """How a table shows one metric's values: ``header`` (the label, its unit, ``↑`` where
    larger is better), a factor from the stored values, and a fixed number of decimals."""

    label: str
    unit: str
    factor: float
    decimals: int
    maximize: bool = False

    @property
    def header(self) -> str:
        """``jct:avg (h)``, ``gpu_util_sum:avg (%) ↑``."""
        return " ".join(p for p in (self.label, f"({self.unit})" if self.unit else "",
                                    MAXIMISED if self.maximize else "") if p)

    def cell(self, value: float | None) -> str:
        """A stored value in this column's unit and format (— where there is none)."""
        if value is None or not math.isfinite(value):
            return "—"
        shown = value * self.factor
        if abs(shown) < 0.5 * 10 ** -self.decimals:  # float noise around an exact zero
            shown = 0.0
        return f"{shown:,.{self.decimals}f}"


def column(label: str, values: Iterable[float | None]) -> Column:
    """The column for metric ``label`` (``metric:measure``, or a bare metric name) showing
    ``values`` (stored units): the plots' unit, and decimals that give the largest value
    four significant digits (none past 1,000, at most three)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    metric = METRICS.get(label.partition(":")[0])
    shown = axis(label if ":" in label else f"{label}:avg", finite)
    unit = "" if metric is None else _UNITS[metric.unit]
    if metric is not None and metric.unit == "s" and shown.factor != 1.0:
        unit = "h"
    largest = max((abs(v) * shown.factor for v in finite), default=0.0)
    decimals = 3 if largest < 1e-9 else min(3, max(0, 3 - math.floor(math.log10(largest))))
    return Column(label, unit, shown.factor, decimals,
                  maximize=metric is not None and metric.maximize)


def front_columns(doc: FrontDocument, labels: Sequence[str]) -> dict[str, Column]:
    """A column per objective of ``front.json``'s content (``doc``, as
    :meth:`RunStore.read_front` gives it), fitted to everything its tables and plot show:
    the front and the baselines on both samples."""
    records = [r for e in doc.front for r in (e.metrics, e.test_metrics or {})]
    records += [*doc.baselines.values(), *doc.baselines_test.values()]
    return {lab: column(lab, [r.get(lab) for r in records]) for lab in labels}


def param_cells(values: Sequence[Any]) -> list[str]:
    """One parameter's values down a table column: four significant digits (a parameter on
    a log scale spans decades, so a fixed number of decimals would hide the small ones),
    thousands separated and never in exponent form; choices and flags as they are."""
    def cell(v: Any) -> str:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return str(v)
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"

    return [cell(v) for v in values]
