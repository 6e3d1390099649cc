"""``paretosearch report RUN``: one self-contained HTML page of a run, to explore the front.

Plotly draws it, its JavaScript bundle embedded, so the page opens without a network. The
page holds: the front (one panel per pair of objectives, plus parallel coordinates for three
or more), where hovering a point shows the configuration's parameters and its training and
test metrics and clicking it shows the ``select`` / ``export`` commands for it (a
configuration a baseline dominates on the test sample is grey, and named so); the front's
warnings (:func:`~paretosearch.runs.records.front_warnings`); the baselines on both samples;
the hypervolume per generation; the parameters left out of the search and why; and, for a
retune, the production config's drift.
"""

from __future__ import annotations

import html
import json
import math
import shlex
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from paretosearch.definition import SearchDefinition
from paretosearch.io import write_text
from paretosearch.runs.plots import (
    Axis,
    Marked,
    Point,
    axes_for,
    parallel_coordinates,
    point_xy,
    points,
)
from paretosearch.runs.records import FrontDocument, FrontEntry
from paretosearch.runs.report import describe_sample, drift_rows, fmt
from paretosearch.runs.report_layout import (
    FIGURE_WIDTH,
    MARGIN,
    Panel,
    log_ticks,
    place_labels,
    span,
)
from paretosearch.runs.retune_summary import ProductionCheck, RetuneSummary
from paretosearch.runs.store import RunStore
from paretosearch.runs.units import Column, front_columns, param_cells

__all__ = ["FRONT_TRACE", "script_json", "write_html_report"]

FRONT_TRACE = "front-train"
"""The ``uid`` of the first panel's trace of the front on the training sample (one mark per
front member); a headless browser test counts its marks."""
_COLORS = {"front": "#1f77b4", "baseline": "#d62728", "chosen": "#b8860b"}
_DOMINATED = "#7f7f7f"
"""A front member that a baseline dominates on the test sample (grey, as in ``front.png``)."""
_CLICK = """
var gd = document.getElementById('{plot_id}');
gd.on('plotly_click', function (ev) {
  var p = ev.points[0];
  if (p.customdata === undefined || p.customdata === null) { return; }
  document.getElementById('command').textContent = COMMANDS[p.customdata];
});
"""


def write_html_report(run: str | Path, out: str | Path | None = None, *,
                      retune: RetuneSummary | None = None) -> Path:
    """Write the report of run directory ``run`` to ``out`` (default ``RUN/report.html``),
    atomically; ``retune``: the run's retune summary (default: its ``retune.json``, if any)."""
    import plotly.graph_objects as go

    store = RunStore(run)
    doc, spec = store.read_front(), store.read_spec()
    if retune is None and (store.path / "retune.json").exists():
        retune = store.read_retune()
    front = doc.front
    labels = list(spec.objectives)
    chosen = store.chosen_index(front)
    prod = retune.production if retune else None
    marked = (Marked("production", prod.train, prod.test) if prod else
              Marked(f"chosen (#{chosen})", front[chosen].metrics,
                     front[chosen].test_metrics) if chosen is not None else None)
    name = str(store.path.resolve())  # the run itself: a link such as runs/latest moves on
    quoted = shlex.quote(name)  # the commands are copied into a shell
    title = f"Run {store.path.resolve().name}: {' vs '.join(labels)}"
    commands = [f"paretosearch select {quoted} --index {i}\n"
                f"paretosearch export {quoted} --index {i} --format kueue"
                for i in range(len(front))]
    front_fig = _front_figure(go, doc, labels, marked)
    columns = front_columns(doc, labels)
    hv = doc.hypervolume
    final = hv[-1][1] if hv else 0.0
    hv_fig = go.Figure(go.Scatter(x=[n for n, _ in hv],
                                  y=[100 * h / final if final else None for _, h in hv],
                                  mode="lines+markers"))
    hv_fig.update_layout(height=320, margin={"t": 30}, xaxis_title="evaluations",
                         yaxis_title="% of the final front's hypervolume",
                         yaxis_ticksuffix=" %", yaxis_range=[0, 105])  # from 0: no zoom
                                                                      # into a 0.001 % change
    parts = [
        f"<h1>{html.escape(title)}</h1>", _summary(spec, doc, retune, name),
        *(f"<p class='warning'><b>Warning:</b> {html.escape(m)}.</p>" for m in doc.warnings()),
        "<h2>Pareto front</h2>",
        "<p>Filled: the training sample; hollow: the same configuration on the test sample, "
        "joined by a line. Hover a point for its parameters and metrics; click a front point "
        "for the commands that choose and export it.</p>",
        front_fig.to_html(full_html=False, include_plotlyjs=True, div_id="front",
                          post_script=_CLICK),
        '<pre id="command">(click a point of the front)</pre>',
        _front_table(front, labels, chosen, columns), "<h2>Baselines</h2>",
        _baselines_table(doc, labels, columns),
        "<h2>Hypervolume per generation</h2>",
        "<p>The area the front on the training sample dominates, up to a reference point "
        "past the worst values, as a share of the final front's (its raw value depends on "
        "the objectives' units).</p>",
        hv_fig.to_html(full_html=False, include_plotlyjs=False, div_id="hypervolume"),
        "<h2>Parameters not searched</h2>", _dropped(doc.dropped)]
    if prod:
        parts += ["<h2>Production config</h2>", _drift(prod, labels)]
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>paretosearch: {html.escape(title)}</title><style>{_CSS}</style>"
            f"<script>var COMMANDS = {script_json(commands)};</script></head>"
            f"<body>{''.join(parts)}</body></html>")
    return write_text(Path(out) if out is not None else store.path / "report.html", page)


