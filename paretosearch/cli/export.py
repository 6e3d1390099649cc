"""The ``export`` command: a chosen configuration as production scheduler configs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from paretosearch.export import (
    FORMATS,
    KUEUE_VERSIONS,
    ExportError,
    ExportOptions,
    Plan,
    build_plan,
    export,
    write_export,
)
from paretosearch.export.plan import deployed_config
from paretosearch.io import MAX_DOCUMENT, load_json, plain_dir, read_bounded
from paretosearch.runs.records import ChosenConfig
from paretosearch.runs.store import RunStore
from paretosearch.runs.units import column
from simulator.errors import ParetoSearchError

__all__ = ["EXPORT_COMMANDS", "add_export_command"]

EPILOG = """examples:
  paretosearch export runs/latest --format kueue            # RUN/chosen.json -> RUN/export/kueue/
  paretosearch export runs/latest --format slurm --nodes 'gpu[01-16]' --out /etc/slurm/ps
  paretosearch export runs/latest --format volcano --index 3 # front entry 3, no select needed
  paretosearch export chosen.json --format kueue --kueue-version v1beta1 --namespace ml
  paretosearch export runs/latest --format json             # the neutral plan

Every export lists what the target cannot express (also written into its files).
"""


def add_export_command(sub: Any) -> None:
    """Add ``export`` to the CLI's subcommands."""
    p = sub.add_parser("export", help="write a chosen configuration as Kueue, Volcano, Slurm "
                                      "or YARN config", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Translate the configuration chosen with 'paretosearch "
                                   "select' (or a front entry)\ninto a production scheduler's "
                                   "config, and say what it cannot express.")
    p.add_argument("run", type=Path, metavar="RUN",
                   help="a run directory (its chosen.json) or a chosen-config JSON file")
    p.add_argument("--format", required=True, choices=FORMATS, help="the target scheduler")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where to write the files (default: RUN/export/FORMAT, or "
                        "export/FORMAT beside a JSON file)")
    p.add_argument("--index", type=int, metavar="N",
                   help="export front entry N of RUN/front.json instead of RUN/chosen.json")
    p.add_argument("--kueue-version", choices=KUEUE_VERSIONS, default=KUEUE_VERSIONS[0],
                   help=f"Kueue API version (default: {KUEUE_VERSIONS[0]})")
    p.add_argument("--namespace", default="default",
                   help="namespace of Kueue's LocalQueues (default: default)")
    p.add_argument("--max-classes", type=int, metavar="N",
                   help="at most N size-class queues: adjacent classes are merged, the "
                        "smallest shares first (default: one queue per class)")
    p.add_argument("--prefix", default="", metavar="TEXT",
                   help="put before every queue name, e.g. 'team-a-' (default: none)")
    p.add_argument("--nodes", default="ALL", metavar="NODELIST",
                   help="Slurm nodes of every partition, e.g. 'gpu[01-16]' (default: ALL)")


def _document(run: Path, index: int | None) -> dict[str, Any]:
    """The config document: a JSON file, RUN/chosen.json, or RUN's front entry ``index``."""
    if run.is_dir() and index is not None:
        store = RunStore(run)
        front = store.read_front().front
        if not 0 <= index < len(front):
            raise ExportError(f"{run}: --index {index}: the front has {len(front)} entries "
                              f"(0 to {len(front) - 1}); 'paretosearch front {run}' lists them")
        return store.front_choice(index).to_dict()
    if index is not None:
        raise ExportError(f"{run}: --index needs a run directory, not a file")
    path = run / "chosen.json" if run.is_dir() else run
    if run.is_dir() and not path.exists():
        raise ExportError(f"{run}: no chosen.json: run 'paretosearch select {run}' first or "
                          "pass --index N")
    try:
        doc = load_json(read_bounded(path, MAX_DOCUMENT, inside=run if run.is_dir() else None))
    except (ParetoSearchError, ValueError, RecursionError) as exc:
        raise ExportError(f"{path}: cannot read a config document: {exc}") from exc
    if not isinstance(doc, dict):
        raise ExportError(f"{path}: a config document is a JSON object, not "
                          f"{type(doc).__name__}")
    return doc


