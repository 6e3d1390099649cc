"""Export a chosen configuration to production schedulers: compute a plan, then render it.

Example::

    result = export(json.loads(Path("runs/latest/chosen.json").read_text()), "kueue")
    write_export(result, "out/")  # kueue.yaml; result.cannot_express says what was lost

Targets: Kueue, Volcano, Slurm, YARN, and plain JSON (the plan, the source document and the
cannot-express list). :func:`~paretosearch.export.plan.build_plan` holds the policy
semantics; each renderer only translates the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from paretosearch.export.hpc import render_slurm, render_yarn
from paretosearch.export.kube import render_kueue, render_volcano
from paretosearch.export.plan import (
    ExportError,
    InvalidConfigDocument,
    Plan,
    build_plan,
    plan_dict,
)
from paretosearch.export.render import KUEUE_VERSIONS, Export, ExportOptions
from paretosearch.io import json_text, write_text

__all__ = [
    "FORMATS", "KUEUE_VERSIONS", "Export", "ExportError", "ExportOptions",
    "InvalidConfigDocument", "Plan", "build_plan", "export", "write_export",
]


def render_json(plan: Plan, options: ExportOptions) -> Export:
    """``plan.json``: the plan, the config document it came from, what no target expresses."""
    doc = {"plan": plan_dict(plan), "source": dict(plan.source),
           "cannot_express": list(plan.unexpressed)}
    return Export("json", {"plan.json": json_text(doc)}, plan.unexpressed)


RENDERERS: dict[str, Callable[[Plan, ExportOptions], Export]] = {
    "kueue": render_kueue, "volcano": render_volcano, "slurm": render_slurm,
    "yarn": render_yarn, "json": render_json,
}
FORMATS = tuple(RENDERERS)


def export(doc: Mapping[str, Any], fmt: str, *, options: ExportOptions | None = None,
           source: str = "config document") -> Export:
    """Render config document ``doc`` for target ``fmt`` (one of :data:`FORMATS`).

    Raises:
        ExportError: an unknown format; InvalidConfigDocument: a bad document field.
    """
    if fmt not in RENDERERS:
        raise ExportError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
    options = options or ExportOptions()
    plan = build_plan(doc, source=source).shaped(options.max_classes, options.prefix)
    return RENDERERS[fmt](plan, options)


def write_export(result: Export, out_dir: str | Path) -> list[Path]:
    """Write every file of ``result`` into ``out_dir``, each atomically; their paths."""
    return [write_text(Path(out_dir) / name, text) for name, text in result.files.items()]
