"""Pictures of a front: objectives against each other, with the baselines as reference points.

Two objectives give one scatter (as in the PCS paper's Fig. 3 and 5b); more give a panel per
pair plus a parallel-coordinates panel. Each configuration appears twice, joined by a thin
line: filled on the training sample, hollow re-evaluated on the test sample. Baselines are
red squares (filled on train, hollow on test), labelled where the label covers no point; the
chosen configuration is a star; each front point carries its number (the tables' ``#``). A
configuration that a baseline dominates on the test sample is grey, not blue. Axis titles name
the metric, its measure and its unit
(:func:`axis`); an axis of positive values is logarithmic where they span more than 20x, or
where a few far values would crowd the rest into a corner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paretosearch.io import atomic_write
from simulator.metrics import METRICS

if TYPE_CHECKING:
    from paretosearch.runs.records import FrontDocument

__all__ = ["Axis", "Marked", "Point", "axes_for", "axis", "draw_front", "parallel_coordinates",
           "plot_front", "point_xy", "points"]

LOG_SPAN = 20.0
"""An axis is logarithmic when its positive values span more than this factor."""
HOURS_FROM_S = 5000.0
"""Times are shown in hours once the largest exceeds this many seconds."""
_MEASURES = {"avg": "mean", "p50": "median", "max": "max", "min": "min"}


@dataclass(frozen=True)
class Axis:
    """How to show one objective: a title with its unit, a factor from the stored values,
    and the scale (``linear`` or ``log``)."""

    title: str
    factor: float
    scale: str = "linear"


@dataclass(frozen=True)
class Marked:
    """A configuration drawn as a labelled star (the chosen one, or production in a retune):
    its records on the training and, if evaluated, the test sample."""

    label: str
    train: Mapping[str, float]
    test: Mapping[str, float] | None = None


def axis(label: str, values: Sequence[float | None]) -> Axis:
    """The axis for objective ``label`` (``metric:measure``) showing ``values``."""
    metric, _, measure = label.partition(":")
    m = METRICS.get(metric)
    if m is None:  # not ours (a benchmark's own column): as it is
        return _scaled(label, 1.0, values)
    finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
    unit, factor = {"s": ("s", 1.0), "%": ("%", 1.0), "frac": ("%", 100.0), "x": ("x", 1.0),
                    "count": ("", 1.0)}[m.unit]
    if m.unit == "s" and finite and max(finite) > HOURS_FROM_S:
        unit, factor = "h", 1 / 3600
    name = m.title if m.per_run else f"{_MEASURES.get(measure, measure)} {m.title}"
    notes = [n for n in (unit, "higher is better" if m.maximize else "") if n]
    return _scaled(f"{name} ({', '.join(notes)})" if notes else name, factor, values)


def _scaled(title: str, factor: float, values: Sequence[float | None]) -> Axis:
    """The axis's scale: logarithmic when every value is positive and they span more than
    ``LOG_SPAN``, or a few far values would crowd the rest into a corner; linear otherwise
    (values at or near 0, such as FIFO's prediction error, belong on a linear axis)."""
    shown = sorted(v * factor for v in values if v is not None and math.isfinite(v))
    if not shown or shown[0] <= 1e-6 * shown[-1]:  # zeros, or float noise around them
        return Axis(title, factor)
    if shown[-1] > LOG_SPAN * shown[0] or _squeezed(shown):
        return Axis(title, factor, "log")
    return Axis(title, factor)


def _squeezed(values: Sequence[float]) -> bool:
    """Whether a linear axis would crowd most of these sorted positive values into its lowest
    tenth because of a few far above them (a span of 3x or more)."""
    lo, hi = values[0], values[-1]
    median = values[len(values) // 2]
    return hi > 3 * lo and median - lo < 0.1 * (hi - lo)


def plot_front(doc: FrontDocument, path: str | Path, *, title: str = "",
               marked: Marked | None = None) -> Path:
    """Draw ``front.json``'s content (``doc``) to a PNG at ``path``, written atomically;
    ``marked``: a configuration to star."""
    import matplotlib.pyplot as plt

    fig = draw_front(doc, title=title, marked=marked)

    def write(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=110)

    try:
        return atomic_write(path, write)
    finally:
        plt.close(fig)


def draw_front(doc: FrontDocument, *, title: str = "", marked: Marked | None = None
               ) -> Any:
    """The figure :func:`plot_front` writes (a matplotlib ``Figure``; close it after use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    front = doc.front
    labels = list(front[0].objectives)
    pairs = list(combinations(range(len(labels)), 2)) or [(0, 0)]
    panels = len(pairs) + (len(labels) >= 3)
    cols = min(3, panels) if panels != 4 else 2
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 5.0 * rows), squeeze=False)
    drawn = points(doc, marked)
    axes_of = axes_for(drawn, labels)
    queued = [_scatter(ax, drawn, axes_of[labels[i]], axes_of[labels[j]], labels[i], labels[j])
              for ax, (i, j) in zip(axes.flat, pairs, strict=False)]
    if len(labels) >= 3:
        _parallel(axes.flat[len(pairs)], drawn, labels, axes_of)
    for ax in list(axes.flat)[panels:]:
        ax.set_visible(False)
    handles = _legend(marked, any(p.dominated_by for p in drawn))
    ncol = len(handles) if cols > 1 else 3
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1 / rows if ncol < len(handles) else 0.05 / rows, 1, 1))
    fig.canvas.draw()  # label placement needs the final layout
    for ax, labels_here in zip(axes.flat, queued, strict=False):
        _place_labels(fig, ax, labels_here)
    return fig


@dataclass(frozen=True)
class Point:
    """One configuration as drawn: its kind (``front``, ``baseline``, ``chosen``), label
    (the front index, the baseline's name, or the star's label), train and test records,
    its parameters and the baselines that dominate it on the test sample (front members
    only)."""

    kind: str
    label: str
    train: Mapping[str, Any]
    test: Mapping[str, Any] | None
    params: Mapping[str, Any] | None = None
    dominated_by: tuple[str, ...] = ()

    @property
    def color(self) -> str:
        """Its colour: its kind's, grey for a front member a baseline dominates on test."""
        return DOMINATED_COLOR if self.dominated_by else _STYLE[self.kind][1]


_STYLE = {"front": ("o", "tab:blue", 36), "baseline": ("s", "tab:red", 36),
          "chosen": ("*", "goldenrod", 180)}
DOMINATED_COLOR = "tab:gray"
"""The colour of a front member that a baseline dominates on the test sample."""


def points(doc: FrontDocument, marked: Marked | None) -> list[Point]:
    """What a picture of ``front.json``'s content (``doc``, as :meth:`RunStore.read_front`
    gives it) shows: the front, the baselines
    (on both samples where ``baselines_test`` has them) and the starred configuration."""
    out = [Point("front", str(i), e.metrics, e.test_metrics, e.params, e.dominated_by or ())
           for i, e in enumerate(doc.front)]
    out += [Point("baseline", name, rec, doc.baselines_test.get(name))
            for name, rec in doc.baselines.items()]
    if marked is not None:
        out.append(Point("chosen", marked.label, marked.train, marked.test))
    return out


def axes_for(shown: Sequence[Point], labels: Sequence[str]) -> dict[str, Axis]:
    """Each objective's :func:`axis` for everything shown, on both samples."""
    return {lab: axis(lab, [v for p in shown for v in (p.train.get(lab), *(
        [p.test.get(lab)] if p.test else []))]) for lab in labels}


def point_xy(rec: Mapping[str, Any] | None, x: str, y: str, ax_x: Axis, ax_y: Axis
             ) -> tuple[float, float] | None:
    """A record's point in shown units, or None where a metric does not apply to it."""
    if rec is None or rec.get(x) is None or rec.get(y) is None:
        return None
    px, py = float(rec[x]) * ax_x.factor, float(rec[y]) * ax_y.factor
    return (px, py) if math.isfinite(px) and math.isfinite(py) else None


def parallel_coordinates(shown: Sequence[Point], labels: Sequence[str],
                         axes: Mapping[str, Axis]
                         ) -> tuple[list[list[float]], dict[str, float], dict[str, float]]:
    """Each point's training record with every objective scaled to its range over
    everything shown (NaN where it does not apply), and each range's ends in shown units."""
    values = {lab: [float(p.train[lab]) * axes[lab].factor for p in shown
                    if p.train.get(lab) is not None and math.isfinite(float(p.train[lab]))]
              for lab in labels}
    lo = {lab: min(v, default=0.0) for lab, v in values.items()}
    hi = {lab: max(v, default=1.0) for lab, v in values.items()}
    rows = []
    for p in shown:
        row = []
        for lab in labels:
            v = p.train.get(lab)
            row.append((float(v) * axes[lab].factor - lo[lab]) / (hi[lab] - lo[lab] or 1.0)
                       if v is not None and math.isfinite(float(v)) else math.nan)
        rows.append(row)
    return rows, lo, hi


def _scatter(ax: Any, drawn: Sequence[Point], ax_x: Axis, ax_y: Axis, x: str, y: str
             ) -> list[tuple[str, tuple[float, float], str]]:
    """One panel: every point on train (filled) and test (hollow), joined. Returns the labels
    of the baselines and the chosen configuration, for :func:`_place_labels`."""
    queued = []
    for p in drawn:
        marker, _, size = _STYLE[p.kind]
        color = p.color
        train, test = point_xy(p.train, x, y, ax_x, ax_y), point_xy(p.test, x, y, ax_x, ax_y)
        z = 4 if p.kind == "chosen" else 3
        if train and test:
            ax.plot([train[0], test[0]], [train[1], test[1]], color=color, lw=0.7, alpha=0.45,
                    zorder=1)
        if train:
            ax.scatter(*train, marker=marker, color=color, s=size, zorder=z)
        if test:
            ax.scatter(*test, marker=marker, facecolors="white", edgecolors=color, s=size,
                       zorder=z)
        if p.kind != "front" and train:
            queued.append((p.label, train, color))
    # each front point's number (the table's #), placed after the names, as they are
    queued += [(p.label, xy, _STYLE["front"][1]) for p in drawn if p.kind == "front"
               and (xy := point_xy(p.train, x, y, ax_x, ax_y))]
    _style_axis(ax, "x", ax_x)
    _style_axis(ax, "y", ax_y)
    ax.grid(alpha=0.3, which="major")
    return queued


def _style_axis(ax: Any, which: str, a: Axis) -> None:
    """Title, scale and readable ticks (at most 6, thousands separated) for one axis."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

    getattr(ax, f"set_{which}label")(a.title)
    getattr(ax, f"set_{which}scale")(a.scale)
    target = ax.xaxis if which == "x" else ax.yaxis
    if a.scale == "linear":
        target.set_major_locator(MaxNLocator(nbins=6))
    else:
        target.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: _num(v)))
    target.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _parallel(ax: Any, drawn: Sequence[Point], labels: Sequence[str],
              axes_of: Mapping[str, Axis]) -> None:
    """Parallel coordinates of the training records (:func:`parallel_coordinates`); lower
    is better on every axis but those that say otherwise."""
    rows, lo, hi = parallel_coordinates(drawn, labels, axes_of)
    for p, ys in zip(drawn, rows, strict=True):
        marker, color = _STYLE[p.kind][0], p.color
        ax.plot(range(len(labels)), ys, color=color, marker=marker, ms=4,
                lw=2.2 if p.kind == "chosen" else 1.0,
                alpha=0.5 if p.kind == "front" else 0.9, zorder=2 if p.kind == "front" else 3)
        if p.kind != "front" and not math.isnan(ys[-1]):
            ax.annotate(p.label, (len(labels) - 1, ys[-1]), xytext=(5, 0),
                        textcoords="offset points", va="center", fontsize=7, color=color)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([axes_of[lab].title.replace(" (", "\n(") for lab in labels], fontsize=7)
    ax.set_yticks([0, 1])
    ax.set_yticklabels(["lowest", "highest"])
    for k, lab in enumerate(labels):
        ax.axvline(k, color="0.6", lw=0.8, zorder=1)
        for y, v in ((0.0, lo[lab]), (1.0, hi[lab])):
            ax.annotate(_num(v), (k, y), xytext=(3, -10 if y == 0 else 4),
                        textcoords="offset points", fontsize=7, color="0.35")
    ax.set_xlim(-0.2, len(labels) - 0.6)
    ax.set_title("all objectives (training sample)", fontsize=9)


def _num(value: float) -> str:
    """A tick or range label: 4 significant digits, thousands separated, float noise around
    0 shown as 0."""
    return "0" if abs(value) < 1e-9 else f"{value:,.4g}"


def _legend(marked: Marked | None, dominated: bool) -> list[Any]:
    from matplotlib.lines import Line2D

    def mark(kind: str, label: str, hollow: bool, color: str | None = None) -> Any:
        marker, own, size = _STYLE[kind]
        color = color or own
        return Line2D([], [], ls="", marker=marker, color=color, ms=math.sqrt(size) * 1.1,
                      markerfacecolor="white" if hollow else color, label=label)

    return [mark("front", "front, train", False), mark("front", "front, test", True),
            *([mark("front", "dominated on test by a baseline", False, DOMINATED_COLOR)]
              if dominated else []),
            Line2D([], [], color="tab:blue", lw=0.7, alpha=0.6, label="train → test"),
            mark("baseline", "baseline, train", False), mark("baseline", "baseline, test", True),
            *([mark("chosen", marked.label, False)] if marked else [])]


_OFFSETS = [(dx * r, dy * r) for r in (7, 16, 30, 48) for dx, dy in
            ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))]
"""Candidate label positions around a point, in pixels: nearest first."""
_MARKER_PX = 7.0
"""Half the size of a marker, in pixels: a label keeps this far from every point."""


def _place_labels(fig: Any, ax: Any, queued: Sequence[tuple[str, tuple[float, float], str]]
                  ) -> None:
    """Write each queued label (text, point, colour) at the nearest position where it covers
    no point and no earlier label and stays inside the panel (the least-covering one if none
    is free); a leader line joins a label set far from its point."""
    renderer = fig.canvas.get_renderer()
    dots = [tuple(xy) for coll in ax.collections for xy in coll.get_offsets()]
    shown = ax.transData.transform(dots) if dots else []
    frame = ax.get_window_extent(renderer)
    taken: list[Any] = []
    for text, xy, color in queued:
        probe = ax.annotate(text, xy, xytext=(0, 0), textcoords="offset points", fontsize=8)
        best: tuple[float, float, float, Any] | None = None
        for dx, dy in _OFFSETS:
            probe.xyann = (dx * 72 / fig.dpi, dy * 72 / fig.dpi)
            probe.set_ha("left" if dx > 0 else "right" if dx < 0 else "center")
            probe.set_va("bottom" if dy > 0 else "top" if dy < 0 else "center")
            box = probe.get_window_extent(renderer)
            cost = sum(_near(box, px, py) for px, py in shown) + 3 * sum(
                box.overlaps(b) for b in taken) + 10 * (not _inside(box, frame))
            if best is None or cost < best[0]:
                best = (cost, dx, dy, box)
            if cost == 0:
                break
        probe.remove()
        assert best is not None
        _, bx, by, box = best
        ax.annotate(text, xy, xytext=(bx * 72 / fig.dpi, by * 72 / fig.dpi),
                    textcoords="offset points", fontsize=8, color=color,
                    ha="left" if bx > 0 else "right" if bx < 0 else "center",
                    va="bottom" if by > 0 else "top" if by < 0 else "center",
                    arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6, "shrinkA": 0,
                                "shrinkB": _MARKER_PX} if math.hypot(bx, by) > 14 else None)
        taken.append(box)


def _near(box: Any, px: float, py: float) -> bool:
    """Whether a marker at ``(px, py)`` (display pixels) touches ``box``."""
    return bool(box.x0 - _MARKER_PX < px < box.x1 + _MARKER_PX
                and box.y0 - _MARKER_PX < py < box.y1 + _MARKER_PX)


def _inside(box: Any, frame: Any) -> bool:
    return bool(box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0
                and box.y1 <= frame.y1)