def _export(args: argparse.Namespace, console: Console) -> None:
    options = ExportOptions(kueue_version=args.kueue_version, namespace=args.namespace,
                            nodes=args.nodes, max_classes=args.max_classes, prefix=args.prefix)
    doc = _document(args.run, args.index)
    source = str(args.run / "chosen.json" if args.run.is_dir() and args.index is None
                 else args.run)
    result = export(doc, args.format, options=options, source=source)
    if args.out is None:  # the run's own export folder: never a link out of the run
        folder = args.run if args.run.is_dir() else args.run.parent
        out = plain_dir(plain_dir(folder / "export") / args.format)
    else:
        out = args.out
    paths = write_export(result, out)
    table = Table(title=f"{args.format} export of {doc.get('policy')} from {source}")
    table.add_column("file")
    table.add_column("bytes", justify="right")
    for path in paths:
        table.add_row(str(path), f"{path.stat().st_size:,}")
    console.print(table)
    for warning in result.warnings:
        console.print(f"[bold yellow]warning:[/bold yellow] {warning}", highlight=False)
    _deployment_cost(doc, build_plan(doc, source=source).shaped(options.max_classes),
                     args.format, console)
    console.print(f"[bold]cannot express in {args.format}[/bold] "
                  f"({len(result.cannot_express)}, also written into the files):")
    for item in result.cannot_express:
        console.print(f"  - {item}", highlight=False)


DEPLOYMENT_METRICS = (("jct", "avg"), ("jct", "p99"), ("wait", "avg"), ("unfairness", "avg"),
                      ("utilization", "avg"))


def _deployment_cost(doc: dict[str, Any], plan: Plan, target: str, console: Console) -> None:
    """The config as searched beside the queues exported to ``target`` (:func:`deployed_config`),
    both simulated on one generated workload (1,000 jobs, load 0.9) of the config's cluster."""
    from policies import make_policy
    from simulator import generate, list_profiles, load_profile, simulate, summary

    deployed = deployed_config(plan)
    profile = (doc.get("cluster") or {}).get("profile")
    if deployed is None or profile not in list_profiles():
        console.print("[dim]what deployment costs is simulated for configs without job tiers on a "
                      "shipped cluster profile; this one is not[/dim]")
        return
    cluster = load_profile(profile)
    workload = generate(1000, load=0.9, gpus=cluster.total_gpus, seed=0)
    runs = {"as searched": (doc["policy"], ChosenConfig.from_dict(doc, "config").deployed),
            "as exported": (deployed["policy"], deployed["params"])}
    stats = {name: summary(simulate(workload, cluster, make_policy(policy, params)
                                    .fit(workload)))
             for name, (policy, params) in runs.items()}
    table = Table(title=f"what deployment costs: both simulated on 1,000 generated jobs "
                        f"(load 0.9) on {profile}",
                  caption=f"as exported: the {target} queues simulated by the 'quota' policy "
                          "(whole gangs on integer GPU quotas, idle GPUs lent, reclaim"
                          + (", as Kueue runs them)" if target == "kueue" else
                             f"; Kueue's cohort semantics, which {target} follows only "
                             "roughly)"))
    for name in ("metric", *runs, "change"):
        table.add_column(name, justify="left" if name == "metric" else "right")
    for metric, measure in DEPLOYMENT_METRICS:
        a, b = (stats[name][metric][measure] for name in runs)
        row = column(f"{metric}:{measure}", [a, b])  # the unit in the row's header
        change = f"{100 * (b - a) / abs(a):+.1f} %" if a else "—"
        table.add_row(row.header, row.cell(a), row.cell(b), change)
    console.print(table)


EXPORT_COMMANDS: dict[str, Callable[[argparse.Namespace, Console], None]] = {"export": _export}
"""The export command's handler."""
