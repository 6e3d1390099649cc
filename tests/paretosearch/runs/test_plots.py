"""Plots people read (paretosearch/plots.py): axis titles with units, log axes where values
span far, labels that cover no point, train and test of one configuration joined."""

from __future__ import annotations

import itertools
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest

from paretosearch.runs.plots import Marked, axis, draw_front, plot_front
from paretosearch.runs.records import FrontDocument, FrontEntry


@pytest.mark.parametrize(("label", "values", "title", "factor", "scale"), [
    ("jct:avg", [100.0, 900.0], "mean job completion time (s)", 1.0, "linear"),
    # hours once values exceed a few thousand seconds; 30x apart: logarithmic
    ("jct:p99", [1e4, 3e5], "p99 job completion time (h)", 1 / 3600, "log"),
    ("wait:p50", [7200.0, 8000.0], "median queueing delay (h)", 1 / 3600, "linear"),
    # FIFO's prediction error is 0 (or float noise around it): linear, whatever the span
    ("pred_err:avg", [2.4e-15, 0.2, 1.5], "mean JCT prediction error (%)", 1.0, "linear"),
    ("utilization:avg", [0.4, 0.5], "GPUs allocated (%, higher is better)", 100.0, "linear"),
    ("makespan:max", [5e4, 6e4], "makespan (h)", 1 / 3600, "linear"),
    ("preemptions:max", [1.0, 3.0], "max preemptions", 1.0, "linear"),
    # 6.7x apart, but one far point would crowd the other nine into the lowest tenth
    ("jct:avg", [27_000.0] * 9 + [182_621.0], "mean job completion time (h)", 1 / 3600, "log"),
    ("not_a_metric", [1.0, 2.0], "not_a_metric", 1.0, "linear"),
])
def test_axis_titles_units_and_scales(label: str, values: list[float], title: str,
                                      factor: float, scale: str) -> None:
    a = axis(label, values)
    assert (a.title, a.scale) == (title, scale)
    assert a.factor == pytest.approx(factor)


def _doc(objectives: tuple[str, ...]) -> FrontDocument:
    """A front whose baselines sit right beside its points (labels must go elsewhere)."""
    rng = np.random.default_rng(3)
    front = []
    for k in range(8):
        metrics = {lab: float(10 + k + rng.random()) for lab in objectives}
        test = {lab: v * 1.3 for lab, v in metrics.items()}
        front.append(FrontEntry({"T": float(k)}, dict(metrics), metrics, test))
    near = {f"b{k}": {lab: v + 0.05 for lab, v in front[k].metrics.items()}
            for k in range(0, 8, 2)}
    return FrontDocument(front, baselines=near, baselines_test={
        n: {lab: v * 1.2 for lab, v in r.items()} for n, r in near.items()})


@pytest.mark.parametrize("objectives", [("jct:avg", "wait:avg"),
                                        ("jct:avg", "wait:avg", "makespan:avg")])
def test_labels_cover_no_point_and_train_joins_test(objectives: tuple[str, ...]) -> None:
    doc = _doc(objectives)
    fig = draw_front(doc, marked=Marked("chosen", doc.front[3].metrics,
                                        doc.front[3].test_metrics))
    try:
        pairs = list(itertools.combinations(objectives, 2))
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert len(panels) == len(pairs) + (len(objectives) >= 3)  # + parallel coordinates
        renderer = fig.canvas.get_renderer()
        for ax, (x, y) in zip(panels, pairs, strict=False):
            assert ax.get_xlabel().startswith("mean ") and ax.get_xlabel().endswith("(s)")
            dots = ax.transData.transform([tuple(p) for c in ax.collections
                                           for p in c.get_offsets()])
            texts = [t for t in ax.texts if t.get_text()]
            # the names, and each front point's number (the tables' #)
            assert sorted(t.get_text() for t in texts) == sorted(
                ["b0", "b2", "b4", "b6", "chosen", *map(str, range(len(doc.front)))])
            for t in texts:
                box = t.get_window_extent(renderer)
                assert not any(box.x0 < px < box.x1 and box.y0 < py < box.y1
                               for px, py in dots), t.get_text()
            # one line per configuration with both samples: 8 front, 4 baselines, chosen
            joins = [ln for ln in ax.lines if len(ln.get_xdata()) == 2]
            assert len(joins) == 13
            front = doc.front[0]
            assert any(list(ln.get_xdata()) == [front.metrics[x], front.test_metrics[x]]
                       and list(ln.get_ydata()) == [front.metrics[y],
                                                    front.test_metrics[y]] for ln in joins)
    finally:
        plt.close(fig)


def test_plot_front_writes_a_png(tmp_path: Any) -> None:
    path = plot_front(_doc(("jct:avg", "pred_err:avg")), tmp_path / "f.png", title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*"))  # written through a temporary file, renamed
