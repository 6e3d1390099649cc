"""Where things go on the HTML report's panels: each axis's range and readable ticks, and
labels (baselines, the starred configuration) placed where they cover no point and no other
label. The report's figure has a fixed size, so a panel's pixels are known here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from paretosearch.runs.plots import Axis

__all__ = ["FIGURE_WIDTH", "MARGIN", "Label", "Panel", "log_ticks", "place_labels", "span"]

FIGURE_WIDTH = 1100
"""The report's front figure, in pixels (its height is 480 per row of panels)."""
MARGIN = {"l": 80, "r": 20, "t": 30, "b": 70}
_PAD = 0.06
"""Each axis's range reaches this share of its span past the outermost point."""
_CHAR_PX, _LINE_PX = 6.4, 15.0
"""A label's size at 10 px text: width per character, height."""
_OFFSETS = [(dx * r, dy * r) for r in (14, 26, 42, 62) for dx, dy in
            ((1, -1), (1, 1), (-1, -1), (-1, 1), (1, 0), (-1, 0), (0, -1), (0, 1))]
"""Candidate label positions around a point, in pixels (y down): nearest first."""
_MARK_PX = 6.0


def span(values: Sequence[float], a: Axis) -> tuple[float, float]:
    """The axis range showing ``values`` (shown units): in log10 units on a log axis, as
    Plotly takes it."""
    shown = [math.log10(v) if a.scale == "log" else v for v in values
             if math.isfinite(v) and (a.scale != "log" or v > 0)]
    if not shown:
        return (0.0, 1.0)
    lo, hi = min(shown), max(shown)
    pad = _PAD * (hi - lo) if hi > lo else (0.5 if a.scale == "log" else abs(lo) * 0.1 or 1.0)
    return (lo - pad, hi + pad)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values on a log axis whose range is ``lo``..``hi`` (log10 units): 1-2-5 in each
    decade, or every whole digit where the range holds less than a decade, so every tick is
    labelled with its own number (never a lone "2 3 4 5")."""
    marks = (1, 2, 5) if hi - lo >= 1 else (1, 2, 3, 4, 5, 6, 7, 8, 9)
    out = [m * 10.0 ** d for d in range(math.floor(lo), math.ceil(hi) + 1) for m in marks]
    inside = [v for v in out if lo <= math.log10(v) <= hi]
    if len(inside) < 2:  # a narrow range: a few round numbers within it
        step = (10 ** hi - 10 ** lo) / 4
        inside = [10 ** lo + step * k for k in range(1, 4)]
    return inside


@dataclass(frozen=True)
class Panel:
    """One panel's axes and its size in pixels, to map a point to the screen."""

    x: Axis
    y: Axis
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    width: float
    height: float

    def pixels(self, xy: tuple[float, float]) -> tuple[float, float]:
        """A point (shown units) in pixels from the panel's top left corner."""
        def frac(v: float, a: Axis, r: tuple[float, float]) -> float:
            t = math.log10(v) if a.scale == "log" and v > 0 else v
            return (t - r[0]) / (r[1] - r[0] or 1.0)

        return (frac(xy[0], self.x, self.x_range) * self.width,
                (1 - frac(xy[1], self.y, self.y_range)) * self.height)


@dataclass(frozen=True)
class Label:
    """A placed label: its text and colour, the point (shown units), the text's offset from
    it in pixels (y down) and which side of the text touches the offset point."""

    text: str
    color: str
    xy: tuple[float, float]
    dx: float
    dy: float
    xanchor: str
    yanchor: str


def place_labels(panel: Panel, marks: Sequence[tuple[float, float]],
                 queued: Sequence[tuple[str, tuple[float, float], str]],
                 numbers: Sequence[tuple[str, tuple[float, float]]] = ()) -> list[Label]:
    """Each queued label (text, point, colour) at the nearest offset where it covers no
    mark, no point number (drawn just above its point) and no label placed before it, and
    stays inside the panel (the least-covering offset if none is free)."""
    dots = [panel.pixels(m) for m in marks]
    taken: list[tuple[float, float, float, float]] = []
    for text, xy in numbers:
        px, py = panel.pixels(xy)
        w = 0.85 * _CHAR_PX * len(text)
        taken.append((px - w / 2, py - 8 - 12, px + w / 2, py - 8))
    out = []
    for text, xy, color in queued:
        px, py = panel.pixels(xy)
        w, h = _CHAR_PX * len(text) + 4, _LINE_PX
        best: tuple[float, int, tuple[float, float, float, float]] | None = None
        for k, (dx, dy) in enumerate(_OFFSETS):
            x0 = px + dx - (w if dx < 0 else w / 2 if dx == 0 else 0)
            y0 = py + dy - (h if dy < 0 else h / 2 if dy == 0 else 0)
            box = (x0, y0, x0 + w, y0 + h)
            cost = (sum(_covers(box, d) for d in dots) + 3 * sum(_overlap(box, b) for b in taken)
                    + 10 * (box[0] < 0 or box[1] < 0 or box[2] > panel.width
                            or box[3] > panel.height))
            if best is None or cost < best[0]:
                best = (cost, k, box)
            if cost == 0:
                break
        assert best is not None
        dx, dy = _OFFSETS[best[1]]
        taken.append(best[2])
        out.append(Label(text, color, xy, dx, dy,
                         "right" if dx < 0 else "center" if dx == 0 else "left",
                         "bottom" if dy < 0 else "middle" if dy == 0 else "top"))
    return out


def _covers(box: tuple[float, float, float, float], dot: tuple[float, float]) -> bool:
    return (box[0] - _MARK_PX < dot[0] < box[2] + _MARK_PX
            and box[1] - _MARK_PX < dot[1] < box[3] + _MARK_PX)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]
             ) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