_SCRIPT_UNSAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                  0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&``
    (a ``</script>`` in a run's name would end the script) and no U+2028/9 (line ends to
    older JavaScript), each written as its ``\\u`` escape, which JSON reads back the same."""
    return json.dumps(value).translate(_SCRIPT_UNSAFE)


def _front_figure(go: Any, doc: FrontDocument, labels: Sequence[str],
                  marked: Marked | None) -> Any:
    """Pairwise panels of the objectives, and parallel coordinates for three or more."""
    from plotly.subplots import make_subplots

    pairs = list(combinations(range(len(labels)), 2)) or [(0, 0)]
    panels = len(pairs) + (len(labels) >= 3)
    cols = 1 if panels == 1 else 2
    rows = -(-panels // cols)
    fig = make_subplots(rows=rows, cols=cols, horizontal_spacing=0.12, vertical_spacing=0.14)
    drawn = points(doc, marked)
    axes = axes_for(drawn, labels)
    hover = [_hover(p, axes) for p in drawn]
    width = (FIGURE_WIDTH - MARGIN["l"] - MARGIN["r"]) * (1 - 0.12 * (cols - 1)) / cols
    height = (480 * rows - MARGIN["t"] - MARGIN["b"]) * (1 - 0.14 * (rows - 1)) / rows
    ranges = {lab: span([v for p in drawn for rec in (p.train, p.test) if rec
                         and rec.get(lab) is not None
                         for v in [float(rec[lab]) * axes[lab].factor]], axes[lab])
              for lab in labels}
    for k, (i, j) in enumerate(pairs):
        row, col = k // cols + 1, k % cols + 1
        x, y = labels[i], labels[j]
        for trace in _pair_traces(go, drawn, hover, x, y, axes, first=k == 0):
            fig.add_trace(trace, row=row, col=col)
        for which, lab in (("x", x), ("y", y)):
            a, r = axes[lab], ranges[lab]
            ticks = log_ticks(*r) if a.scale == "log" else None
            getattr(fig, f"update_{which}axes")(
                title_text=a.title, type="log" if a.scale == "log" else "linear", range=r,
                tickvals=ticks, ticktext=[fmt(v) for v in ticks] if ticks else None,
                row=row, col=col)
        panel = Panel(axes[x], axes[y], ranges[x], ranges[y], width, height)
        marks = [xy for p in drawn for rec in (p.train, p.test)
                 if (xy := point_xy(rec, x, y, axes[x], axes[y]))]
        queued = [(p.label, xy, _COLORS[p.kind]) for p in drawn if p.kind != "front"
                  and (xy := point_xy(p.train, x, y, axes[x], axes[y]))]
        numbers = [(p.label, xy) for p in drawn if p.kind == "front"
                   and (xy := point_xy(p.train, x, y, axes[x], axes[y]))]
        for placed in place_labels(panel, marks, queued, numbers):
            fig.add_annotation(
                x=_position(placed.xy[0], axes[x]), y=_position(placed.xy[1], axes[y]),
                text=html.escape(placed.text), ax=placed.dx, ay=placed.dy,
                xanchor=placed.xanchor, yanchor=placed.yanchor, showarrow=True, arrowhead=0,
                arrowwidth=0.7, arrowcolor=placed.color, standoff=4,
                font={"color": placed.color, "size": 10}, row=row, col=col)
    if len(labels) >= 3:
        k = len(pairs)
        for trace in _parallel_traces(go, drawn, hover, labels, axes):
            fig.add_trace(trace, row=k // cols + 1, col=k % cols + 1)
        fig.update_xaxes(tickvals=list(range(len(labels))),
                         ticktext=[axes[lab].title for lab in labels],
                         row=k // cols + 1, col=k % cols + 1)
        fig.update_yaxes(tickvals=[0, 1], ticktext=["lowest", "highest"],
                         row=k // cols + 1, col=k % cols + 1)
    fig.update_layout(width=FIGURE_WIDTH, height=480 * rows, hovermode="closest",
                      legend={"orientation": "h"}, margin=MARGIN)
    return fig


def _position(v: float, a: Axis) -> float:
    """A point's coordinate as Plotly places annotations: log10 of it on a log axis."""
    return math.log10(v) if a.scale == "log" and v > 0 else v


