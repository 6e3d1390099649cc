"""Reports people read: numbers for tables, and the nightly retune's ``report.md`` + PNG."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

from paretosearch.io import write_text
from paretosearch.runs.plots import Marked, plot_front
from paretosearch.runs.records import FrontDocument
from paretosearch.runs.retune_summary import ProductionCheck, RetuneSummary
from paretosearch.runs.units import MAXIMISED, column, front_columns, param_cells

__all__ = ["describe_sample", "drift_rows", "fmt", "write_retune_report"]


def fmt(value: float | None) -> str:
    """A number for a table cell (— for NaN, or None: NaN as stored in JSON)."""
    if value is None or math.isnan(value):
        return "—"
    if abs(value) < 1e-9:  # float noise around an exact zero (FIFO's prediction error)
        return "0"
    return f"{value:,.4g}" if abs(value) < 1e5 else f"{value:,.0f}"


def write_retune_report(run: Path, doc: FrontDocument, summary: RetuneSummary) -> None:
    """``report.md`` and ``report.png`` of a retune: its window and search, the front
    (``doc``: the run's ``front.json`` as :meth:`RunStore.read_front` gives it) with the
    baselines, and the production config's drift."""
    prod, start = summary.production, summary.start
    labels = summary.objectives
    plot_front(doc, run / "report.png", title=f"retune {run.name}: {' vs '.join(labels)}",
               marked=Marked("production", prod.train, prod.test) if prod else None)
    columns = front_columns(doc, labels)
    w, warm, passed = start.window, start.warm_start, start.not_resumed
    lines = [f"# Retune {run.name}: {' vs '.join(labels)}", "",
             f"- window: {w.jobs:,} jobs of {w.jobs_in_trace:,}, arrivals "
             f"{w.start_s:,.0f} s .. {w.end_s:,.0f} s "
             f"({(w.end_s - w.start_s) / 3600:,.1f} h), digest `{w.digest}`",
             f"- search: {summary.policy}, objectives {', '.join(labels)}; "
             f"{summary.evaluations_run} evaluations run, "
             f"{summary.evaluations_from_cache} from the cache"
             + (" (resumed)" if start.resumed else ""),
             f"- warm start: {warm.configs} configurations from {warm.source}" if warm.source
             else "- warm start: none (cold start)",
             *([f"- not resumed: `{passed.run}` ({passed.why}), left as it is"]
               if passed else []),
             f"- wall time: {summary.wall_s:,.0f} s (from reading the window to publishing)",
             "", *(f"**Warning:** {m}.\n" for m in doc.warnings()),
             "![front](report.png)", "", "## Front", "",
             "Each objective on the training sample and, under *test*, on the held-out "
             "test sample; `#` numbers the points of the plot."
             + (f" {MAXIMISED}: larger is better." if any(
                 columns[lab].maximize for lab in labels) else ""), "",
             "| # | " + " | ".join(f"{columns[lab].header} | test" for lab in labels)
             + " | dominated on test by | parameters |",
             "|---" * (3 + 2 * len(labels)) + "|"]
    front = doc.front
    params = list(front[0].params) if front else []
    shown = {p: param_cells([e.params[p] for e in front]) for p in params}
    for i, e in enumerate(front):
        test = e.test_metrics or {}
        cells = " | ".join(f"{columns[lab].cell(e.objectives[lab])} | "
                           f"{columns[lab].cell(test.get(lab))}" for lab in labels)
        lines.append(f"| {i} | {cells} | {', '.join(e.dominated_by or ())} | "
                     + ", ".join(f"{p}={shown[p][i]}" for p in params) + " |")
    for name, rec in doc.baselines.items():
        test = doc.baselines_test.get(name) or {}
        cells = " | ".join(f"{columns[lab].cell(rec.get(lab))} | "
                           f"{columns[lab].cell(test.get(lab))}" for lab in labels)
        lines.append(f"| {name} | {cells} | | baseline |")
    lines += ["", "## Production config", ""]
    if prod is None:
        lines.append("No production config given (the spec's `production` field).")
    else:
        lines += _drift_lines(prod, labels)
    write_text(run / "report.md", "\n".join(lines) + "\n")


def drift_rows(prod: ProductionCheck, labels: Sequence[str]
               ) -> list[tuple[str, str, list[list[str]]]]:
    """The production config's drift on each sample: ``(sample, verdict, rows)``, a row per
    objective: its name, production's value, the best front entry's, and the gain."""
    out = []
    for sample, d in (("train", prod.drift_train), ("test", prod.drift_test)):
        verdict = (f"dominated by {len(d.dominated_by)} front configurations; the safest "
                   f"switch is #{d.best}" if d.dominated else "not dominated by the new front")
        rows = []
        for lab in labels:
            row = d.objectives[lab]
            shown = column(lab, [row.production, row.front])
            rows.append([shown.header, shown.cell(row.production), shown.cell(row.front),
                         f"{100 * row.gain:+.1f} %" if row.gain is not None else "—"])
        out.append((sample, verdict, rows))
    return out


def _drift_lines(prod: ProductionCheck, labels: Sequence[str]) -> list[str]:
    lines = [f"`{prod.source}` ({prod.policy}), re-evaluated on this window.", ""]
    for sample, verdict, rows in drift_rows(prod, labels):
        lines += [f"On the {sample} sample: " + (f"**{verdict}**" if verdict.startswith("dom")
                                                   else verdict) + ".", "",
                  "| objective | production | front #best | gain |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    since = prod.since_previous
    if since:
        lines += [f"Since {since.run}:", ""]
        for lab, row in since.objectives.items():
            shown = column(lab, [row.before, row.now])
            lines.append(f"- {shown.header}: {shown.cell(row.before)} → {shown.cell(row.now)}"
                         + (f" ({100 * row.change:+.1f} %, positive = worse)"
                            if row.change is not None else ""))
    return lines


_DRAW = re.compile(r"generated\(n=(\d+), load=([^,]+), seed=SeedSequence\(\s*entropy=(\d+),"
                   r"\s*spawn_key=\((\d+),?\),?\s*\)\)")
_ADDED = {"+sharing(synthetic)": ", with SYNTHETIC GPU-sharing requirements"}


def describe_sample(source: str) -> str:
    """A workload's source (:attr:`Workload.source`) in words: ``1,000 generated jobs at
    load 0.9 (seed 0, draw 2)`` rather than a ``SeedSequence`` repr; a trace's half as
    ``trace.csv, first half``."""
    text = _DRAW.sub(lambda m: f"{int(m[1]):,} generated jobs at load {m[2]} (seed {m[3]}, "
                               f"draw {int(m[4]) + 1})", source)
    for part, words in _ADDED.items():
        text = text.replace(part, words)
    text = re.sub(r"\+(SLO|MIX\d)", r" with \1 deadlines", text)
    text = re.sub(r"\+early-stop\(([^)]*)\)", r", \1 of the jobs stopping early", text)
    return text.replace("[train]", ", first half").replace("[test]", ", second half")
