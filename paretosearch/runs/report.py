"""Reports people read: numbers for tables, and the nightly retune's ``report.md`` + PNG."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paretosearch.io import write_text
from paretosearch.runs.plots import Marked, plot_front
from paretosearch.runs.records import front_warnings
from paretosearch.runs.retune_summary import ProductionCheck, RetuneSummary

__all__ = ["drift_rows", "fmt", "write_retune_report"]


def fmt(value: float | None) -> str:
    """A number for a table cell (— for NaN, or None: NaN as stored in JSON)."""
    if value is None or math.isnan(value):
        return "—"
    if abs(value) < 1e-9:  # float noise around an exact zero (FIFO's prediction error)
        return "0"
    return f"{value:,.4g}" if abs(value) < 1e5 else f"{value:,.0f}"


def write_retune_report(run: Path, doc: dict[str, Any], summary: RetuneSummary) -> None:
    """``report.md`` and ``report.png`` of a retune: its window and search, the front
    (``doc``: the run's ``front.json`` as :meth:`RunStore.read_front` gives it) with the
    baselines, and the production config's drift."""
    prod, start = summary.production, summary.start
    plot_front(doc, run / "report.png", title=f"retune {run.name}",
               marked=Marked("production", prod.train, prod.test) if prod else None)
    labels = summary.objectives
    w, warm, passed = start.window, start.warm_start, start.not_resumed
    lines = [f"# Retune {run.name}", "",
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
             f"- wall time: {summary.wall_s:,.0f} s", "",
             *(f"**Warning:** {m}.\n" for m in front_warnings(
                 doc["front"], doc.get("baselines") or {}, doc.get("baselines_test") or {})),
             "![front](report.png)", "", "## Front", "",
             "| # | " + " | ".join(f"{lab} | test" for lab in labels)
             + " | dominated on test by | parameters |", "|---" * (3 + 2 * len(labels)) + "|"]
    for i, e in enumerate(doc["front"]):
        test = e.test_metrics or {}
        cells = " | ".join(f"{fmt(e.objectives[lab])} | {fmt(test.get(lab))}"
                           for lab in labels)
        params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in e.params.items())
        lines.append(f"| {i} | {cells} | {', '.join(e.dominated_by or ())} | {params} |")
    tests = doc.get("baselines_test") or {}
    for name, rec in (doc.get("baselines") or {}).items():
        test = tests.get(name) or {}
        cells = " | ".join(f"{fmt(rec.get(lab))} | {fmt(test.get(lab))}" for lab in labels)
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
            rows.append([lab, fmt(row.production), fmt(row.front),
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
            lines.append(f"- {lab}: {fmt(row.before)} → {fmt(row.now)}"
                         + (f" ({100 * row.change:+.1f} %, positive = worse)"
                            if row.change is not None else ""))
    return lines