def _hover(p: Point, axes: Mapping[str, Axis]) -> str:
    """A point's hover text: what it is, its parameters, each objective on both samples in
    the axes' units."""
    head = f"<b>#{p.label}</b>" if p.kind == "front" else (
        f"<b>{html.escape(p.label)}</b>" + (" (baseline)" if p.kind == "baseline" else ""))
    lines = [head, *(f"{k} = {_value(v)}" for k, v in (p.params or {}).items())]
    for lab, a in axes.items():
        def shown(rec: Mapping[str, Any] | None, lab: str = lab, a: Axis = a) -> str:
            v = (rec or {}).get(lab)
            return fmt(None if v is None else float(v) * a.factor)
        lines.append(f"{html.escape(a.title)}: {shown(p.train)} (test {shown(p.test)})")
    if p.dominated_by:
        lines.append(f"dominated on test by {html.escape(', '.join(p.dominated_by))}")
    return "<br>".join(lines)


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else html.escape(str(v))


def _pair_traces(go: Any, drawn: Sequence[Point], hover: Sequence[str], x: str, y: str,
                 axes: Mapping[str, Axis], *, first: bool) -> list[Any]:
    """Train (filled) and test (hollow) marks of each kind, and the lines joining them."""
    def at(rec: Mapping[str, Any] | None) -> tuple[float, float] | None:
        return point_xy(rec, x, y, axes[x], axes[y])

    traces = []
    lx: list[float | None] = []
    ly: list[float | None] = []
    for kind, symbol, size in (("front", "circle", 9), ("baseline", "square", 9),
                               ("chosen", "star", 16)):
        mine = [(p, h) for p, h in zip(drawn, hover, strict=True) if p.kind == kind]
        for sample in ("train", "test"):
            placed = [((p, h), at(p.train if sample == "train" else p.test)) for p, h in mine]
            shown = [(p, xy) for p, xy in placed if xy is not None]
            if not shown:
                continue
            color = _COLORS[kind]
            colors = [_DOMINATED if p.dominated_by else color for (p, _), _ in shown]
            traces.append(go.Scatter(
                x=[xy[0] for _, xy in shown], y=[xy[1] for _, xy in shown],
                # front points carry their number (the table's #); the baselines' and the
                # star's names are placed apart as annotations (place_labels)
                mode="markers+text" if kind == "front" and sample == "train" else "markers",
                text=[p.label for (p, _), _ in shown] if kind == "front" else None,
                textposition="top center", textfont={"color": color, "size": 9},
                marker={"symbol": symbol if sample == "train" else f"{symbol}-open",
                        "size": size, "color": colors, "line": {"color": colors, "width": 1.5}},
                hovertext=[h for (_, h), _ in shown], hovertemplate="%{hovertext}<extra></extra>",
                customdata=[int(p.label) for (p, _), _ in shown] if kind == "front" else None,
                name=f"{kind}, {sample}", legendgroup=f"{kind}-{sample}", showlegend=first,
                uid=FRONT_TRACE if first and kind == "front" and sample == "train" else None))
        for p, _ in mine:
            a, b = at(p.train), at(p.test)
            if a and b:
                lx += [a[0], b[0], None]
                ly += [a[1], b[1], None]
    traces.insert(0, go.Scatter(x=lx, y=ly, mode="lines", hoverinfo="skip", name="train → test",
                                line={"color": "rgba(31,119,180,0.35)", "width": 1},
                                legendgroup="lines", showlegend=first))
    return traces


def _parallel_traces(go: Any, drawn: Sequence[Point], hover: Sequence[str],
                     labels: Sequence[str], axes: Mapping[str, Axis]) -> list[Any]:
    """One line per configuration over the objectives (:func:`parallel_coordinates`)."""
    rows, _, _ = parallel_coordinates(drawn, labels, axes)
    return [go.Scatter(
        x=list(range(len(labels))), y=[None if math.isnan(v) else v for v in ys],
        mode="lines+markers",
        line={"color": _DOMINATED if p.dominated_by else _COLORS[p.kind],
              "width": 3 if p.kind == "chosen" else 1},
        opacity=0.5 if p.kind == "front" else 0.9, hovertext=[text] * len(labels),
        hovertemplate="%{hovertext}<extra></extra>", showlegend=False,
        customdata=[int(p.label)] * len(labels) if p.kind == "front" else None)
        for p, ys, text in zip(drawn, rows, hover, strict=True)]


def _summary(spec: SearchDefinition, doc: FrontDocument,
             retune: RetuneSummary | None, folder: str) -> str:
    hv = doc.hypervolume
    items = [f"run folder <code>{html.escape(folder)}</code>",
             f"policy <code>{html.escape(spec.policy)}</code> on profile "
             f"<code>{html.escape(spec.profile)}</code>",
             "objectives: " + ", ".join(f"<code>{html.escape(o)}</code>"
                                        for o in spec.objectives),
             f"{hv[-1][0] if hv else 0:,} evaluations, seed "
             f"{spec.settings.seed if spec.settings else None}"
             + ("" if doc.done else " (still running or interrupted)"),
             "training sample: " + html.escape("; ".join(map(describe_sample, spec.train))),
             "test sample: " + html.escape("; ".join(map(describe_sample, spec.test)))]
    if retune:
        w = retune.start.window
        items.append(f"retune window: {w.jobs:,} jobs, arrivals {w.start_s:,.0f} s .. "
                     f"{w.end_s:,.0f} s")
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _front_table(front: Sequence[FrontEntry], labels: Sequence[str],
                 chosen: int | None, columns: Mapping[str, Column]) -> str:
    params = list(front[0].params) if front else []
    head = ["#", *(c for lab in labels for c in (columns[lab].header, "test")),
            "dominated on test by", *params]
    shown = {p: param_cells([e.params[p] for e in front]) for p in params}
    rows = []
    for i, e in enumerate(front):
        test = e.test_metrics or {}
        rows.append([f"{i} (chosen)" if i == chosen else str(i),
                     *(c for lab in labels for c in (columns[lab].cell(e.objectives[lab]),
                                                     columns[lab].cell(test.get(lab)))),
                     html.escape(", ".join(e.dominated_by or ())),
                     *(html.escape(shown[p][i]) for p in params)])
    return _table(head, rows)


def _baselines_table(doc: FrontDocument, labels: Sequence[str],
                     columns: Mapping[str, Column]) -> str:
    tests = doc.baselines_test
    rows = [[html.escape(name), *(c for lab in labels for c in (
        columns[lab].cell(rec.get(lab)), columns[lab].cell((tests.get(name) or {}).get(lab))))]
            for name, rec in doc.baselines.items()]
    if not rows:
        return "<p>No baselines for this policy family.</p>"
    return _table(["baseline", *(c for lab in labels for c in (columns[lab].header, "test"))],
                  rows)


def _dropped(dropped: Mapping[str, str]) -> str:
    if not dropped:
        return "<p>None: every parameter of the policy was searched.</p>"
    return _table(["parameter", "why it stays at its default"],
                  [[html.escape(k), html.escape(v)] for k, v in dropped.items()])


def _drift(prod: ProductionCheck, labels: Sequence[str]) -> str:
    out = [f"<p><code>{html.escape(prod.source)}</code> ({html.escape(prod.policy)}), "
           "re-evaluated on this window.</p>"]
    for sample, verdict, rows in drift_rows(prod, labels):
        out += [f"<p>On the {sample} sample: {html.escape(verdict)}.</p>",
                _table(["objective", "production", "front #best", "gain"], rows)]
    return "".join(out)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells are HTML already (escaped by the caller)."""
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return (f"<div class='wide'><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody>"
            "</table></div>")


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
        "padding:3px 8px;text-align:right}th{background:#f3f3f3}"
        "pre#command{background:#f6f6f6;padding:.8em;border:1px solid #ddd;"
        "white-space:pre-wrap;overflow-wrap:anywhere}div.wide{overflow-x:auto}"
        "p.warning{background:#fff4e0;border-left:4px solid #e69500;padding:.5em .8em}")
